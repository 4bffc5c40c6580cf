"""The one way a decision reaches a build's log: re-read, re-decide, compare-and-swap.

``decide`` gets the state at the tip just read and returns the events to append (or
nothing). The append is made on that tip only; when another writer moved it meanwhile,
the log is read again and ``decide`` asked again, so every check it makes holds for what
is written. The retries are bounded and jittered (:mod:`agentrun.store.cas`); giving up
raises ``ConcurrentUpdateError`` naming the write. The new state goes to the state cache,
and with it the build's line to the summary index that ``status`` reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentrun.kernel.draft import Draft
from agentrun.kernel.evolve import evolve
from agentrun.kernel.state import BuildState
from agentrun.store import cas
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog, Stored, Tip

Decide = Callable[[BuildState], Sequence[Draft] | None]
Read = Callable[[], tuple[Tip, BuildState]]


@dataclass(frozen=True)
class Appended:
    """What one successful append wrote, and the state it was decided from."""

    decided_from: BuildState
    tip: Tip
    stored: list[Stored]


def append_decided(
    log: EventLog,
    slug: str,
    decide: Decide,
    *,
    cache: StateCache | None = None,
    read: Read | None = None,
    what: str | None = None,
    attempts: int = cas.ATTEMPTS,
) -> Appended | None:
    """Append what ``decide`` returns for the fresh state; None when it returned nothing.

    ``read`` gives the tip and state to decide from (by default the log's tip, through the
    state cache); it is called again after every lost race.
    """
    states = cache or StateCache(log.repo)

    def fresh() -> tuple[Tip, BuildState]:
        tip, state = load_state(log, states, slug)
        return Tip(tip, state.seq), state

    reader = read or fresh

    def attempt() -> Appended | None:
        tip, state = reader()
        drafts = decide(state)
        if not drafts:
            return None
        new_tip, stored = log.append(slug, drafts, tip)
        if read is None:  # a caller with a reader of its own (the runner) keeps its state
            states.put(slug, new_tip.oid, fold(state, stored))
        return Appended(state, new_tip, stored)

    return cas.retry(attempt, what or f"the log of {slug}", attempts)


def fold(state: BuildState, stored: Sequence[Stored]) -> BuildState:
    """The state after the events just appended: the state cache and the summary index
    (store/summary.py) get the tip this append moved, so no reader replays it."""
    for item in stored:
        state = evolve(state, item.event)
    return state
