"""Prompt caching: the billed input cost of a tool loop with caching, as a ratio to the
same loop without it.

    .venv/bin/python bench/caching.py [--quick]

The real ``anthropic`` runtime runs one session of ``TURNS`` tool calls (the model reads
one of agentrun's own source files per turn, then answers) against the tests' scripted
``ModelServer``, whose prompt cache (``tests/support/prompt_cache.py``) decides hits the
way the Messages API does: from the request's ``cache_control`` breakpoints and whether
the prefix up to each is byte-identical to one written before, four characters a token,
nothing cached under 1,024 tokens. The baseline is the same session against a server
that counts the same tokens but ignores the breakpoints (``PromptCache(honour=False)``),
measured in the same run. Input is priced at Claude Sonnet's list prices, per million
tokens: $3 at the full rate, $0.30 read from the cache, $3.75 written to it (the
five-minute cache). ``--quick``: 5 turns.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import IDENTITY  # noqa: F401  (bench helpers are imported before agentrun)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support.model_server import ModelServer, Request, ToolCall, Turn  # noqa: E402
from support.prompt_cache import PromptCache  # noqa: E402

from agentrun.config import RuntimeConfig  # noqa: E402
from agentrun.events import Usage  # noqa: E402
from agentrun.runtimes.base import SessionControl, SessionSpec, make_runtime  # noqa: E402

TURNS = 20
PER_MILLION = {"input": 3.00, "cache read": 0.30, "cache write": 3.75}  # Claude Sonnet
SOURCES = sorted((ROOT / "src" / "agentrun" / "runtimes").glob("*.py"))
KEY = "BENCH_ANTHROPIC_KEY"


def input_cost(usage: Usage) -> float:
    return (
        usage.tokens_in * PER_MILLION["input"]
        + usage.cache_read * PER_MILLION["cache read"]
        + usage.cache_write * PER_MILLION["cache write"]
    ) / 1e6


def reader(turns: int) -> object:
    def respond(request: Request) -> Turn:
        done = len(request.tool_results())
        if done >= turns:
            return Turn(text="I have read them.", tokens_out=20)
        path = SOURCES[done % len(SOURCES)].name
        return Turn(text=f"reading {path}", tool_calls=(ToolCall("read_file", {"path": path}),))

    return respond


def session(workdir: Path, cache: PromptCache, turns: int) -> tuple[Usage, int]:
    """One session of ``turns`` tool calls; its usage and how many requests it made."""
    with ModelServer(reader(turns), cache=cache) as server:  # type: ignore[arg-type]
        config = RuntimeConfig(kind="anthropic", base_url=server.url, model="mock", api_key_env=KEY)
        spec = SessionSpec(
            session="s-bench",
            build="bench",
            phase="implement",
            round=1,
            attempt=1,
            role="implement",
            prompt="Read the runtime modules one by one, then say you have read them.",
            workdir=workdir,
            env={KEY: "bench-key"},
            budget_seconds=120,
            repo_root=workdir,
        )
        _, turn = make_runtime("bench", config).start(spec, SessionControl())
        asked = len(server.model_requests())
    if not turn.ok:
        sys.exit(f"the session failed: {turn.error}")
    return turn.usage, asked


def describe(name: str, usage: Usage) -> str:
    return (
        f"{name:>9}: {usage.tokens_in:>8,} in, {usage.cache_read:>8,} cache read, "
        f"{usage.cache_write:>7,} cache write: ${input_cost(usage):.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 turns")
    args = parser.parse_args()
    turns = 5 if args.quick else TURNS
    workdir = Path(tempfile.mkdtemp(prefix="agentrun-bench-caching-"))
    try:
        for source in SOURCES:
            shutil.copy(source, workdir / source.name)
        cached, asked = session(workdir, PromptCache(), turns)
        plain, _ = session(workdir, PromptCache(honour=False), turns)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert cached.tokens == plain.tokens, (cached, plain)  # the same prompts, billed apart
    print(f"{turns} tool turns, {asked} requests, {plain.tokens_in:,} input tokens in all")
    print(describe("cached", cached))
    print(describe("uncached", plain))
    ratio = input_cost(cached) / input_cost(plain)
    target = f"target: at most 0.35x at {TURNS} turns"
    print(f"ratio cached/uncached input cost: {ratio:.3f}x ({target})")


if __name__ == "__main__":
    main()
