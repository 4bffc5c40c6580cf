"""The pre-push hook's added wall time: a push with the hook against the same push without.

    .venv/bin/python bench/hook.py [--quick]

Two pushes to a bare remote on ``file://``, each timed with the installed hook and with
``--no-verify`` (no hook), alternately, and the remote reset between runs:

- an ordinary branch of one commit: the shell shim sees no build branch and lets it
  through without starting Python (target: under 200 ms added);
- a build branch of 20 commits: git-agentrun starts, checks every commit (protected
  paths, secrets), and pushes the build's log and the notes along;
- a branch whose one commit carries an ``Agentrun-Goal`` trailer: git-agentrun starts,
  records the goal's build (its log deleted here between runs, so each run creates it)
  and pushes the log along.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2
from _common import IDENTITY

from agentrun.events import BuildCreated, HumanActor
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

SLUG = "b-bench"
GOAL = "Agentrun-Goal: add a greeting to the README"
COMMITS = 20
CONFIG = """[protect]
paths = ["tests/acceptance/**", ".github/workflows/**"]

[roles]
default = ["scripted"]

[runtimes.scripted]
kind = "script"
script = "agent-script.toml"
"""
TARGET_MS = 200.0


def git(cwd: Path, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}")
    return done.stdout.strip()


def commit(path: Path, name: str, text: str, env: dict[str, str]) -> None:
    target = path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    git(path, "add", "-A", env=env)
    git(path, "commit", "-q", "-m", f"change {name}", env=env)


def setup(root: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """A clone with main pushed, the hook installed, a feature branch and a build branch."""
    remote = root / "remote.git"
    clone = root / "clone"
    git(root, "init", "-q", "--bare", str(remote), env=env)
    git(root, "init", "-q", "-b", "main", str(clone), env=env)
    git(clone, "remote", "add", "origin", remote.as_uri(), env=env)
    (clone / ".agentrun.toml").write_text(CONFIG)
    for i in range(30):
        commit(clone, f"src/module_{i}.py", "".join(f"X{j} = {j}\n" for j in range(50)), env)
    git(clone, "push", "-q", "origin", "main", env=env)
    git(clone, "agentrun", "hook", "install", env=env)

    git(clone, "checkout", "-q", "-b", "feature", env=env)
    commit(clone, "src/feature.py", "FEATURE = True\n", env)
    git(clone, "checkout", "-q", "-b", "goal", "main", env=env)
    git(clone, "commit", "-q", "--allow-empty", "-m", f"ask for a greeting\n\n{GOAL}", env=env)
    git(clone, "checkout", "-q", "main", env=env)

    repo = pygit2.Repository(str(clone))
    base = git(clone, "rev-parse", "HEAD", env=env)
    created = BuildCreated(goal="bench", base_ref="main", base_sha=base, branch=f"agentrun/{SLUG}")
    EventLog(repo, writer="bench").append(SLUG, [Draft(created, HumanActor(login="bench"))], None)
    git(clone, "checkout", "-q", "-b", f"agentrun/{SLUG}", env=env)
    for i in range(COMMITS):
        lines = "".join(f"VALUE_{i}_{j} = {i * j}\n" for j in range(40))
        commit(clone, f"src/work_{i % 7}.py", lines, env)
    head = git(clone, "rev-parse", "HEAD", env=env)
    git(clone, "notes", "--ref", "agentrun", "add", "-m", '{"phase": "implement"}', head, env=env)
    git(clone, "checkout", "-q", "main", env=env)
    return clone, remote


def reset_remote(remote: Path, refs: list[str], env: dict[str, str]) -> None:
    for ref in refs:
        subprocess.run(["git", "update-ref", "-d", ref], cwd=remote, env=env, check=True)


def timed_push(clone: Path, args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(["git", "push", "-q", *args], cwd=clone, env=env, capture_output=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"git push {' '.join(args)} failed: {done.stderr[-800:]!r}")
    return seconds


def compare(
    clone: Path,
    remote: Path,
    branch: str,
    refs: list[str],
    reps: int,
    env: dict[str, str],
    made_here: tuple[str, ...] = (),
) -> tuple[float, float]:
    """Median seconds of the push with the hook and without, taken in turns; the refs
    ``made_here`` are deleted from the clone too before each hooked push."""
    hooked, plain = [], []
    for _ in range(reps):
        reset_remote(remote, refs, env)
        plain.append(timed_push(clone, ["--no-verify", "origin", branch], env))
        reset_remote(remote, refs, env)
        reset_remote(clone, list(made_here), env)
        hooked.append(timed_push(clone, ["origin", branch], env))
    missing = [ref for ref in refs if not git(remote, "for-each-ref", ref, env=env)]
    if missing:
        raise RuntimeError(f"the hooked push left out {', '.join(missing)}")
    return statistics.median(hooked), statistics.median(plain)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few runs (smoke test)")
    args = parser.parse_args()
    reps = 2 if args.quick else 9

    bindir = str(Path(sys.executable).parent)  # where `git-agentrun` is installed
    env = {**os.environ, **IDENTITY, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    os.environ.update(IDENTITY)
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-hook-") as tmp:
        clone, remote = setup(Path(tmp), env)
        ordinary = compare(clone, remote, "feature", ["refs/heads/feature"], reps, env)
        build_refs = [
            f"refs/heads/agentrun/{SLUG}",
            f"refs/agentrun/builds/{SLUG}",
            "refs/notes/agentrun",
        ]
        build = compare(clone, remote, f"agentrun/{SLUG}", build_refs, reps, env)
        goal_log = goal_ref(clone, env)
        # The build's log, and the tracking ref the plain push moved (the commit is new).
        goal_local = (goal_log, "refs/remotes/origin/goal")
        goal = compare(clone, remote, "goal", ["refs/heads/goal", goal_log], reps, env, goal_local)

    print(f"hook: median wall ms of {reps} pushes each, bare remote on file://")
    print(f"{'push':<44} {'hooked':>8} {'plain':>8} {'added':>8}")
    rows = [
        ("ordinary branch, 1 commit", ordinary),
        (f"build branch, {COMMITS} commits (+ log and notes)", build),
        ("branch with a goal, 1 commit (+ its log)", goal),
    ]
    for name, (hooked, plain) in rows:
        added = (hooked - plain) * 1e3
        print(f"{name:<44} {hooked * 1e3:>8.1f} {plain * 1e3:>8.1f} {added:>8.1f}")
    added_ms = (ordinary[0] - ordinary[1]) * 1e3
    verdict = "ok" if added_ms < TARGET_MS else "MISSED"
    print(f"ordinary branch: {added_ms:.1f} ms added (target < {TARGET_MS:.0f} ms: {verdict})")
    print(f"ratio ordinary branch hooked/plain: {ordinary[0] / ordinary[1]:.2f}")
    print(f"ratio build branch hooked/plain: {build[0] / build[1]:.2f}")
    print(f"ratio goal branch hooked/plain: {goal[0] / goal[1]:.2f}")


def goal_ref(clone: Path, env: dict[str, str]) -> str:
    """The log ref of the goal's build: its slug is the goal's key (``hook.goals``)."""
    from agentrun.commands.goals import Goal

    sha = git(clone, "rev-parse", "goal", env=env)
    return f"refs/agentrun/builds/{Goal(sha, GOAL.partition(': ')[2], 'goal').slug}"


if __name__ == "__main__":
    main()
