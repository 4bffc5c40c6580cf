"""A build as the runner holds it: the log's tip, the reduced state, and appends.

Events appended by others (agents' verbs, people's commands) are picked up by
``refresh``; every new event, ours or theirs, is shown to the observer once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pygit2

from agentrun.errors import ConcurrentUpdateError
from agentrun.kernel.evolve import evolve
from agentrun.kernel.state import BuildState
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import Draft, EventLog, Stored, Tip

FACT_RETRIES = 50


class Observer(Protocol):
    """Who watches a build run: the terminal, a CI log, or nobody."""

    def event(self, stored: Stored, state: BuildState) -> None:
        """A new event in the log."""

    def activity(self, text: str) -> None:
        """The running session's latest line."""


class Silent:
    def event(self, stored: Stored, state: BuildState) -> None:
        pass

    def activity(self, text: str) -> None:
        pass


class BuildHandle:
    def __init__(
        self, repo: pygit2.Repository, slug: str, observer: Observer, writer: str | None = None
    ) -> None:
        self.repo = repo
        self.slug = slug
        self.observer = observer
        self.log = EventLog(repo, writer)
        self.cache = StateCache(repo)
        self.tip, self.state = load_state(self.log, self.cache, slug)

    def refresh(self) -> BuildState:
        tip = self.log.tip_oid(self.slug)
        if tip is None or tip == self.tip:
            return self.state
        for stored in self.log.walk(tip, stop=self.tip):
            self.state = evolve(self.state, stored.event)
            self.observer.event(stored, self.state)
        self.tip = tip
        self.cache.put(self.slug, tip, self.state)
        return self.state

    def append(self, drafts: Sequence[Draft], fact: bool = True) -> BuildState:
        """Append ``drafts`` atomically.

        A *fact* (what the runner did) is re-appended on the new tip when the log moved;
        anything else raises ``ConcurrentUpdateError`` so the caller re-decides.
        """
        for _ in range(FACT_RETRIES):
            try:
                tip, stored = self.log.append(self.slug, drafts, Tip(self.tip, self.state.seq))
            except ConcurrentUpdateError:
                self.refresh()
                if not fact:
                    raise
                continue
            for item in stored:
                self.state = evolve(self.state, item.event)
                self.observer.event(item, self.state)
            self.tip = tip.oid
            self.cache.put(self.slug, self.tip, self.state)
            return self.state
        raise ConcurrentUpdateError(f"the log of {self.slug} kept moving; run the build again")
