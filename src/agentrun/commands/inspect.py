"""Reading builds: the rows of ``status``, the timeline of ``log``, the detail of ``show``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pygit2

from agentrun.errors import AgentrunError, UnknownBuildError
from agentrun.kernel.ladder import rung_spend
from agentrun.kernel.state import BuildState, Escalation, TaskState
from agentrun.kernel.tasks import branch_of, task_phase, task_state_name
from agentrun.store.archive import archived
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import held, task_key
from agentrun.store.log import EventLog, Stored, check_slug

JSON_SCHEMA = 1
STOPPED = "stopped"


def state_word(state: BuildState, runner: str | None) -> str:
    """The state as `status` names it: ``stopped`` where the pure state says running but no
    live runner holds the build, so `resume` or `sweep` would continue it (DESIGN §13)."""
    if state.state_name == "running" and runner is None:
        return STOPPED
    return state.state_name


@dataclass(frozen=True)
class TaskRow:
    """One task of a build's graph as `status` and `show` list it."""

    task: TaskState
    state_name: str
    phase: str
    escalation: Escalation | None
    branch: str
    runner: str | None = None

    def as_json(self) -> dict[str, Any]:
        t = self.task
        return {
            "id": t.id,
            "state": self.state_name,
            "phase": self.phase,
            "round": t.impl_round,
            "escalation": None if self.escalation is None else self.escalation.id,
            "usage": t.usage.model_dump(mode="json"),
            "sessions": t.sessions,
            "deps": list(t.deps),
            "branch": self.branch,
            "runner": self.runner,
        }


def task_rows(
    state: BuildState, runners: dict[str, str] | None = None, build_runner: str | None = None
) -> list[TaskRow]:
    """The build's tasks in the plan's order. With ``runners`` (the live holders of the
    task leases, as `status` reads them), a running task that neither its own runner nor
    the build's holds is ``stopped``, as a build is."""
    found = []
    for t in state.tasks.values():
        word = task_state_name(state, t)
        runner = None if runners is None else runners.get(t.id)
        if runners is not None and word == "running" and runner is None and build_runner is None:
            word = STOPPED
        asked = next((e for e in state.open_escalations if e.task == t.id), None)
        branch = branch_of(state.branch, t.id)
        found.append(TaskRow(t, word, task_phase(t), asked, branch, runner))
    return found


@dataclass(frozen=True)
class BuildRow:
    state: BuildState
    tip: str
    archived: bool
    runner: str | None
    task_runners: dict[str, str] = field(default_factory=dict)  # task id -> live holder

    @property
    def state_name(self) -> str:
        """An archived build is shown as it was archived; a live one may be ``stopped``
        (held neither by a runner of its own nor by a runner of one of its tasks)."""
        if self.archived:
            return self.state.state_name
        return state_word(self.state, self.runner or next(iter(self.task_runners.values()), None))

    @property
    def tasks(self) -> list[TaskRow]:
        if self.archived:
            return task_rows(self.state)
        return task_rows(self.state, self.task_runners, self.runner)

    def as_json(self) -> dict[str, Any]:
        s = self.state
        escalation = next(iter(s.open_escalations), None)
        return {
            "slug": s.slug,
            "state": self.state_name,
            "phase": s.phase_label,
            "round": s.current_round,
            "escalation": None
            if escalation is None
            else {"id": escalation.id, "question": escalation.question, "phase": escalation.phase},
            "proposal": None
            if s.proposal is None
            else {
                "forge": s.proposal.forge,
                "number": s.proposal.number,
                "url": s.proposal.url,
                "ready": s.proposal.ready,
                "closed": s.proposal.closed,
                "merged": s.proposal.merged,
            },
            "created_at": _iso(s.created_at),
            "updated_at": _iso(s.updated_at),
            "usage": {
                **s.usage.model_dump(mode="json"),
                # Models whose price is unknown: their sessions are not in cost_usd.
                "unpriced": list(s.unpriced_models),
            },
            "runner": self.runner,
            "archived": self.archived,
            "tasks": [t.as_json() for t in self.tasks],
            "candidates": candidates_json(s),
            "rungs": [
                {
                    "role": r.role,
                    "rung": r.rung,
                    "runtime": r.runtime,
                    "current": r.current,
                    "usage": r.usage.model_dump(mode="json"),
                }
                for r in rung_spend(s)
            ],
        }


def candidates_json(s: BuildState) -> list[dict[str, Any]]:
    """Best of N: every round's candidates, and those of the round under way."""
    found: list[dict[str, Any]] = [
        {
            "round": c.round,
            "id": c.id,
            "runtime": c.runtime,
            "passed": c.passed,
            "failing": c.failing,
            "chosen": c.chosen,
            "head": c.head,
            "tokens": c.tokens,
        }
        for c in s.candidate_history
    ]
    found += [
        {
            "round": s.candidate_round,
            "id": c.id,
            "runtime": c.runtime,
            "passed": c.stage == "passed" if c.stage in ("passed", "failed") else None,
            "failing": c.failing,
            "chosen": None,
            "head": c.head,
            "tokens": c.usage.tokens,
        }
        for c in s.candidates.values()
    ]
    return found


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


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


def unreadable_json(unreadable: Unreadable) -> list[dict[str, str]]:
    return [{"slug": slug, "error": error} for slug, error in unreadable]


