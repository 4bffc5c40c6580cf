"""Session start with and without isolation, as ratios (``[isolation] mode``).

    .venv/bin/python bench/isolation.py [--quick]

A session's start is measured from the moment the runner asks for its sandbox (the
per-build HOME, and for ``user`` the account's ACLs on the worktree) to the agent's
first output line, through ``procs.run_tree`` as every runtime starts its program. The
agent is ``sh -c 'echo ready'`` (the cheapest agent: the worst case for the ratio) and a
Python agent (closer to a real CLI's start). Median of 9 runs each (3 with ``--quick``);
the baseline is the same start without isolation, measured in the same run. A level
this machine cannot give is reported and skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pygit2
from _common import IDENTITY

from agentrun import procs
from agentrun.config import Isolation
from agentrun.isolation import IsolationError, resolve, sandbox
from agentrun.runner.workspace import Workspace

AGENTS = {
    "sh": ["sh", "-c", "echo ready"],
    "python": [sys.executable, "-c", "print('ready', flush=True)"],
}
SLUG = "bench-isolation"


def make_repo(root: Path) -> pygit2.Repository:
    repo_path = root / "repo"
    repo_path.mkdir()
    env = {**os.environ, **IDENTITY}
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo_path, env=env, check=True)
    return pygit2.Repository(str(repo_path))


def first_line(repo: pygit2.Repository, mode: str, worktree: Path, argv: list[str]) -> float:
    """Seconds from asking for the sandbox to the agent's first line of output."""
    seen = threading.Event()
    elapsed: list[float] = []
    began = time.perf_counter()

    def line(_text: str) -> None:
        if not seen.is_set():
            elapsed.append(time.perf_counter() - began)
            seen.set()

    level = resolve(Isolation.model_validate({"mode": mode}))
    box = sandbox(level, repo, SLUG, worktree)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")}
    done = procs.run_tree(argv, cwd=worktree, env=env, timeout=60, on_line=line, sandbox=box)
    if done.exit_code != 0 or not elapsed:
        raise SystemExit(f"the {mode} agent failed: {done.output[-500:]}")
    return elapsed[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs instead of 9")
    runs = 3 if parser.parse_args().quick else 9
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AGENTRUN_WORKTREES"] = str(Path(tmp) / "worktrees")
        repo = make_repo(Path(tmp))
        workspace = Workspace(repo, SLUG, f"agentrun/{SLUG}")
        worktree = workspace.prepare(str(repo.head.target))
        modes = ["none"]
        for mode in ("namespace", "user"):
            try:
                resolve(Isolation.model_validate({"mode": mode}))
                modes.append(mode)
            except IsolationError as exc:
                print(f"{mode}: skipped ({exc})")
        for name, argv in AGENTS.items():
            medians = {}
            for mode in modes:
                first_line(repo, mode, worktree, argv)  # warm: caches, the account's creation
                medians[mode] = statistics.median(
                    first_line(repo, mode, worktree, argv) for _ in range(runs)
                )
                print(f"{name} agent, {mode}: {medians[mode] * 1000:.1f} ms to the first line")
            for mode in modes[1:]:
                ratio = medians[mode] / medians["none"]
                print(f"ratio {mode}/none ({name} agent): {ratio:.2f}")


if __name__ == "__main__":
    main()
