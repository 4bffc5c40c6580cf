"""The pure kernel: it folds the log, picks the next move, and makes every event.

``evolve`` folds events into a BuildState and ``decide`` picks the next move
(``budget`` says what the build may still spend). The events to append are made here
too, from the state, the decision and what happened (``draft.Draft``): ``runner``
(attaching, acknowledging, publishing, what needs nothing run), ``sessions`` (agent
work), ``checks`` (verify and finalize commands), ``verbs`` (agent verbs), ``requests``
(people's requests). The runner, the commands and the verbs load the state, call one of
these, and append what it returns (``store.append.append_decided``). No I/O, no clock,
no random ids.
"""

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
