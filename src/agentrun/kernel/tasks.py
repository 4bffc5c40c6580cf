"""A build's task graph in the kernel: each task's view of the build, and what the
graph's own events do to the state (DESIGN §3).

A task runs the build's usual phases (implement, code review, reconcile, verify) on its
own branch. Rather than a second set of phase rules, a task's events are folded into its
*view*: the build's state with the task's own fields (its stage, round, head, session,
attempts, …; the fields ``TaskState`` shares with ``BuildState`` by name) put in, and
taken back out after. What a task spends, asks and reports stays the build's: usage,
escalations and sessions are the build's fields, so budgets hold across tasks.

Pure, like the rest of the kernel.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrun import events as ev
from agentrun.kernel.budget import estimate
from agentrun.kernel.session_end import Changes, checks_stage, next_impl_round
from agentrun.kernel.state import BuildState, Stage, TaskStage, TaskState

# What a task holds of its own, under the names BuildState gives them.
SHARED = tuple(
    name
    for name in TaskState.model_fields
    if name in BuildState.model_fields and name not in ("goal", "stage", "usage", "sessions")
)
# A task's stage as its view shows it, and back.
_VIEW_STAGE: dict[TaskStage, Stage] = {"waiting": "implement", "passed": "done", "landed": "done"}
_AGENT_PHASES = ("implement", "code-review", "reconcile")
FIELDS_OF_VIEW = ("task", "goal", "allow_empty", "reserved_tokens", "reserved_usd", "stage")


def branch_of(build_branch: str, task: str) -> str:
    """A task's branch: ``agentrun/<slug>--<id>`` (git cannot hold ``agentrun/<slug>/<id>``
    beside ``agentrun/<slug>``)."""
    return f"{build_branch}--{task}"


def view(s: BuildState, task: str) -> BuildState:
    """The build as task ``task`` sees it: its own stage, round, head and session, the
    build's budget less what the other tasks' running sessions are estimated to spend."""
    t = s.tasks[task]
    tokens, usd = reserved(s, task)
    return s.model_copy(
        update={
            **{name: getattr(t, name) for name in SHARED},
            "stage": _VIEW_STAGE.get(t.stage, t.stage),
            "task": task,
            "goal": task_goal(s, t),
            "allow_empty": True,  # a task that needs no change is done, not a question
            "reserved_tokens": tokens,
            "reserved_usd": usd,
        }
    )


def task_goal(s: BuildState, t: TaskState) -> str:
    """What a task's agents are asked: its goal, within the build's."""
    scope = f" It should touch only: {', '.join(t.paths)}." if t.paths else ""
    return (
        f"{t.goal}\n\nThis is task `{t.id}` of a build whose goal is: {s.goal}\n"
        f"Other tasks do the rest of the plan, side by side; do only this task.{scope}"
    )


def merged(s: BuildState, task: str, after: BuildState) -> BuildState:
    """The build after an event folded into ``task``'s view (``after``): the task's own
    fields go back to the task, the build keeps the rest (usage, questions, sessions)."""
    old = s.tasks[task]
    stage = after.stage
    own: dict[str, object] = {name: getattr(after, name) for name in SHARED}
    own["stage"] = "passed" if stage in ("finalize", "done") else stage
    if own["stage"] not in ("implement", "code-review", "reconcile", "verify", "passed"):
        own["stage"] = old.stage  # a view never leaves the task's stages
    if old.stage == "waiting" and not after.head:
        own["stage"] = "waiting"
    escalations = tuple(
        e.model_copy(update={"task": task}) if n >= len(s.escalations) else e
        for n, e in enumerate(after.escalations)
    )
    return after.model_copy(
        update={
            **{name: getattr(s, name) for name in (*SHARED, *FIELDS_OF_VIEW)},
            "escalations": escalations,
            "tasks": {**s.tasks, task: old.model_copy(update=own)},
        }
    )


def booked(t: TaskState, event: ev.Event) -> TaskState:
    """A task's own tally of sessions and spend, besides the build's."""
    p = event.payload
    if isinstance(p, ev.SessionStarted):
        return t.model_copy(update={"sessions": t.sessions + 1})
    if isinstance(p, ev.SessionEnded):
        return t.model_copy(update={"usage": t.usage + p.usage})
    return t


def task_of(s: BuildState, event: ev.Event) -> str | None:
    """The task whose view an event is folded into (None: the build's own)."""
    if event.task is not None:
        return event.task if event.task in s.tasks else None
    p = event.payload
    if isinstance(p, ev.EscalationAnswered):
        asked = next((e for e in s.escalations if e.id == p.id), None)
        if asked is not None and asked.task in s.tasks:
            return asked.task
    return None


def reserved(s: BuildState, task: str | None) -> tuple[int, float]:
    """What the sessions running in the other tasks are estimated to spend: before one
    more session starts, its own estimate and theirs must fit the budget."""
    tokens, usd = 0, 0.0
    for other in s.tasks.values():
        flight = other.in_flight
        if other.id == task or flight is None:
            continue
        running = other.session.role if other.session else None
        if running is None and flight.phase in _AGENT_PHASES:
            running = flight.phase
        if running is not None:
            more_tokens, more_usd = estimate(s, running)
            tokens, usd = tokens + more_tokens, usd + more_usd
    return tokens, usd


def started(s: BuildState, p: ev.TaskStarted) -> Changes:
    """In the task's view: it starts at the build head of the moment, at implement@1."""
    return {"stage": "implement", "base_sha": p.base_sha, "head": p.base_sha, "impl_round": 1}


def landed(s: BuildState, p: ev.TaskIntegrated) -> Changes:
    """The queue landed ``p.task``: the build branch moved; the last one lets the build
    go on as a build without tasks does after implement."""
    t = s.tasks.get(p.task)
    if t is None or t.stage != "passed":
        return {}
    tasks = {**s.tasks, p.task: t.model_copy(update={"stage": "landed"})}
    changes: Changes = {"tasks": tasks, "head": p.head, "changed_paths": p.changed_paths}
    if all(other.stage == "landed" for other in tasks.values()):
        changes.update(
            implemented=True,
            feedback=(),
            verify_results={},
            finalize_results={},
            stage="code-review" if s.config.pipeline.code_review else checks_stage(s.config),
        )
    return changes


def returned(s: BuildState, p: ev.TaskReturned) -> Changes:
    """The queue sent ``p.task`` back: to reconcile onto the build head (a conflict), or
    to implement again with the gate's output as feedback."""
    t = s.tasks.get(p.task)
    if t is None or t.stage != "passed":
        return {}
    if p.why == "conflict":
        update: Changes = {"stage": "reconcile", "reconcile_base": p.base_sha}
        return {"tasks": {**s.tasks, p.task: t.model_copy(update=update)}}
    feedback = f"Integrating {p.task} onto the build head {p.base_sha[:10]} failed its gate:\n"
    return in_view(
        s, p.task, lambda v: v.model_copy(update=next_impl_round(v, (feedback + p.reason,)))
    )


def in_view(s: BuildState, task: str, change: Callable[[BuildState], BuildState]) -> Changes:
    """``change`` applied to the task's view, as changes to the build."""
    return {"tasks": merged(s, task, change(view(s, task))).tasks}


def retried(s: BuildState) -> Changes:
    """``retry``: every task's spent attempts re-arm too."""
    fresh = dict(attempts={}, interruptions={}, blocked={}, setup_failures=0, setup_permanent=False)
    return {"tasks": {k: t.model_copy(update=fresh) for k, t in s.tasks.items()}}


def deps_landed(s: BuildState, t: TaskState) -> bool:
    return all(s.tasks[d].stage == "landed" for d in t.deps if d in s.tasks)


def task_state_name(s: BuildState, t: TaskState) -> str:
    """What ``status`` shows of a task: waiting (on its dependencies or to start),
    running, parked (its own question), passed (in the queue), landed, or the build's
    own state when the build stopped."""
    if t.stage == "landed":
        return "landed"
    if s.status != "running":
        return s.status
    if any(e.task == t.id for e in s.open_escalations):
        return "parked"
    if t.stage == "passed":
        return "passed"
    if t.stage == "waiting":
        return "waiting"
    return "running"


def task_phase(t: TaskState) -> str:
    """Where a task is: ``implement@2``, or its stage once it has none running."""
    if t.in_flight is not None:
        return f"{t.in_flight.phase}@{t.in_flight.round}"
    if t.stage in ("waiting", "passed", "landed"):
        return t.stage
    return f"{t.stage}@{t.impl_round}"


def describe(s: BuildState, task: str) -> str:
    """One line on a task: its state, phase, sessions and spend."""
    t = s.tasks[task]
    return (
        f"task {task} of build {s.slug}: {task_state_name(s, t)} ({task_phase(t)}; "
        f"{t.sessions} session(s), {t.usage.describe()})"
    )
