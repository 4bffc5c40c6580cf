"""What a session's end does to the state: its report takes effect, its usage is booked.

Part of the fold (``evolve``); pure like it.
"""

from __future__ import annotations

from agentrun import events as ev
from agentrun.config import Config
from agentrun.kernel import approval, ladder
from agentrun.kernel.state import (
    BuildState,
    Escalation,
    OpenSession,
    Report,
    ResumableSession,
    RoleUsage,
    Stage,
    StepResult,
    TaskState,
    attempt_key,
)

Changes = dict[str, object]


def escalation(p: ev.EscalationRaised) -> Escalation:
    """The question ``p`` raised, open until it is answered."""
    return Escalation(**p.model_dump(include=set(ev.Question.model_fields)))


def report(s: BuildState, p: Report) -> Changes:
    if s.session is None or s.session.session != p.session:
        return {}  # the verbs refuse this; a hand-written log cannot steer the kernel with it
    return {"session": s.session.model_copy(update={"report": p})}


def session_ended(s: BuildState, p: ev.SessionEnded) -> Changes:
    changes: Changes = {"session": None, "usage": s.usage + p.usage}
    session = s.session
    if session is not None and session.session == p.session:
        changes.update(_spent(s, session, p))
    if session is None or session.session != p.session or p.outcome != "ok":
        return changes
    changes["setup_failures"] = 0  # the runner could work after all: earlier trouble passed
    if p.head:
        changes["head"] = p.head
    report = session.report
    # Plans and verdicts take effect when their session ends well; implement, verify and
    # finalize sessions complete through the runner's own event in the same batch.
    if isinstance(report, ev.PlanSubmitted):
        changes.update(in_flight=None, plan=report.plan, feedback=(), graph=report.tasks)
        if report.tasks_error:
            changes.update(_graph_refused(s, session, report.tasks_error))
        elif s.config.pipeline.plan_review:
            changes["stage"] = "plan-review"
        else:
            changes.update(_plan_passed(s, report.tasks))
    elif isinstance(report, ev.PlanReviewVerdict):
        changes["in_flight"] = None
        if report.verdict == "approve":
            changes.update(_plan_passed(s, s.graph))
        else:
            changes.update(stage="plan", plan_round=s.plan_round + 1, feedback=report.findings)
            changes.update(ladder.failed_round(s, "plan", None))
    elif isinstance(report, ev.CodeReviewVerdict):
        changes["in_flight"] = None
        if report.verdict == "approve":
            changes.update(stage=checks_stage(s.config), feedback=())
        else:
            changes.update(next_impl_round(s, report.findings))
            changes.update(ladder.failed_round(s, "implement", None))
    elif isinstance(report, ev.CandidateSelected):
        changes.update(in_flight=None, selected=report.number)
    elif isinstance(report, ev.EscalationRaised):
        # The phase runs again once answered: as its next attempt, not counted as failed.
        key = attempt_key(session.phase, session.round)
        asked = {**s.asked, key: s.asked.get(key, 0) + 1}
        changes.update(
            in_flight=None, escalations=(*s.escalations, escalation(report)), asked=asked
        )
    return changes


def _plan_passed(s: BuildState, graph: tuple[ev.TaskSpec, ...]) -> Changes:
    """The plan passed its review (or was submitted, without plan review): a person
    approves it too when ``[policy] plan_approval = "human"``, else the work starts."""
    if approval.gated(s):
        return {"stage": "plan-approval", "feedback": ()}
    return work_starts(s, graph)


def work_starts(s: BuildState, graph: tuple[ev.TaskSpec, ...]) -> Changes:
    """The plan is approved: implement@1, or its task graph."""
    if not graph:
        return next_impl_round(s, (), first=True)
    rounds = s.config.policy.max_review_rounds
    return {"stage": "tasks", "tasks": tasks_of(graph, rounds), "feedback": ()}


