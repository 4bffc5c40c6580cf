"""A build as the runner holds it: the log's tip, the reduced state, and appends.

Events appended by others (agents' verbs, people's commands) are picked up by
``refresh``; every new event, ours or theirs, is shown to the observer once.

While the runner holds the lease, only it writes what the kernel decides. Without
isolation an agent can still write the repository's refs, so ``refresh`` checks what it
reads: an event of the kernel's kinds this runner did not write (by commit id), a tip
that does not descend from the last one it wrote or read, or the log or the build
branch deleted stop the build with ``LogTamperedError`` before anything is appended on
top of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import pygit2

from agentrun.errors import (
    AgentrunError,
    ConcurrentUpdateError,
    InvalidEventError,
    UnknownBuildError,
)
from agentrun.events import Event, KernelActor
from agentrun.kernel.draft import Draft
from agentrun.kernel.evolve import evolve
from agentrun.kernel.state import BuildState
from agentrun.kernel.tasks import forged, has_part, view
from agentrun.store.append import append_decided
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog, Stored, Tip, build_ref

# What others may append while a runner holds the build: agents' verbs, people's
# requests and answers, and the forge's comment cursor (the Action's comment handling
# may run beside a runner). Every other kind is the kernel's: only the holder writes it.
FROM_OTHERS = frozenset(
    {
        "plan.submitted",
        "plan-review.verdict",
        "code-review.verdict",
        "agent.done",
        "verify.verdict",
        "candidate.selected",
        "escalation.raised",
        "escalation.answered",
        "build.pause-requested",
        "build.resume-requested",
        "build.abort-requested",
        "build.retry-requested",
        "proposal.closed",
        "feedback.received",
        "forge.cursor",
    }
)
KERNEL_FROM_OTHERS = frozenset({"forge.cursor"})


class LogTamperedError(AgentrunError):
    """The build's log or branch changed under the runner in a way no agentrun wrote."""


class Observer(Protocol):
    """Who watches a build run: the terminal, a CI log, or nobody."""

    def event(self, stored: Stored, state: BuildState) -> None:
        """A new event in the log."""

    def activity(self, text: str) -> None:
        """The running session's latest line."""

    def warning(self, text: str) -> None:
        """Something the person must see, whatever else is shown (it is in the log too)."""


class Silent:
    def event(self, stored: Stored, state: BuildState) -> None:
        pass

    def activity(self, text: str) -> None:
        pass

    def warning(self, text: str) -> None:
        pass


