"""The pure kernel: ``evolve`` folds events into a BuildState, ``decide`` picks the next move."""

from __future__ import annotations

from collections.abc import Iterable

from agentrun.events import Event
from agentrun.kernel.decide import Decision, decide
from agentrun.kernel.evolve import evolve
from agentrun.kernel.state import BuildState, initial_state

__all__ = ["BuildState", "Decision", "decide", "evolve", "initial_state", "replay"]


def replay(slug: str, events: Iterable[Event]) -> BuildState:
    """The state of a build after its whole log: a fold of ``evolve``."""
    state = initial_state(slug)
    for event in events:
        state = evolve(state, event)
    return state
