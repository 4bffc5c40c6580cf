"""The fold step: ``evolve(state, event)`` is the state after one event (DESIGN §3).

Pure: no I/O, no clock. Everything it needs comes in the event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import assert_never

from agentrun import events as ev
from agentrun.kernel import tasks
from agentrun.kernel.fold_life import LifePayload, life
from agentrun.kernel.fold_people import PeoplePayload, people
from agentrun.kernel.fold_work import TasksPayload, WorkPayload, tasks_changes, work
from agentrun.kernel.session_end import (
    Changes,
    next_impl_round,
)
from agentrun.kernel.state import (
    BuildState,
    initial_state,
)


def evolve(state: BuildState, event: ev.Event) -> BuildState:
    """One fold step: the state after ``event``.

    An event of a task is folded into the task's view of the build (``kernel.tasks``).
    """
    if tasks.forged(event):
        return state.model_copy(update={"seq": event.seq, "updated_at": event.ts})
    task = tasks.task_of(state, event)
    if task is None:
        return _take_feedback(_step(state, event))
    after = tasks.merged(state, task, _step(tasks.view(state, task), event))
    return tasks.booked(after, task, event)


def _step(state: BuildState, event: ev.Event) -> BuildState:
    changes = _apply(state, event)
    flight = state.in_flight
    if flight is not None and flight.started and changes.get("in_flight", flight) is None:
        # Work time, not waiting time: what max_wall_minutes budgets (DESIGN §4).
        spent = max((event.ts - flight.started).total_seconds(), 0.0)
        changes["active_seconds"] = state.active_seconds + spent
    changes["seq"] = event.seq
    changes["updated_at"] = event.ts
    return state.model_copy(update=changes)


def _take_feedback(s: BuildState) -> BuildState:
    """Forge reviews start the next implement round once nothing is in flight (§12).

    A complete build whose proposal is still open is finished, not closed: it runs again.
    """
    if not s.pending_feedback or s.in_flight is not None or s.session is not None:
        return s
    if not s.implemented or s.status not in ("running", "complete"):
        return s
    if s.proposal is not None and s.proposal.closed:
        return s
    changes = next_impl_round(s, (*s.feedback, *s.pending_feedback))
    changes.update(status="running", pending_feedback=(), reconcile_base=None)
    return s.model_copy(update=changes)


def _apply(s: BuildState, event: ev.Event) -> Changes:
    """What ``event`` changes, by the group its payload is of (each group is matched whole,
    in its own module: every payload type is in exactly one)."""
    p = event.payload
    if isinstance(p, LifePayload):
        return life(s, event, p)
    if isinstance(p, WorkPayload):
        return work(s, event, p)
    if isinstance(p, TasksPayload):
        return tasks_changes(s, event, p)
    if isinstance(p, PeoplePayload):
        return people(s, event, p)
    assert_never(p)


def replay(slug: str, events: Iterable[ev.Event]) -> BuildState:
    """The state of a build after its whole log: a fold of ``evolve``."""
    state = initial_state(slug)
    for event in events:
        state = evolve(state, event)
    return state
