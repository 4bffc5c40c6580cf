"""People steering a build: answer, approve, pause, resume requests, abort, retry.

A human command is a request appended to the log. On a lost race it is re-checked
against the new state and re-appended (requests are safe to re-sequence): the store's
``append_decided`` does both.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from agentrun import secrets
from agentrun.errors import LeaseHeldError
from agentrun.events import EscalationAnswered, HumanActor, PlanApproved
from agentrun.gitrepo import user_login
from agentrun.kernel import requests
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.runner.loop import Runner
from agentrun.store.append import append_decided
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog


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

    def decide(state: BuildState) -> list[Draft]:
        payload = make(state)
        return [] if payload is None else [Draft(payload, actor)]

    append_decided(log, slug, decide, cache=cache)
    return load_state(log, cache, slug)[1]


def answer(
    repo: pygit2.Repository,
    slug: str,
    text: str,
    escalation: str | None = None,
    login: str | None = None,
    name_it: str = requests.NAME_IT,
) -> tuple[str, BuildState]:
    """Record an answer to the open escalation (or the one named); returns its id."""
    chosen: list[str] = []

    def make(state: BuildState) -> EscalationAnswered:
        # A person may paste a secret into an answer: it is scrubbed like the agents' words.
        secrets.remember_config(state.config, os.environ)
        answered = requests.answer(state, text, escalation, login or user_login(repo), name_it)
        chosen[:] = [answered.id]
        return answered

    state = request(repo, slug, make, login)
    return chosen[0], state


def approve(repo: pygit2.Repository, slug: str, login: str | None = None) -> tuple[str, BuildState]:
    """Record a person's approval of the plan that waits; returns the question's id."""
    chosen: list[str] = []

    def make(state: BuildState) -> PlanApproved:
        approved = requests.approve(state, login or user_login(repo))
        chosen[:] = [approved.id]
        return approved

    state = request(repo, slug, make, login)
    return chosen[0], state


@dataclass(frozen=True)
class ControlResult:
    state: BuildState
    acknowledged: bool
    message: str


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
    return _control(repo, slug, "pause", requests.pause)


def abort(repo: pygit2.Repository, slug: str) -> ControlResult:
    return _control(repo, slug, "abort", requests.abort)


def request_resume(repo: pygit2.Repository, slug: str) -> BuildState:
    """Un-pause, or withdraw a pause not yet acknowledged (``kernel.requests.resume``)."""
    return request(repo, slug, requests.resume)


def retry(repo: pygit2.Repository, slug: str) -> BuildState:
    """Ask a failed build, or a phase that ran out of attempts, to try again.

    Only records the request (open questions are closed as answered "retry");
    ``resume`` runs it.
    """
    return request(repo, slug, requests.retry)
