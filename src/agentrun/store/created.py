"""What a build's first event says (``build.created``), read without replaying its log:
its base, its config snapshot. The pre-push hook and the runner's guards read it."""

from __future__ import annotations

import pygit2

from agentrun.errors import AgentrunError
from agentrun.gitrepo import WALK_OLDEST_FIRST
from agentrun.store.archive import archived
from agentrun.store.log import EventLog


def build_base(repo: pygit2.Repository, slug: str) -> str | None:
    """The commit the build started from, read from its first event (None: no log here)."""
    base = getattr(created_payload(repo, slug), "base_sha", None)
    return base if isinstance(base, str) else None


def created_payload(repo: pygit2.Repository, slug: str) -> object | None:
    """The payload of the build's first event (``build.created``), live or archived."""
    try:
        # An archived build's log is still there, behind the archive.
        tip = EventLog(repo).tip_oid(slug) or archived(repo).get(slug)
        if tip is None:
            return None
        walker = repo.walk(tip, WALK_OLDEST_FIRST)
        walker.simplify_first_parent()
        first = next(iter(walker))
        return EventLog(repo).event_at(str(first.id)).payload
    except AgentrunError:
        return None  # not a slug, or not a log
