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
from agentrun.kernel import ladder
from agentrun.kernel.budget import limits
from agentrun.kernel.session_end import Changes, implemented, next_impl_round, verify_recorded
from agentrun.kernel.state import (
    FEEDBACK_TAIL,
    BuildState,
    CandidateRecord,
    Stage,
    TaskStage,
    TaskState,
)

# What a task holds of its own, under the names BuildState gives them.
SHARED = tuple(
    name
    for name in TaskState.model_fields
    if name in BuildState.model_fields and name not in ("goal", "stage", "usage", "sessions")
)
# A task's stage as its view shows it, and back.
_VIEW_STAGE: dict[TaskStage, Stage] = {
    "waiting": "implement", "passed": "done", "failed": "done", "landed": "done"
}  # fmt: skip
_AGENT_PHASES = ("implement", "code-review", "reconcile")
_STAGES = ("implement", "code-review", "reconcile", "verify", "passed", "failed")
FIELDS_OF_VIEW = (
    "task", "goal", "allow_empty", "reserved_tokens", "reserved_usd", "stage", "config"
)  # fmt: skip


def branch_of(build_branch: str, task: str) -> str:
    """A task's branch: ``agentrun/<slug>--<id>`` (git cannot hold ``agentrun/<slug>/<id>``
    beside ``agentrun/<slug>``)."""
    return f"{build_branch}--{task}"


def has_part(s: BuildState, task: str) -> bool:
    """Whether ``task`` names a task of the graph or a candidate of the round."""
    return task in s.tasks or task in s.candidates


def parts(s: BuildState) -> tuple[TaskState, ...]:
    """The build's tasks and the implement round's candidates."""
    return (*s.tasks.values(), *s.candidates.values())


def part(s: BuildState, task: str) -> TaskState:
    """Task ``task`` of the graph, or candidate ``task`` of the implement round."""
    return s.candidates[task] if task in s.candidates else s.tasks[task]


def view(s: BuildState, task: str) -> BuildState:
    """The build as task ``task`` sees it: its own stage, round, head and session, the
    build's budget less what the other tasks' running sessions are estimated to spend.

    A candidate sees the build's own goal; its implement runs on its runtime, and it goes
    from implement to its verify steps (the build's code review comes once one is chosen).
    """
    t = part(s, task)
    tokens, usd = reserved(s, task)
    update: dict[str, object] = {
        **{name: getattr(t, name) for name in SHARED},
        "stage": _VIEW_STAGE.get(t.stage, t.stage),
        "task": task,
        "allow_empty": True,  # a task that needs no change is done, not a question
        "reserved_tokens": tokens,
        "reserved_usd": usd,
    }
    if task in s.candidates:
        roles = {**s.config.roles, "implement": (t.runtime or "",)}
        pipeline = s.config.pipeline.model_copy(update={"code_review": False})
        update["config"] = s.config.model_copy(update={"roles": roles, "pipeline": pipeline})
    else:
        update["goal"] = task_goal(s, t)
    return s.model_copy(update=update)


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
    old = part(s, task)
    stage = after.stage
    own: dict[str, object] = {name: getattr(after, name) for name in SHARED}
    if after.task in s.candidates and "failed" in (old.stage, after.stage):
        own["stage"] = "failed"  # a candidate whose verify failed is judged, not retried
    elif stage in ("finalize", "done"):
        own["stage"] = "passed"
    else:
        own["stage"] = stage
    if own["stage"] not in _STAGES:
        own["stage"] = old.stage  # a view never leaves the task's stages
    if old.stage == "waiting" and not after.head:
        own["stage"] = "waiting"
    escalations = tuple(
        e.model_copy(update={"task": task}) if n >= len(s.escalations) else e
        for n, e in enumerate(after.escalations)
    )
    where = "candidates" if task in s.candidates else "tasks"
    return after.model_copy(
        update={
            **{name: getattr(s, name) for name in (*SHARED, *FIELDS_OF_VIEW)},
            "escalations": escalations,
            where: {**getattr(s, where), task: old.model_copy(update=own)},
        }
    )


def booked(s: BuildState, task: str, event: ev.Event) -> BuildState:
    """A task's own tally of sessions and spend, besides the build's."""
    p = event.payload
    t = part(s, task)
    if isinstance(p, ev.SessionStarted):
        t = t.model_copy(update={"sessions": t.sessions + 1})
    elif isinstance(p, ev.SessionEnded):
        t = t.model_copy(update={"usage": t.usage + p.usage})
    else:
        return s
    where = "candidates" if task in s.candidates else "tasks"
    return s.model_copy(update={where: {**getattr(s, where), task: t}})


# What only the build's own runner records: from a task, it is forged (a task's runner
# never writes it), and it changes nothing.
BUILD_ONLY = frozenset(
    {
        "build.created", "build.completed", "build.paused", "build.resumed", "build.aborted",
        "proposal.opened", "proposal.ready", "proposal.closed", "publication.pushed",
        "task.integrated", "task.returned", "candidates.started", "select.started",
        "candidate.selected", "candidate.chosen", "base.moved", "feedback.received",
        "forge.cursor", "finalize.started", "finalize.step-completed", "finalize.completed",
    }
)  # fmt: skip


