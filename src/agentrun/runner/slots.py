"""How many agent sessions run at once: ``[policy] max_parallel`` of one build's tasks,
``max_sessions`` across every build of the repository on this machine.

A session holds one slot of each kind while its agent runs: an exclusive ``flock`` on a
file under ``.git/agentrun/slots/``. The kernel lets go of a lock when its process ends,
however it ends, so a killed runner never keeps a slot. Checks take no slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2

from agentrun.config import Policy
from agentrun.gitrepo import agentrun_dir

POLL_SECONDS = 0.2
ALL = "all"  # the repository-wide slots; a build's are under builds/<slug>


def _take(folder: Path, count: int) -> int | None:
    """An exclusive lock on one of ``count`` slot files in ``folder`` (its fd), or None."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for n in range(count):
        fd = os.open(folder / str(n), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return fd
    return None


def build_slots(repo: pygit2.Repository, slug: str) -> Path:
    """The slot files of build ``slug`` (``max_parallel`` of its sessions at once)."""
    return agentrun_dir(repo) / "slots" / "builds" / slug


@contextlib.contextmanager
def session_slot(
    repo: pygit2.Repository,
    slug: str,
    policy: Policy,
    waiting: Callable[[], None] = lambda: None,
) -> Iterator[None]:
    """Hold a slot of the build and one of the repository while the block runs; wait
    (calling ``waiting`` at each look, which may raise to stop) until both are free."""
    root = agentrun_dir(repo) / "slots"
    while True:
        mine = _take(build_slots(repo, slug), policy.max_parallel)
        if mine is not None:
            shared = _take(root / ALL, policy.max_sessions)
            if shared is not None:
                break
            os.close(mine)
        waiting()
        time.sleep(POLL_SECONDS)
    try:
        yield
    finally:
        os.close(shared)
        os.close(mine)
