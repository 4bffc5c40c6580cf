"""``git agentrun sweep``: resume what can go on, report what cannot (DESIGN §9).

A build is resumed when the kernel has work for it (its questions were answered, a
control waits to be acknowledged, or it never ran) and no live lease holds it, or
when its runner died (the lease expired, or its process is gone on this machine).
Parked, paused and elsewhere-running builds are reported, one line each, and so is a
build whose log cannot be read (the sweep goes on with the others).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pygit2

from agentrun.commands.inspect import state_word
from agentrun.commands.logs import Unreadable, read_build
from agentrun.commands.status import JSON_SCHEMA, unreadable_json
from agentrun.config import load_config
from agentrun.errors import AgentrunError
from agentrun.kernel import approval
from agentrun.kernel.decide import Acknowledge, AwaitChecks, Wait, decide
from agentrun.kernel.state import BuildState
from agentrun.runner.deadline import TIME_LIMIT
from agentrun.store.cache import StateCache
from agentrun.store.lease import LeaseInfo, clear_stale, held
from agentrun.store.log import EventLog
from agentrun.store.remote_lease import clear_stale_remote
from agentrun.store.sync import pull
from agentrun.store.transport import Remote

if TYPE_CHECKING:
    from agentrun.runner.build import Observer


@dataclass(frozen=True)
class Swept:
    """One open build and what the sweep did with it."""

    slug: str
    action: Literal["resumed", "skipped"]
    reason: str
    state: str  # the state after the sweep, as `status` names it: stopped, parked, …
    phase: str = ""

    def line(self) -> str:
        where = f" at {self.phase}" if self.phase else ""
        return f"{self.slug}: {self.action} ({self.reason}); {self.state}{where}"

    def as_json(self) -> dict[str, str]:
        return {
            "slug": self.slug,
            "action": self.action,
            "reason": self.reason,
            "state": self.state,
        }


@dataclass(frozen=True)
class SweepReport:
    builds: list[Swept]
    unreadable: Unreadable  # builds whose log cannot be read, with what is wrong

    def as_json(self) -> dict[str, object]:
        return {
            "schema": JSON_SCHEMA,
            "builds": [item.as_json() for item in self.builds],
            "unreadable": unreadable_json(self.unreadable),
        }


def sweep(
    repo: pygit2.Repository,
    remote: str | None = None,
    observer: Observer | None = None,
    stop_at: float | None = None,
) -> SweepReport:
    """Fetch (with a remote), then resume or report every open build, oldest slug first.

    ``remote`` defaults to ``[sync] remote``; ``stop_at`` is a ``time.monotonic()``
    deadline shared by all the builds (a build cut short stays resumable; the ones not
    reached are reported as skipped).
    """
    if remote is None and repo.workdir:
        remote = load_config(Path(repo.workdir)).sync.remote
    where = pull(repo, remote) if remote else None
    log, cache = EventLog(repo), StateCache(repo)
    swept: list[Swept] = []
    unreadable: Unreadable = []
    for slug in sorted(log.slugs()):
        read = read_build(log, cache, slug, unreadable)
        if read is None:
            continue
        if read[1].status != "running":
            clear_stale(repo, slug)  # a runner killed right after the end left its lease
            if where is not None:
                clear_stale_remote(where, slug)
            continue
        state = read[1]
        if stop_at is not None and time.monotonic() >= stop_at:
            holder = _live_holder(repo, slug, where)
            swept.append(_skipped(state, "time limit reached before this build", holder))
            continue
        swept.append(_one(repo, state, where, observer, stop_at))
    return SweepReport(swept, unreadable)


def _one(
    repo: pygit2.Repository,
    state: BuildState,
    where: Remote | None,
    observer: Observer | None,
    stop_at: float | None,
) -> Swept:
    decision = decide(state)
    holder = _live_holder(repo, state.slug, where)
    if isinstance(decision, Wait) and decision.reason != "in-flight":
        return _skipped(state, _waiting(state, decision.reason))
    if holder is not None:
        return _skipped(state, _running_elsewhere(holder), holder)
    if isinstance(decision, Wait):
        why = "its runner stopped mid-phase"
    elif isinstance(decision, Acknowledge):
        why = f"a {decision.control} request waits"
    elif isinstance(decision, AwaitChecks):
        from agentrun.kernel.gate import waiting_for

        why = f"it waits for {waiting_for(state)}"
    elif state.runner is None:
        why = "it never ran"
    elif state.escalations and not state.open_escalations:
        why = "its questions were answered"
    else:
        why = "it has work waiting"
    from agentrun.runner.loop import BASE_UNPUSHED, Runner  # imported only when one runs

    remote = where.name if where is not None else ""
    try:
        outcome = Runner(repo, state.slug, observer, remote=remote, stop_at=stop_at).run()
    except AgentrunError as exc:
        return _skipped(state, str(exc), _live_holder(repo, state.slug, where))
    after = outcome.state
    if outcome.waiting == BASE_UNPUSHED:
        return Swept(after.slug, "skipped", outcome.said, "waiting", after.phase_label)
    if outcome.waiting == TIME_LIMIT:
        why += "; stopped at the time limit"
    # Our runner has ended: a build still running in its log is stopped.
    return Swept(after.slug, "resumed", why, state_word(after, None), after.phase_label)


def _skipped(state: BuildState, reason: str, holder: LeaseInfo | None = None) -> Swept:
    runner = holder.holder if holder is not None else None
    return Swept(state.slug, "skipped", reason, state_word(state, runner), state.phase_label)


def _waiting(state: BuildState, reason: str) -> str:
    if reason == "parked":
        if (asked := approval.waiting(state)) is not None:
            return f"waits for plan approval ({asked.id})"
        ids = ", ".join(e.id for e in state.open_escalations)
        return f"parked on question {ids}"
    return reason


def _live_holder(repo: pygit2.Repository, slug: str, where: Remote | None) -> LeaseInfo | None:
    """Who holds a live lease on the build, here or on the remote (as last fetched)."""
    runner = held(repo, slug, remotes=() if where is None else (where.name,))
    return None if runner is None else runner.info


def _running_elsewhere(info: LeaseInfo) -> str:
    return (
        f"running elsewhere: {info.holder} on {info.host} (pid {info.pid}) holds it until "
        f"{info.expires_at:%Y-%m-%d %H:%M:%S} UTC"
    )
