"""Reading builds: the timeline of ``log``, the detail of ``show``, who runs them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pygit2

from agentrun.commands.logs import locate
from agentrun.commands.status import JSON_SCHEMA, STOPPED, live_word
from agentrun.errors import AgentrunError
from agentrun.kernel.state import BuildState
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import held, task_key
from agentrun.store.log import EventLog, Stored


def state_word(state: BuildState, runner: str | None) -> str:
    """The state as `status` names it: ``stopped`` where the pure state says running but no
    live runner holds the build, so `resume` or `sweep` would continue it (DESIGN §13)."""
    return live_word(state.state_name, runner)


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
