"""``git agentrun sync [REMOTE]``: exchange build logs, notes and branches with a remote."""

from __future__ import annotations

import pygit2

from agentrun.store.sync import SyncResult, sync


def sync_with(repo: pygit2.Repository, remote: str = "origin") -> list[str]:
    """Sync with ``remote``; one line per build (and the notes) saying what happened."""
    result: SyncResult = sync(repo, remote)
    return result.lines()