def forged(event: ev.Event) -> bool:
    """An event no task may carry: a task's envelope on what only the build records."""
    return event.task is not None and event.type in BUILD_ONLY


def task_of(s: BuildState, event: ev.Event) -> str | None:
    """The task whose view an event is folded into (None: the build's own)."""
    if event.task is not None:
        return event.task if has_part(s, event.task) else None
    p = event.payload
    if isinstance(p, ev.EscalationAnswered):
        asked = next((e for e in s.escalations if e.id == p.id), None)
        if asked is not None and asked.task is not None and has_part(s, asked.task):
            return asked.task
    return None


def reserved(s: BuildState, task: str | None) -> tuple[int, float]:
    """What the sessions running in the other tasks are estimated to spend: before one
    more session starts, its own estimate and theirs must fit the budget.

    A role's first session has no estimate of its own: it holds all that is left, so it
    runs alone, and its spend is the estimate of the next ones.
    """
    tokens, usd = 0, 0.0
    limit = limits(s)
    for other in parts(s):
        flight = other.in_flight
        if other.id == task or flight is None:
            continue
        running = other.session.role if other.session else None
        if running is None and flight.phase in _AGENT_PHASES:
            running = flight.phase
        if running is None:
            continue
        rung = other.session.rung if other.session else ladder.rung_of(s, running)
        known = s.role_usage.get(ladder.estimate_key(running, rung))
        if known is None or not known.sessions:
            tokens += max((limit.tokens or 0) - s.usage.tokens, 0)
            usd += max((limit.usd or 0.0) - (s.usage.cost_usd or 0.0), 0.0)
            continue
        tokens, usd = tokens + known.estimate_tokens(), usd + known.estimate_cost()
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
        changes.update(implemented(s))
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


# --- best of N --------------------------------------------------------------------


def candidates_started(s: BuildState, p: ev.CandidatesStarted) -> Changes:
    """An implement round runs as candidates, each at implement@<round> from the head."""
    made = {
        f"c{n}": TaskState(
            id=f"c{n}",
            goal=s.goal,
            stage="implement",
            base_sha=s.base_sha,
            head=p.base_sha,
            impl_round=p.round,
            impl_round_limit=s.impl_round_limit,
            feedback=s.feedback,
            resumable=s.resumable,
            runtime=runtime,
        )
        for n, runtime in enumerate(p.runtimes, 1)
    }
    return {"candidates": made, "candidate_round": p.round, "offered": (), "selected": None}


def candidate_verified(s: BuildState, p: ev.VerifyCompleted) -> Changes:
    """In a candidate's view: every verify step runs, pass or fail, before it is judged."""
    changes = verify_recorded(s, p)
    done = {*s.verify_results, p.step}
    if all(step.name in done for step in s.config.verify):
        failed = p.outcome == "fail" or any(r.outcome == "fail" for r in s.verify_results.values())
        changes["stage"] = "failed" if failed else "done"
    return changes


def done_candidates(s: BuildState) -> bool:
    """Every candidate of the round has been judged by its verify steps."""
    return bool(s.candidates) and all(
        c.stage in ("passed", "failed") for c in s.candidates.values()
    )


def passing(s: BuildState) -> tuple[str, ...]:
    return tuple(c.id for c in s.candidates.values() if c.stage == "passed")


def chosen(s: BuildState, p: ev.CandidateChosen) -> Changes:
    """The chosen candidate's work is the build's: on to code review when it passed,
    else implement again from it with its failures as the feedback."""
    winner = s.candidates.get(p.candidate)
    if winner is None or p.round != s.candidate_round:
        return {}
    history = tuple(
        CandidateRecord(
            round=p.round,
            id=c.id,
            runtime=c.runtime or "",
            head=c.head,
            passed=c.stage == "passed",
            failing=c.failing,
            chosen=c.id == p.candidate,
            tokens=c.usage.tokens,
        )
        for c in s.candidates.values()
    )
    changes: Changes = {
        "candidates": {},
        "offered": (),
        "selected": None,
        "candidate_history": (*s.candidate_history, *history),
        "head": winner.head,
        "changed_paths": p.changed_paths,
        "resumable": winner.resumable,
    }
    if p.passed:
        changes.update(implemented(s))
        return changes
    failures = tuple(
        f"Verify step `{name}` failed in round {p.round} (candidate {winner.id}):\n"
        f"{result.reason[-FEEDBACK_TAIL:]}"
        for name, result in winner.verify_results.items()
        if result.outcome == "fail"
    )
    changes["implemented"] = True
    changes.update(next_impl_round(s, failures))
    return changes


def retried(s: BuildState) -> Changes:
    """``retry``: every task's spent attempts re-arm too."""
    fresh = dict(attempts={}, interruptions={}, blocked={}, setup_failures=0, setup_permanent=False)
    return {
        where: {k: t.model_copy(update=fresh) for k, t in getattr(s, where).items()}
        for where in ("tasks", "candidates")
    }


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
    t = part(s, task)
    return (
        f"task {task} of build {s.slug}: {task_state_name(s, t)} ({task_phase(t)}; "
        f"{t.sessions} session(s), {t.usage.describe()})"
    )
