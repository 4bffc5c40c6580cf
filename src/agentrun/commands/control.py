"""People steering a build: answer, pause, resume requests, abort, retry.

A human command is a request appended to the log. On a lost race it is re-checked
against the new state and re-appended (requests are safe to re-sequence).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from agentrun import secrets
from agentrun.errors import AgentrunError, ConcurrentUpdateError, EscalationError, LeaseHeldError
from agentrun.events import (
    BuildAbortRequested,
    BuildPauseRequested,
    BuildResumeRequested,
    BuildRetryRequested,
    EscalationAnswered,
    HumanActor,
)
from agentrun.gitrepo import user_login
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.runner.loop import Runner
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog, Tip

RETRIES = 50


def request(
    repo: pygit2.Repository,
    slug: str,
    make: Callable[[BuildState], object | None],
    login: str | None = None,
) -> BuildState:
    """Append what ``make`` returns for the current state (nothing when it returns None).

    ``login`` names the person (a forge login); by default it is git's user here.
    """
    log, cache = EventLog(repo), StateCache(repo)
    actor = HumanActor(login=login or user_login(repo))
    for _ in range(RETRIES):
        tip, state = load_state(log, cache, slug)
        payload = make(state)
        if payload is None:
            return state
        try:
            log.append(slug, [Draft(payload, actor)], Tip(tip, state.seq))
        except ConcurrentUpdateError:
            continue
        return load_state(log, cache, slug)[1]
    raise ConcurrentUpdateError(f"the log of {slug} kept moving; try again")


def answer(
    repo: pygit2.Repository,
    slug: str,
    text: str,
    escalation: str | None = None,
    login: str | None = None,
) -> tuple[str, BuildState]:
    """Record an answer to the open escalation (or the one named); returns its id."""
    if not text.strip():
        raise EscalationError("the answer is empty: say what the agent should do")
    chosen: list[str] = []

    def make(state: BuildState) -> EscalationAnswered:
        # A person may paste a secret into an answer: it is scrubbed like the agents' words.
        secrets.remember_config(state.config, os.environ)
        open_ = state.open_escalations
        if escalation is None:
            if not open_:
                raise EscalationError(f"build {slug} has no open escalation to answer")
            if len(open_) > 1:
                ids = ", ".join(e.id for e in open_)
                raise EscalationError(
                    f"build {slug} has several open escalations ({ids}): pass --escalation ID"
                )
            target = open_[0]
        else:
            found = [e for e in state.escalations if e.id == escalation]
            if not found:
                known = ", ".join(e.id for e in state.escalations) or "none"
                raise EscalationError(
                    f"build {slug} has no escalation {escalation!r} (escalations: {known})"
                )
            target = found[0]
            if not target.is_open:
                raise EscalationError(
                    f"escalation {target.id} of {slug} was already answered by {target.by}: "
                    f"{target.answer!r}"
                )
        chosen[:] = [target.id]
        by = login or user_login(repo)
        return EscalationAnswered(id=target.id, answer=text.strip(), by=by)

    state = request(repo, slug, make, login)
    return chosen[0], state


@dataclass(frozen=True)
class ControlResult:
    state: BuildState
    acknowledged: bool
    message: str


def _finished(state: BuildState, verb: str) -> str | None:
    if state.status != "running":
        return f"build {state.slug} is {state.status}; there is nothing to {verb}"
    return None


def _control(
    repo: pygit2.Repository, slug: str, verb: str, make: Callable[[BuildState], object | None]
) -> ControlResult:
    state = request(repo, slug, make)
    if state.status != "running" and verb == "abort" and state.status == "aborted":
        return ControlResult(state, True, f"build {slug} is aborted")
    try:
        outcome = Runner(repo, slug).run(acknowledge_only=True)
    except LeaseHeldError:
        return ControlResult(
            state,
            False,
            f"{verb} requested; the runner of {slug} will act on it at its next safe step",
        )
    done = outcome.state.paused if verb == "pause" else outcome.state.status == "aborted"
    word = "paused" if verb == "pause" else "aborted"
    if done:
        return ControlResult(outcome.state, True, f"build {slug} is {word}")
    return ControlResult(outcome.state, False, f"{verb} requested")


def pause(repo: pygit2.Repository, slug: str) -> ControlResult:
    def make(state: BuildState) -> BuildPauseRequested | None:
        if (why := _finished(state, "pause")) is not None:
            raise AgentrunError(why)
        if state.paused or state.pause_requested:
            return None
        return BuildPauseRequested()

    return _control(repo, slug, "pause", make)


def abort(repo: pygit2.Repository, slug: str) -> ControlResult:
    def make(state: BuildState) -> BuildAbortRequested | None:
        if (why := _finished(state, "abort")) is not None:
            raise AgentrunError(why)
        if state.abort_requested:
            return None
        return BuildAbortRequested()

    return _control(repo, slug, "abort", make)


def request_resume(repo: pygit2.Repository, slug: str) -> BuildState:
    def make(state: BuildState) -> BuildResumeRequested | None:
        if state.status != "running" or not state.paused or state.resume_requested:
            return None
        return BuildResumeRequested()

    return request(repo, slug, make)


def retry(repo: pygit2.Repository, slug: str) -> BuildState:
    """Ask a failed build, or a phase that ran out of attempts, to try again.

    Only records the request (open questions are closed as answered "retry");
    ``resume`` runs it.
    """

    def make(state: BuildState) -> BuildRetryRequested:
        if state.status in ("complete", "aborted"):
            raise AgentrunError(f"build {slug} is {state.status}; there is nothing to retry")
        return BuildRetryRequested()

    return request(repo, slug, make)
