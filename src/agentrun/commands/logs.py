"""Builds read from their logs: where a log is (live or archived), a build's state with
its error kept apart, and the summary entries ``status`` reads when its index misses
(commands/status.py writes them to the index)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pygit2

from agentrun.errors import AgentrunError, UnknownBuildError
from agentrun.kernel.state import BuildState
from agentrun.kernel.summary import summarize
from agentrun.store.archive import archived
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog, check_slug
from agentrun.store.summary import entry


def locate(repo: pygit2.Repository, slug: str) -> tuple[str, bool]:
    """The tip of a build's log, live or archived."""
    check_slug(slug)
    tip = EventLog(repo).tip_oid(slug)
    if tip is not None:
        return tip, False
    old = archived(repo).get(slug)
    if old is not None:
        return old, True
    raise UnknownBuildError(f"no build named {slug!r}: `git agentrun status` lists the builds")


Unreadable = list[tuple[str, str]]  # (slug, what is wrong)


def read_build(
    log: EventLog, cache: StateCache, slug: str, unreadable: Unreadable, at: str | None = None
) -> tuple[str, BuildState] | None:
    """A build's tip and state, or None with the error added to ``unreadable``.

    The rule of every command that reads many builds (`status`, `sweep`): one bad log
    is reported and hides no other.
    """
    try:
        return load_state(log, cache, slug, at)
    except AgentrunError as exc:
        unreadable.append((slug, str(exc)))
        return None


def entries_of(
    repo: pygit2.Repository, wanted: Sequence[tuple[str, str | None]]
) -> list[tuple[str, dict[str, Any]] | str]:
    """For each (slug, tip) — tip None: the live ref's — the tip and summary index entry
    read from the log through the state cache, or what is wrong with that log
    (commands/status.py writes them to the index itself, in one write)."""
    log, cache = EventLog(repo), StateCache(repo, summaries=False)
    found: list[tuple[str, dict[str, Any]] | str] = []
    for slug, at in wanted:
        unreadable: Unreadable = []
        read = read_build(log, cache, slug, unreadable, at)
        found.append(unreadable[0][1] if read is None else (read[0], entry(summarize(read[1]))))
    return found
