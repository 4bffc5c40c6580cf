"""A no-op sweep over parked builds: what a scheduled CI job pays when nothing can go on.

    .venv/bin/python bench/sweep.py [--quick]

A bare remote on ``file://`` holds N parked builds (each log: created, runner attached,
an open question), written directly with the store API. A fresh clone then runs
``git agentrun sweep --remote origin`` (the scheduled job's work: fetch, reconcile,
decide, check leases, report) cold (first run: states replayed) and warm (states from
the cache), against a baseline measured in the same run: the same no-op fetch, then
``git for-each-ref refs/agentrun`` and reading every log with raw pygit2.
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

import pygit2
from _common import IDENTITY

from agentrun.commands.sweep import sweep as sweep_builds
from agentrun.events import BuildCreated, EscalationRaised, HumanActor, RunnerAttached
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

BUILDS = 100
TRACKING = "+refs/agentrun/*:refs/agentrun-remotes/origin/*"


def git(cwd: Path, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}")
    return done.stdout.strip()


def setup(root: Path, builds: int, env: dict[str, str]) -> Path:
    """A bare remote with ``builds`` parked builds, and a fresh clone of it."""
    seed, remote, clone = root / "seed", root / "remote.git", root / "clone"
    git(root, "init", "-q", "-b", "main", str(seed), env=env)
    (seed / "README.md").write_text("bench\n")
    git(seed, "add", "-A", env=env)
    git(seed, "commit", "-q", "-m", "initial", env=env)
    repo = pygit2.Repository(str(seed))
    base = str(repo.head.target)
    log = EventLog(repo, writer="bench")
    for n in range(builds):
        slug = f"b-{n:03d}"
        created = BuildCreated(goal=f"goal {n}", base_ref="main", base_sha=base, branch=slug)
        attached = RunnerAttached(instance=f"r-{n}", host="bench", pid=n, resumed_from_seq=1)
        question = EscalationRaised(
            id="e1", phase="plan", round=1, source="policy", cause="attempts", question="?"
        )
        drafts = [Draft(created, HumanActor(login="bench")), Draft(attached), Draft(question)]
        log.append(slug, drafts, None)
    git(root, "clone", "-q", "--bare", str(seed), str(remote), env=env)
    git(seed, "push", "-q", remote.as_uri(), "refs/agentrun/*:refs/agentrun/*", env=env)
    git(root, "clone", "-q", remote.as_uri(), str(clone), env=env)
    return clone


def timed(work: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(work, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(work)} exited {done.returncode}: {done.stderr[-800:]}")
    return seconds, done.stdout


def baseline(clone: Path, env: dict[str, str]) -> float:
    """The no-op fetch, the ref listing, and every log read with raw pygit2."""
    t0 = time.perf_counter()
    git(clone, "fetch", "-q", "--prune", "--no-tags", "origin", TRACKING, env=env)
    listed = git(
        clone, "for-each-ref", "--format=%(refname) %(objectname)", "refs/agentrun", env=env
    )
    repo = pygit2.Repository(str(clone))
    events = 0
    for line in listed.splitlines():
        name, oid = line.split()
        if not name.startswith("refs/agentrun/builds/"):
            continue
        for commit in repo.walk(pygit2.Oid(hex=oid), pygit2.enums.SortMode.TOPOLOGICAL):
            json.loads(commit.message.split("\n\n", 1)[1])
            events += 1
    if events != 3 * BUILDS_SEEN[0]:
        raise RuntimeError(f"the baseline read {events} events")
    return time.perf_counter() - t0


BUILDS_SEEN = [BUILDS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few runs (smoke test)")
    args = parser.parse_args()
    reps = 2 if args.quick else 7
    builds = 20 if args.quick else BUILDS
    BUILDS_SEEN[0] = builds

    bindir = str(Path(sys.executable).parent)  # where `git-agentrun` is installed
    env = {**os.environ, **IDENTITY, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    env = {k: v for k, v in env.items() if not k.startswith("AGENTRUN_")}
    os.environ.update(IDENTITY)
    sweep = ["git", "agentrun", "sweep", "--remote", "origin"]
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-sweep-") as tmp:
        clone = setup(Path(tmp), builds, env)
        cold, out = timed(sweep, clone, env)
        lines = out.splitlines()
        if len(lines) != builds or not all("skipped (parked on question e1)" in x for x in lines):
            raise RuntimeError(f"the sweep did not report {builds} parked builds: {out[-800:]}")
        warm, base, inproc = [], [], []
        repo = pygit2.Repository(str(clone))
        for _ in range(reps):
            base.append(baseline(clone, env))
            warm.append(timed(sweep, clone, env)[0])
            t0 = time.perf_counter()
            sweep_builds(repo, "origin")
            inproc.append(time.perf_counter() - t0)

    warm_s, base_s, inproc_s = (statistics.median(x) for x in (warm, base, inproc))
    print(f"sweep: {builds} parked builds, bare remote on file://, median of {reps}")
    print(f"{'what':<52} {'ms':>8}")
    print(f"{'git agentrun sweep --remote origin, cold (first run)':<52} {cold * 1e3:>8.1f}")
    print(f"{'git agentrun sweep --remote origin, warm':<52} {warm_s * 1e3:>8.1f}")
    print(f"{'sweep() in-process, warm (no interpreter start)':<52} {inproc_s * 1e3:>8.1f}")
    print(f"{'baseline: fetch + for-each-ref + raw pygit2 reads':<52} {base_s * 1e3:>8.1f}")
    print(f"per build, warm: {warm_s / builds * 1e3:.2f} ms")
    print(f"ratio sweep warm/baseline: {warm_s / base_s:.2f}")
    print(f"ratio sweep cold/baseline: {cold / base_s:.2f}")
    print(f"ratio sweep() in-process/baseline: {inproc_s / base_s:.2f}")


if __name__ == "__main__":
    main()
