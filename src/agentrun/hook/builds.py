"""What the hook reads from a pushed build's own log: its base and its config snapshot."""

from __future__ import annotations

from collections.abc import Mapping

import pygit2

from agentrun.errors import AgentrunError, ConfigError
from agentrun.hook.guards import Rules


def snapshot_rules(repo: pygit2.Repository, slug: str, environ: Mapping[str, str]) -> Rules | None:
    """The guards of the config snapshotted in the build's first event, if it has a log."""
    from agentrun.errors import MalformedEventError
    from agentrun.snapshot import read

    created = created_payload(repo, slug)
    config = getattr(created, "config", None)
    if not isinstance(config, dict):
        return None
    try:
        return Rules.of(read(config, f"the config of build {slug}"), environ)
    except (ConfigError, MalformedEventError):
        return None


def build_base(repo: pygit2.Repository, slug: str) -> str | None:
    """The commit the build started from, read from its first event (None: no log here)."""
    base = getattr(created_payload(repo, slug), "base_sha", None)
    return base if isinstance(base, str) else None


def created_payload(repo: pygit2.Repository, slug: str) -> object | None:
    """The payload of the build's first event (``build.created``), live or archived."""
    from agentrun.gitrepo import WALK_OLDEST_FIRST
    from agentrun.store.archive import archived
    from agentrun.store.log import EventLog

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