class BuildHandle:
    """The build as one runner holds it: the whole build's, or one task's (``task``).

    A task's handle shows the task's view of the build (``state``; the whole build is
    ``full``), and what it appends belongs to the task. Each runner checks the events of
    its own part: the task runners beside it write their tasks' events, and the build's
    runner writes the queue's.
    """

    def __init__(
        self,
        repo: pygit2.Repository,
        slug: str,
        observer: Observer,
        writer: str | None = None,
        task: str | None = None,
    ) -> None:
        self.repo = repo
        self.slug = slug
        self.observer = observer
        self.task = task
        self.log = EventLog(repo, writer)
        self.cache = StateCache(repo)
        self.tip, self.full = load_state(self.log, self.cache, slug)
        if task is not None and not has_part(self.full, task):
            raise UnknownBuildError(f"build {slug} has no task {task!r}{_listed(self.full)}")
        self.written: set[str] = set()  # commit ids of the events this handle appended
        self._unsaved = False  # the state cache holds an older tip than this handle
        self._had_branch = self._branch_ref() in repo.references

    @property
    def state(self) -> BuildState:
        """The state this runner works in: its task's view, or the whole build."""
        return self.full if self.task is None else view(self.full, self.task)

    def refresh(self) -> BuildState:
        """Take in what others appended, after checking that nobody rewrote the log."""
        tip = self.log.tip_oid(self.slug)
        self._check_branch()
        if tip is None:
            raise self._tampered(f"its log {build_ref(self.slug)} was deleted")
        if tip == self.tip:
            return self.state
        if not self.repo.descendant_of(tip, self.tip):
            raise self._tampered(
                f"its log was rewritten: the tip {tip[:10]} does not descend from "
                f"{self.tip[:10]}, the last one this runner wrote or read"
            )
        fresh = list(self.log.walk(tip, stop=self.tip))
        for stored in fresh:
            if stored.oid not in self.written and not self._from_others(stored.event):
                raise self._tampered(
                    f"a {stored.event.type} event (commit {stored.oid[:10]}) appeared in its "
                    "log that this runner did not write"
                )
        for stored in fresh:
            self.full = evolve(self.full, stored.event)
            self.observer.event(stored, self.full)
        self.tip = tip
        self._unsaved = True
        return self.state

    def judged(self) -> str | None:
        """The tip this handle holds, when its state asks for no abort (an abort watcher
        need not read it again); None otherwise."""
        return None if self.full.abort_requested else self.tip

    def save(self) -> None:
        """Write the state this handle holds to the state cache (DESIGN §2), when the cache
        holds an older tip. Not at every event: before another process reads the build (an
        agent's verbs, a task's runner) and when the run ends. A reader of an older cache
        is still right (it applies the newer events), only slower."""
        if self._unsaved:
            self.cache.put(self.slug, self.tip, self.full)
            self._unsaved = False

    def _branch_ref(self) -> str:
        return f"refs/heads/{self.full.branch}"

    def _check_branch(self) -> None:
        if not self._had_branch:
            self._had_branch = self._branch_ref() in self.repo.references
        elif self._branch_ref() not in self.repo.references:
            raise self._tampered(f"its branch {self.state.branch} was deleted")

    def _tampered(self, what: str) -> LogTamperedError:
        return LogTamperedError(
            f"build {self.slug} stopped: {what}, while this runner held it (something other "
            "than agentrun wrote to the repository's refs); nothing was appended on top: "
            f"inspect it with `git agentrun log {self.slug}`"
        )

    def append(self, drafts: Sequence[Draft], fact: bool = True) -> BuildState:
        """Append ``drafts`` atomically.

        A *fact* (what the runner did) is re-appended on the new tip when the log moved;
        anything else raises ``ConcurrentUpdateError`` so the caller re-decides.
        """
        if self.task is not None:
            drafts = [d if d.task else replace(d, task=self.task) for d in drafts]
        if not fact:
            try:
                tip, stored = self.log.append(self.slug, drafts, Tip(self.tip, self.full.seq))
            except ConcurrentUpdateError:
                self.refresh()
                raise
            return self._took(tip, stored)
        lost = False

        def read() -> tuple[Tip, BuildState]:
            nonlocal lost
            if lost:  # the first try is on the tip this runner holds; later ones re-read
                self.refresh()
            lost = True
            return Tip(self.tip, self.full.seq), self.full

        done = append_decided(
            self.log, self.slug, lambda state: drafts, read=read, what=f"the log of {self.slug}"
        )
        if done is None:
            raise InvalidEventError("nothing to append")
        return self._took(done.tip, done.stored)

    def _took(self, tip: Tip, stored: list[Stored]) -> BuildState:
        for item in stored:
            self.written.add(item.oid)
            self.full = evolve(self.full, item.event)
            self.observer.event(item, self.full)
        self.tip = tip.oid
        self._unsaved = True
        return self.state

    def _from_others(self, event: Event) -> bool:
        """An event someone besides this runner may append: agents' verbs and people's
        requests, and whatever belongs to another part of the build (the task runners'
        events for the build's runner; the build runner's and other tasks' for a task's)."""
        if forged(event):
            return False
        return event.task != self.task or _from_others(event)


def _listed(state: BuildState) -> str:
    return f" (its tasks: {', '.join(state.tasks)})" if state.tasks else " (it has no task graph)"


def _from_others(event: Event) -> bool:
    """An event that someone besides the lease holder may append."""
    if event.type not in FROM_OTHERS:
        return False
    return not isinstance(event.actor, KernelActor) or event.type in KERNEL_FROM_OTHERS