def _graph_refused(s: BuildState, session: OpenSession, why: str) -> Changes:
    """A plan whose task graph does not hold goes back to its author with the reason: as
    plan review's finding when plan review runs, else as a failed plan attempt."""
    finding = f"The plan's `agentrun-tasks` graph was refused: {why}"
    if s.config.pipeline.plan_review:
        return {"stage": "plan", "plan_round": s.plan_round + 1, "feedback": (finding,)}
    key = attempt_key(session.phase, session.round)
    return {
        "stage": "plan",
        "attempts": {**s.attempts, key: s.attempts.get(key, 0) + 1},
        "last_error": {**s.last_error, key: finding},
        "feedback": (*s.feedback, finding),
    }


def tasks_of(graph: tuple[ev.TaskSpec, ...], rounds: int) -> dict[str, TaskState]:
    """The tasks of an approved plan's graph, none started yet."""
    return {
        t.id: TaskState(id=t.id, goal=t.goal, deps=t.deps, paths=t.paths, impl_round_limit=rounds)
        for t in graph
    }


def implemented(s: BuildState) -> Changes:
    """The build's implement is done (its one round, its tasks landed, or its chosen
    candidate): on to code review, or to the checks without it."""
    return {
        "implemented": True,
        "feedback": (),
        "verify_results": {},
        "finalize_results": {},
        "stage": "code-review" if s.config.pipeline.code_review else checks_stage(s.config),
    }


def verify_recorded(s: BuildState, p: ev.VerifyCompleted) -> Changes:
    """A verify step's result is kept; what follows from it is the caller's."""
    result = StepResult(outcome=p.outcome, attempt=p.attempt, reason=p.reason, report=p.report)
    changes: Changes = {"in_flight": None, "verify_results": {**s.verify_results, p.step: result}}
    if p.head:
        changes["head"] = p.head
    return changes


def checks_stage(config: Config) -> Stage:
    """Where a build goes once its code is approved: the first stage that has steps."""
    if config.verify:
        return "verify"
    return "finalize" if config.finalize else "done"


PRODUCERS = ("plan", "implement")


def _spent(s: BuildState, session: OpenSession, p: ev.SessionEnded) -> Changes:
    """Book a session's usage to its phase and role; remember a producer's session id."""
    family = session.phase.split(":", 1)[0]
    used = p.usage
    tokens = used.tokens
    known = used.cost_usd is not None
    key = ladder.estimate_key(session.role, session.rung)
    role = s.role_usage.get(key, RoleUsage())
    role = RoleUsage(
        sessions=role.sessions + 1,
        tokens=role.tokens + tokens,
        cost_usd=role.cost_usd + (used.cost_usd or 0.0),
        priced=role.priced + (1 if known else 0),
    )
    changes: Changes = {
        "phase_usage": {**s.phase_usage, family: s.phase_usage.get(family, ev.Usage()) + used},
        "role_usage": {**s.role_usage, key: role},
    }
    if session.rung is not None:
        key = ladder.rung_key(session.role, session.rung)
        changes["rung_usage"] = {**s.rung_usage, key: s.rung_usage.get(key, ev.Usage()) + used}
    unpriced = session.model or session.runtime
    if not known and tokens and unpriced not in s.unpriced_models:
        changes["unpriced_models"] = (*s.unpriced_models, unpriced)
    if p.runtime_session_id and session.role in PRODUCERS and p.outcome == "ok":
        host = (s.runner or "").rpartition("@")[2]
        resumable = ResumableSession(runtime=session.runtime, id=p.runtime_session_id, host=host)
        changes["resumable"] = {**s.resumable, session.role: resumable}
    return changes


def next_impl_round(s: BuildState, feedback: tuple[str, ...], first: bool = False) -> Changes:
    return {
        "stage": "implement",
        "impl_round": 1 if first else s.impl_round + 1,
        "feedback": feedback,
        "verify_results": {},
        "finalize_results": {},
    }
