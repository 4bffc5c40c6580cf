"""An agent verb through MCP against the same verb as a shell command, in one run.

    .venv/bin/python bench/mcp.py [--quick]

On a throwaway repository with one build: ``tools/call context`` on a running ``git
agentrun mcp`` (the per-call cost an agent pays once its CLI has started the server),
the server's start-up (spawned until its ``initialize`` answer is read), and ``git
agentrun agent context`` as a process (what an agent's shell runs), each the median of
several runs. ``context`` reads the build's log and writes the context file, as every
verb reads the log before it queues its report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import pygit2
from _builds import cli_env, git

from agentrun.commands.build import create_build

GOAL = "Add the feature"


def make_build(root: Path) -> tuple[Path, str]:
    repo_dir = root / "repo"
    repo_dir.mkdir()
    git(repo_dir, "init", "-q", "-b", "main")
    (repo_dir / "README.md").write_text("# bench\n")
    # A command agent is configured (never run: the benchmark only reads the build).
    (repo_dir / ".agentrun.toml").write_text(
        '[roles]\ndefault = ["agent"]\n[runtimes.agent]\nkind = "command"\ncommand = ["true"]\n'
    )
    git(repo_dir, "add", "README.md", ".agentrun.toml")
    git(repo_dir, "commit", "-q", "-m", "init")
    slug = create_build(pygit2.Repository(str(repo_dir)), GOAL).slug
    return repo_dir, slug


def send(stdin: IO[bytes], stdout: IO[bytes], rid: int, method: str, params: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    stdin.write(json.dumps(body).encode() + b"\n")
    stdin.flush()
    answer = json.loads(stdout.readline())
    if "result" not in answer or answer["result"].get("isError"):
        raise RuntimeError(f"{method} failed: {answer}")
    return answer["result"]


INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b"}}


def start(repo_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float]:
    """A server, initialized; the seconds from spawning it to reading its answer."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        ["git-agentrun", "mcp"],
        cwd=repo_dir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    send(proc.stdin, proc.stdout, 0, "initialize", INITIALIZE)
    return proc, time.perf_counter() - t0


def stop(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def mcp_calls(repo_dir: Path, env: dict[str, str], runs: int) -> list[float]:
    proc, _ = start(repo_dir, env)
    assert proc.stdin is not None and proc.stdout is not None
    send(proc.stdin, proc.stdout, 1, "tools/call", {"name": "context", "arguments": {}})
    times = []
    for n in range(runs):
        t0 = time.perf_counter()
        send(proc.stdin, proc.stdout, n + 2, "tools/call", {"name": "context", "arguments": {}})
        times.append(time.perf_counter() - t0)
    stop(proc)
    return times


def mcp_starts(repo_dir: Path, env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        proc, seconds = start(repo_dir, env)
        times.append(seconds)
        stop(proc)
    return times


def shell_verbs(repo_dir: Path, env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(
            ["git", "agentrun", "agent", "context"], cwd=repo_dir, env=env, capture_output=True
        )
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise RuntimeError(f"agent context exited {done.returncode}: {done.stderr!r}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few runs (a smoke test)")
    quick = parser.parse_args().quick
    runs = 3 if quick else 15
    base = cli_env()
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-mcp-") as tmp:
        repo_dir, slug = make_build(Path(tmp))
        session = {"AGENTRUN_BUILD": slug, "AGENTRUN_PHASE": "plan@1", "AGENTRUN_SESSION": "s-b"}
        env = {**base, **session}
        calls = statistics.median(mcp_calls(repo_dir, env, runs * 4))
        starts = statistics.median(mcp_starts(repo_dir, env, runs))
        shell = statistics.median(shell_verbs(repo_dir, env, runs))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, medians of {runs}+ runs")
    print(f"mcp tools/call context (server running): {calls * 1000:8.1f} ms")
    print(f"mcp server start (spawn to initialize):  {starts * 1000:8.1f} ms")
    print(f"shell verb `git agentrun agent context`:  {shell * 1000:8.1f} ms")
    print(f"ratio mcp call/shell verb: {calls / shell:.3f}")
    print(f"ratio mcp start/shell verb: {starts / shell:.3f}")


if __name__ == "__main__":
    main()
