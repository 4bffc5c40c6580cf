"""The pure kernel: ``evolve`` folds events into a BuildState, ``decide`` picks the next move."""

from __future__ import annotations

from agentrun.kernel.decide import Decision, decide
from agentrun.kernel.evolve import evolve
from agentrun.kernel.state import BuildState, initial_state

__all__ = ["BuildState", "Decision", "decide", "evolve", "initial_state", "replay"]


def replay(slug: str, events: list[object]) -> BuildState:
    from agentrun.events import Event

    state = initial_state(slug)
    for event in events:
        assert isinstance(event, Event)
        state = evolve(state, event)
    return state
