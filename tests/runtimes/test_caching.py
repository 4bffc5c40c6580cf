"""Prompt caching: the ``anthropic`` runtime's breakpoints, and every runtime's cache
figures, against the scripted model server deciding hits as the provider would
(:mod:`support.prompt_cache`), and the real Claude Code and Codex CLIs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runtimes.test_api_runtimes import KEY, call, runtime_config, spec_for
from runtimes.test_cli_runtimes import (
    Watch,
    claude_shell,
    codex_shell,
    spec,
    table_for,
)
from runtimes.test_cli_runtimes import runtime_config as cli_config
from support.model_server import ModelServer, Request, ToolCall, Turn
from support.prompt_cache import MAX_BREAKPOINTS, PromptCache

from agentrun.events import Usage
from agentrun.runtimes.base import SessionControl, make_runtime
from agentrun.runtimes.codex import since
from agentrun.runtimes.codex import usage_of as codex_usage

READS = 6  # tool calls before the model reports: seven requests in one session
BIG = "".join(f"line {i}: some text the model reads back\n" for i in range(300))


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "k-test-123")


def reader(request: Request) -> Turn:
    """Reads a file READS times, then answers: each request repeats the one before."""
    done = len(request.tool_results())
    return call("read_file", path="big.txt") if done < READS else Turn(text="read it")


def marks(value: Any) -> list[Any]:
    """Every ``cache_control`` in a request body, wherever it is."""
    if isinstance(value, dict):
        here = [value["cache_control"]] if "cache_control" in value else []
        return here + [m for v in value.values() for m in marks(v)]
    if isinstance(value, list):
        return [m for v in value for m in marks(v)]
    return []


def run_session(kind: str, tmp_path: Path, cache: PromptCache) -> tuple[Usage, ModelServer]:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "big.txt").write_text(BIG)
    with ModelServer(reader, cache=cache) as server:
        runtime = make_runtime("api", runtime_config(kind, server.url))
        _, turn = runtime.start(spec_for(tmp_path), SessionControl())
    assert turn.ok, turn.error
    return turn.usage, server


def test_anthropic_marks_system_tools_and_the_conversations_end(tmp_path: Path, key: None) -> None:
    _, server = run_session("anthropic", tmp_path, PromptCache())
    asked = server.model_requests()

    assert len(asked) == READS + 1
    ephemeral = {"type": "ephemeral"}
    for request in asked:
        body = request.body
        assert 1 <= len(marks(body)) <= MAX_BREAKPOINTS
        assert body["system"][-1]["cache_control"] == ephemeral
        assert body["tools"][-1]["cache_control"] == ephemeral
        assert all("cache_control" not in tool for tool in body["tools"][:-1])
        latest = body["messages"][-2:]
        for message in latest:
            assert message["content"][-1]["cache_control"] == ephemeral
        # Earlier requests' marks are not kept: each message is marked once at most.
        assert len(marks(body["messages"])) == len(latest)
    assert len(marks(asked[-1].body)) == MAX_BREAKPOINTS


def test_a_turn_of_many_tool_calls_still_reads_the_cache(tmp_path: Path, key: None) -> None:
    """Twelve calls and their results are 25 blocks, past the API's 20-block look-back
    from the conversation's end: the mark on the model's reply keeps the earlier request
    within reach."""
    (tmp_path / "big.txt").write_text(BIG)
    many = tuple(ToolCall("read_file", {"path": "big.txt"}) for _ in range(12))

    def respond(request: Request) -> Turn:
        done = len(request.tool_results())
        return Turn(tool_calls=many) if done < 24 else Turn(text="read")

    with ModelServer(respond, cache=PromptCache()) as server:
        runtime = make_runtime("api", runtime_config("anthropic", server.url))
        _, turn = runtime.start(spec_for(tmp_path), SessionControl())

    assert turn.ok, turn.error
    assert len(server.model_requests()) == 3
    # The third request reads what the second wrote (marked on the end only, it would
    # read nothing and write everything again).
    assert turn.usage.cache_read > turn.usage.cache_write / 3 > 0


def test_the_server_refuses_more_breakpoints_than_the_api_allows() -> None:
    import httpx

    block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [block] * 5}]}
    with ModelServer() as server:
        response = httpx.post(server.url + "/v1/messages", json=body)
    assert response.status_code == 400
    assert "A maximum of 4 blocks with cache_control" in response.json()["error"]["message"]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_later_requests_read_the_earlier_ones_from_the_cache(
    kind: str, tmp_path: Path, key: None
) -> None:
    cached, _ = run_session(kind, tmp_path, PromptCache())
    uncached, _ = run_session(kind, tmp_path / "again", PromptCache(honour=False))

    assert uncached == Usage(tokens_in=uncached.tokens_in, tokens_out=uncached.tokens_out)
    assert cached.tokens == uncached.tokens  # the same input, billed differently
    assert cached.cache_read > cached.tokens_in
    assert (cached.cache_write > 0) == (kind == "anthropic")  # OpenAI writes for free


def test_a_second_request_hits_what_the_first_wrote() -> None:
    """The rule itself: the first request writes up to its last breakpoint, the next one,
    which repeats it and adds a block, reads all of that and writes only the new part."""
    cache = PromptCache(minimum=0)
    mark = {"type": "ephemeral"}
    first = {
        "model": "m",
        "system": [{"type": "text", "text": "s" * 4000, "cache_control": mark}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "q" * 400}]}],
    }
    second = json.loads(json.dumps(first))
    second["messages"][0]["content"][0]["cache_control"] = mark
    second["messages"].append({"role": "assistant", "content": "a" * 800})

    one, two = cache.anthropic(first), cache.anthropic(second)
    three = cache.anthropic(second)

    assert one.cache_read == 0 and one.cache_write > 900 and one.tokens_in > 90
    assert two.cache_read == one.cache_write  # the system prompt, as the first wrote it
    assert two.cache_write > 90 and two.tokens_in > 190  # the question; the answer unmarked
    assert (three.cache_read, three.cache_write) == (two.cache_read + two.cache_write, 0)
    assert three.tokens_in == two.tokens_in


def test_openai_caches_a_shared_prefix_from_1024_tokens_in_steps_of_128() -> None:
    cache = PromptCache()
    short = {"model": "m", "messages": [{"role": "user", "content": "x" * 3000}]}
    long = {"model": "m", "messages": [{"role": "user", "content": "y" * 6000}]}
    cache.openai(short)
    assert cache.openai(short).cache_read == 0  # under 1,024 tokens: never cached
    cache.openai(long)
    again = {**long, "messages": [*long["messages"], {"role": "user", "content": "more"}]}
    billed = cache.openai(again)
    assert billed.cache_read >= 1024 and (billed.cache_read - 1024) % 128 == 0
    assert billed.cache_read + billed.tokens_in > 1500
    assert cache.openai({**again, "model": "other"}).cache_read == 0


# --- the CLIs ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["claude", "codex"])
def test_the_clis_cache_figures_are_read_from_their_streams(kind: str, tmp_path: Path) -> None:
    def respond(request: Request) -> Turn:
        if len(request.tool_results()) >= 2:
            return Turn(text="done", tokens_out=5)
        command = "echo cached"
        return Turn(
            tool_calls=(claude_shell(command) if kind == "claude" else codex_shell(command),)
        )

    with ModelServer(respond, cache=PromptCache()) as server:
        runtime = make_runtime(kind, cli_config(table_for(kind, server.url, tmp_path)))
        handle, result = runtime.start(spec(tmp_path), Watch())
        asked = len(server.model_requests())
    said = runtime.end(handle).text

    assert result.ok, said
    assert asked >= 3
    usage = result.usage
    # The CLI's long system prompt and tools are read back on every request after the first.
    assert usage.cache_read > usage.tokens_in, said
    if kind == "claude":  # Claude Code marks its own breakpoints: the first request writes
        assert usage.cache_write > 0, said
    else:
        assert usage.cache_write == 0
    assert "cache read" in said  # the transcript names them


def test_codex_counts_cached_input_apart_and_a_resumed_turn_only_its_own() -> None:
    before = codex_usage({"input_tokens": 1000, "cached_input_tokens": 600, "output_tokens": 50})
    now = codex_usage({"input_tokens": 2500, "cached_input_tokens": 1800, "output_tokens": 90})

    assert before == Usage(tokens_in=400, tokens_out=50, cache_read=600)
    assert since(now, before) == Usage(tokens_in=300, tokens_out=40, cache_read=1200)