@dataclass(frozen=True)
class Listing:
    rows: list[BuildRow]
    unreadable: Unreadable


def rows(repo: pygit2.Repository, include_archived: bool = True) -> Listing:
    log, cache = EventLog(repo), StateCache(repo)
    found: list[BuildRow] = []
    unreadable: Unreadable = []
    places: list[tuple[str, str | None, bool]] = [(slug, None, False) for slug in log.slugs()]
    if include_archived:
        places += [(slug, tip, True) for slug, tip in archived(repo).items()]
    for slug, at, old in places:
        read = read_build(log, cache, slug, unreadable, at)
        if read is not None:
            runner = None if old else live_runner(repo, slug)
            tasks = {} if old else task_runners(repo, read[1])
            found.append(BuildRow(read[1], read[0], old, runner, tasks))
    found.sort(key=lambda r: r.state.created_at or EPOCH, reverse=True)
    return Listing(found, unreadable)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def live_runner(repo: pygit2.Repository, slug: str) -> str | None:
    """Who runs the build now: a live lease here, else one the last fetch saw on a remote."""
    runner = held(repo, slug)
    return None if runner is None else runner.name()


def task_runners(repo: pygit2.Repository, state: BuildState) -> dict[str, str]:
    """Who runs each of the build's tasks now (a live task lease), for tasks some runner
    holds; a finished build's are not looked for."""
    if state.status != "running":
        return {}
    found = {}
    for task in state.tasks:
        holder = held(repo, task_key(state.slug, task))
        if holder is not None:
            found[task] = holder.name()
    return found


def status_json(listing: Listing) -> dict[str, Any]:
    return {
        "schema": JSON_SCHEMA,
        "builds": [r.as_json() for r in listing.rows],
        "unreadable": unreadable_json(listing.unreadable),
    }


FOLLOW_POLL = 0.5  # seconds between looks at the log for `log --follow`
FOLLOW_GRACE = 2.0  # seconds without a live runner before `log --follow` calls it stopped


def timeline(repo: pygit2.Repository, slug: str) -> list[Stored]:
    tip, _ = locate(repo, slug)
    return EventLog(repo).read(slug, tip)


def log_json(slug: str, events: list[Stored]) -> dict[str, Any]:
    return {"schema": JSON_SCHEMA, "slug": slug, "events": [event_json(s) for s in events]}


def event_json(stored: Stored) -> dict[str, Any]:
    """One envelope with its commit, as ``log --json`` lists them."""
    return {"commit": stored.oid, "type": stored.event.type, **stored.event.model_dump(mode="json")}


class Follow:
    """The build's events, then each new one as it is appended, until the build ends.

    It ends when the build is complete, failed, aborted or archived, or stopped: running
    in its log (not parked or paused, which wait for a person) but held by no live runner
    for ``FOLLOW_GRACE`` seconds (after Ctrl-C or a dead runner; the grace covers a runner
    that is starting). ``ended`` then names the state. A log that sync re-parented (its
    events re-created after a remote's) is followed on: events are told apart by their
    ``seq``, so none is shown twice.
    """

    def __init__(self, repo: pygit2.Repository, slug: str, poll: float = FOLLOW_POLL) -> None:
        self.repo, self.slug, self.poll = repo, slug, poll
        self.ended = ""

    def __iter__(self) -> Iterator[Stored]:
        repo, slug = self.repo, self.slug
        log, cache = EventLog(repo), StateCache(repo)
        tip, old = locate(repo, slug)
        shown, last, unheld_since = 0, None, None
        while True:
            if tip != last:
                onward = last is not None and repo.descendant_of(tip, last)
                for stored in log.walk(tip, stop=last if onward else None):
                    if stored.event.seq > shown:
                        shown = stored.event.seq
                        yield stored
                last, unheld_since = tip, None
            state = load_state(log, cache, slug, tip)[1]
            if old or state.status != "running":
                self.ended = state.state_name
                return
            if state.state_name != "running" or live_runner(repo, slug) is not None:
                unheld_since = None
            elif unheld_since is None:
                unheld_since = time.monotonic()
            elif time.monotonic() - unheld_since >= FOLLOW_GRACE:
                self.ended = STOPPED
                return
            time.sleep(self.poll)
            found = log.tip_oid(slug)
            if found is None:
                tip, old = locate(repo, slug)  # archived meanwhile: show its last events
            else:
                tip = found


def detail(repo: pygit2.Repository, slug: str) -> tuple[BuildState, list[str], str]:
    """The state, the artifact names and the tip of a build."""
    tip, _ = locate(repo, slug)
    log = EventLog(repo)
    _, state = load_state(log, StateCache(repo), slug, tip)
    return state, log.artifact_names(tip), tip


def artifact(repo: pygit2.Repository, slug: str, name: str) -> bytes:
    tip, _ = locate(repo, slug)
    log = EventLog(repo)
    data = log.artifact(tip, name)
    if data is None:
        names = ", ".join(log.artifact_names(tip)) or "none"
        raise AgentrunError(f"build {slug} has no artifact {name!r} (artifacts: {names})")
    return data


def transcript(repo: pygit2.Repository, slug: str, session: str) -> bytes:
    try:
        return artifact(repo, slug, f"transcript-{session}.txt")
    except AgentrunError:
        raise AgentrunError(
            f"build {slug} has no transcript for session {session!r}: "
            f"`git agentrun log {slug}` lists its sessions"
        ) from None
