"""What the build benchmarks share (tasks.py, candidates.py): a throwaway repository's
git, one real ``git agentrun run`` timed to its end with its log, and the implement
sessions' start times read from that log (an event's ``ts`` is to the microsecond)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2
from _common import IDENTITY

from agentrun.events import Event, SessionStarted
from agentrun.store.log import EventLog

# Importing agentrun takes the script's folder off sys.path: the scripts get it from here.
__all__ = ["IDENTITY", "Timed", "cli_env", "git", "implement_sessions", "timed_build"]


def cli_env() -> dict[str, str]:
    """The environment of the ``git agentrun`` processes: this venv's scripts first on PATH,
    the pinned identity, no AGENTRUN_ variable; this process gets the same."""
    for key in [k for k in os.environ if k.startswith("AGENTRUN_")]:
        del os.environ[key]
    os.environ.update(IDENTITY)
    bindir = str(Path(sys.executable).parent)  # where `git-agentrun` is installed
    return {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}")
    return done.stdout.strip()


@dataclass(frozen=True)
class Timed:
    seconds: float
    spawned: float  # wall clock (epoch seconds), to set against the events' ts
    ended: float
    events: list[Event]


def timed_build(repo_dir: Path, env: dict[str, str], goal: str) -> Timed:
    """``git agentrun run GOAL`` to the end: its wall time and its log, checked to exit 0
    at ``build.completed``."""
    spawned, t0 = time.time(), time.perf_counter()
    done = subprocess.run(
        ["git", "agentrun", "run", goal], cwd=repo_dir, env=env, capture_output=True, text=True
    )
    seconds, ended = time.perf_counter() - t0, time.time()
    if done.returncode != 0:
        raise RuntimeError(f"git agentrun run exited {done.returncode}: {done.stderr[-800:]}")
    log = EventLog(pygit2.Repository(str(repo_dir)))
    (slug,) = log.slugs()
    events = [s.event for s in log.read(slug)]
    if events[-1].type != "build.completed":
        raise RuntimeError(f"the build ended at {events[-1].type}")
    return Timed(seconds, spawned, ended, events)


def implement_sessions(events: list[Event]) -> dict[str, float]:
    """Each implement session (its id): when it started (epoch seconds)."""
    return {
        e.payload.session: e.ts.timestamp()
        for e in events
        if isinstance(e.payload, SessionStarted) and e.payload.phase == "implement"
    }
