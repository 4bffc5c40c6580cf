"""``git agentrun reconcile SLUG``: merge the moved base into a complete build (DESIGN §5).

A proposal that conflicts with its base cannot be merged, and a complete build does not
run again by itself. This records ``build.reconcile-requested`` (the base's tip, read
here: the kernel reads no refs) and runs the build: its proposal goes back to draft,
the reconcile phase merges the base (without an agent when it merges cleanly), then
verification runs again and the proposal is marked ready once more. ``/agentrun
reconcile`` in a forge comment asks the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from agentrun.errors import AgentrunError, ForgeError
from agentrun.events import BuildReconcileRequested
from agentrun.forge.base import Forge, open_forge
from agentrun.kernel.state import BuildState
from agentrun.runner.basecheck import base_tip
from agentrun.runner.build import Observer
from agentrun.runner.loop import Outcome
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog


@dataclass(frozen=True)
class Requested:
    base: str  # the base's tip the reconcile merges
    state: BuildState
    note: str | None = None  # why the proposal could not go back to draft


def reconcile_build(
    repo: pygit2.Repository,
    slug: str,
    observer: Observer | None = None,
    remote: str | None = None,
    stop_at: float | None = None,
) -> tuple[Requested, Outcome]:
    """Request the reconcile and run the build; returns the request and the outcome.

    With a remote (or ``[sync] remote``) the build's log and the base are read there first.
    """
    from agentrun.commands.build import run_build
    from agentrun.runner.remote import configured_remote
    from agentrun.store.sync import pull

    remote = remote if remote is not None else configured_remote(repo, slug)
    if remote:
        pull(repo, remote, slug)
    requested = request_reconcile(repo, slug, remote=remote)
    return requested, run_build(repo, slug, observer, remote=remote or "", stop_at=stop_at)


def request_reconcile(
    repo: pygit2.Repository,
    slug: str,
    login: str | None = None,
    remote: str | None = None,
    forge: Forge | None = None,
) -> Requested:
    """Record the request and put the proposal back into draft.

    Refused (``AgentrunError``, nothing recorded) unless the build is complete with an
    open proposal and its base has commits the build does not hold.
    """
    from agentrun.commands.control import request

    state = load_state(EventLog(repo), StateCache(repo), slug)[1]
    _check(state)
    tip = base_tip(repo, state.base_ref, remote)
    if tip is None:
        where = f" (here or on {remote})" if remote else ""
        raise AgentrunError(f"build {slug}: its base branch {state.base_ref!r} is gone{where}")
    if tip == state.base_sha or repo.descendant_of(state.head, tip):
        raise AgentrunError(
            f"build {slug} already holds {state.base_ref} at {tip[:10]}: nothing to reconcile"
        )

    def make(current: BuildState) -> BuildReconcileRequested:
        _check(current)  # re-checked on the state the request is appended to
        return BuildReconcileRequested(base_sha=tip)

    state = request(repo, slug, make, login)
    return Requested(tip, state, _back_to_draft(repo, state, forge))


def _check(state: BuildState) -> None:
    slug = state.slug
    if state.status in ("failed", "aborted"):
        raise AgentrunError(f"build {slug} is {state.status}; nothing to reconcile")
    if state.status == "running":
        raise AgentrunError(
            f"build {slug} is still {state.state_name}: it merges a moved base itself before "
            "its proposal is marked ready; reconcile is for a complete build"
        )
    proposal = state.proposal
    if proposal is None or proposal.closed:
        raise AgentrunError(f"build {slug} has no open proposal: nothing to reconcile")


def _back_to_draft(repo: pygit2.Repository, state: BuildState, forge: Forge | None) -> str | None:
    """The forge shows the proposal as a draft while the build works on it again; the
    runner marks it ready once verification passes. A forge that refuses only changes
    how the proposal looks meanwhile: the build goes on, and the refusal is returned."""
    proposal = state.proposal
    if proposal is None:
        return None
    try:
        (forge or open_forge(repo, proposal.forge)).mark_draft(proposal.number)
    except ForgeError as exc:
        return f"#{proposal.number} stays as it is meanwhile: {exc}"
    return None
