"""Kernel overhead of the whole demo pipeline, with its instant scripted agent.

    .venv/bin/python bench/demo.py [--quick] [--profile]

Runs the demo build (``make_demo_repo`` + ``create_build`` + ``run_build``) several
times. The time spent in check commands is estimated by running the demo's verify
command by itself (``bash -c``, in the demo repository, as the runner does) and
multiplying by the number of check runs in the log; what is left is agentrun's own
overhead: the log, the state, the workspace and phase commits, the local forge.
Baseline in the same run: as many plain ``git commit --allow-empty`` CLI calls as the
build has events; the overhead is given per event and per agent session against it.

``--profile``: one more demo build under cProfile (not timed), printed as two short
tables: agentrun's functions by cumulative time, and anything by its own time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2
from _common import IDENTITY
from _profile import table

from agentrun.commands.build import create_build, run_build
from agentrun.commands.demo import make_demo_repo
from agentrun.config import load_config
from agentrun.events import SessionStarted, VerifyCompleted
from agentrun.store.log import EventLog

GOAL = "Fix the off-by-one in pager.py"


def one_demo(root: Path) -> tuple[float, int, int, int, str, Path]:
    """Seconds for create + run, events, check runs, sessions, final state, repo dir."""
    repo_dir = make_demo_repo(root)
    repo = pygit2.Repository(str(repo_dir))
    t0 = time.perf_counter()
    created = create_build(repo, GOAL)
    outcome = run_build(repo, created.slug)
    seconds = time.perf_counter() - t0
    events = [s.event for s in EventLog(repo).read(created.slug)]
    checks = sum(
        1
        for e in events
        if isinstance(e.payload, VerifyCompleted) and e.payload.exit_code is not None
    )
    sessions = sum(1 for e in events if isinstance(e.payload, SessionStarted))
    return seconds, len(events), checks, sessions, outcome.state.state_name, repo_dir


def check_seconds(repo_dir: Path, reps: int) -> float:
    """Median seconds of the demo's verify command, run by itself like the runner runs it."""
    command = load_config(repo_dir).verify[0].command
    assert command is not None
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", command], cwd=repo_dir, capture_output=True)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def git_commits_seconds(root: Path, count: int) -> float:
    path = root / "baseline"
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    t0 = time.perf_counter()
    for i in range(count):
        subprocess.run(
            ["git", "commit", "-q", "--allow-empty", "-m", f"event {i}"], cwd=path, check=True
        )
    return time.perf_counter() - t0


def profiled(root: Path) -> list[str]:
    """A demo build (create + run) under cProfile, as ``_profile.table`` prints it."""
    repo_dir = make_demo_repo(root)
    repo = pygit2.Repository(str(repo_dir))
    profile = cProfile.Profile()
    profile.enable()
    run_build(repo, create_build(repo, GOAL).slug)
    profile.disable()
    return table(pstats.Stats(profile))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--profile", action="store_true", help="print a profile of one build")
    args = parser.parse_args()
    runs, check_reps = (1, 2) if args.quick else (7, 3)

    os.environ.update(IDENTITY)
    results = []
    check_runs: list[float] = []
    baselines: list[float] = []
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-demo-") as tmp:
        # Each run is followed by its baselines, so a noisy moment hits both alike.
        for i in range(runs):
            root = Path(tmp) / f"run-{i}"
            seconds, events, checks, sessions, state, repo_dir = one_demo(root)
            if state != "complete":
                raise SystemExit(f"the demo build ended {state}, not complete")
            results.append((seconds, events, checks, sessions))
            check_runs.append(check_seconds(repo_dir, check_reps))
            baselines.append(git_commits_seconds(root, events))
            shutil.rmtree(root)
        profile = profiled(Path(tmp) / "profiled") if args.profile else []

    total = statistics.median(r[0] for r in results)
    check_s, baseline_s = statistics.median(check_runs), statistics.median(baselines)
    _, events, checks, sessions = results[0]
    overhead = total - checks * check_s
    print(f"demo: {runs} run(s) of the demo build, median")
    print(f"  total (create + run)        {total * 1e3:9.1f} ms")
    each = f"({checks} x {check_s * 1e3:.1f} ms)"
    print(f"  check commands              {checks * check_s * 1e3:9.1f} ms {each}")
    print(f"  agentrun overhead           {overhead * 1e3:9.1f} ms")
    print(f"  events                      {events:9d} ({sessions} agent sessions)")
    print(f"  overhead per event          {overhead / events * 1e3:9.2f} ms")
    print(
        f"  overhead per session        {overhead / sessions * 1e3:9.2f} ms "
        f"({events / sessions:.1f} events each)"
    )
    commit_s = baseline_s / events
    print(
        f"  baseline: {events} x `git commit --allow-empty` {baseline_s * 1e3:9.1f} ms "
        f"({commit_s * 1e3:.2f} ms each)"
    )
    print(
        f"  per event {overhead / events / commit_s:.1f} commits' time, "
        f"per session {overhead / sessions / commit_s:.1f}"
    )
    for line in profile:
        print(line)
    print(f"ratio overhead/git-commits: {overhead / baseline_s:.1f}")


if __name__ == "__main__":
    main()
