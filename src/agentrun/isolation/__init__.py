"""Isolation of agents from the runner, its secrets and the repository's insides (issue 9).

``levels`` says which level is in force and why; ``probe`` what this machine allows;
``sandbox`` how a session's programs start at that level (``namespace``: bubblewrap;
``user``: an unprivileged account, see ``account``); ``homes`` the per-build HOME;
``gitdir`` the worktree's private git dir; ``dumpable`` keeps the runner's memory and
environment from processes of its own user.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from agentrun.config import Config
from agentrun.isolation.dumpable import make_undumpable
from agentrun.isolation.levels import IsolationError, Level, resolve
from agentrun.isolation.sandbox import Sandbox, sandbox

__all__ = [
    "IsolationError",
    "Level",
    "Sandbox",
    "for_worktree",
    "resolve",
    "start",
]


def start(config: Config) -> Level:
    """Before a runner runs agents: the level in force (or ``IsolationError``), and the
    runner made non-dumpable."""
    level = resolve(config.isolation)
    make_undumpable()
    return level


def for_worktree(
    repo: pygit2.Repository, config: Config, slug: str, worktree: Path
) -> Sandbox | None:
    """The sandbox a session or check of build ``slug`` runs in (None: not isolated)."""
    return sandbox(resolve(config.isolation), repo, slug, worktree)
