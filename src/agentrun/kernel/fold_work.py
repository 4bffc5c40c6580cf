"""The work in the fold (``evolve``): agent sessions, the phases' starts, reports,
results and failures, and the task graph's and candidates' events. Pure.
"""

from __future__ import annotations

from typing import assert_never

from agentrun import events as ev
from agentrun.kernel import ladder, tasks
from agentrun.kernel.session_end import (
    Changes,
    checks_stage,
    implemented,
    next_impl_round,
    report,
    session_ended,
    verify_recorded,
)
from agentrun.kernel.state import (
    FEEDBACK_TAIL,
    BuildState,
    InFlight,
    OpenSession,
    attempt_key,
)

WorkPayload = (
    ev.SessionStarted
    | ev.SessionEnded
    | ev.LadderClimbed
    | ev.PlanSubmitted
    | ev.PlanReviewVerdict
    | ev.CodeReviewVerdict
    | ev.AgentDone
    | ev.VerifyVerdict
    | ev.CandidateSelected
    | ev.PlanStarted
    | ev.PlanReviewStarted
    | ev.ImplementStarted
    | ev.CodeReviewStarted
    | ev.VerifyStarted
    | ev.FinalizeStarted
    | ev.ImplementCompleted
    | ev.VerifyCompleted
    | ev.FinalizeStepCompleted
    | ev.FinalizeCompleted
    | ev.PhaseFailed
    | ev.SelectStarted
    | ev.ReconcileStarted
    | ev.ReconcileCompleted
)


TasksPayload = (
    ev.TaskStarted | ev.TaskIntegrated | ev.TaskReturned | ev.CandidatesStarted | ev.CandidateChosen
)


def work(s: BuildState, event: ev.Event, p: WorkPayload) -> Changes:
    """Agent sessions and the phases' work: starts, reports, results, failures."""
    match p:
        case ev.SessionStarted():
            session = OpenSession(**p.model_dump(exclude={"type", "substitution"}))
            return {"session": session, "sessions": s.sessions + 1}
        case ev.SessionEnded():
            return session_ended(s, p)
        case ev.LadderClimbed():
            return ladder.climbed(s, p)
        case (
            ev.PlanSubmitted()
            | ev.PlanReviewVerdict()
            | ev.CodeReviewVerdict()
            | ev.AgentDone()
            | ev.VerifyVerdict()
            | ev.CandidateSelected()
        ):
            return report(s, p)
        case ev.PlanStarted():
            return {"in_flight": _in_flight(s, "plan", p.round, event)}
        case ev.PlanReviewStarted():
            return {"in_flight": _in_flight(s, "plan-review", p.round, event)}
        case ev.ImplementStarted():
            return {"in_flight": _in_flight(s, "implement", p.round, event)}
        case ev.CodeReviewStarted():
            return {"in_flight": _in_flight(s, "code-review", p.round, event)}
        case ev.VerifyStarted():
            return {"in_flight": _in_flight(s, f"verify:{p.step}", p.round, event)}
        case ev.FinalizeStarted():
            return {"in_flight": _in_flight(s, f"finalize:{p.step}", s.impl_round, event)}
        case ev.ImplementCompleted():
            return {
                "in_flight": None,
                "head": p.head,
                "changed_paths": p.changed_paths,
                **implemented(s),
            }
        case ev.VerifyCompleted():
            if s.task is not None and s.task in s.candidates:
                return tasks.candidate_verified(s, p)
            return _verify_completed(s, p)
        case ev.FinalizeStepCompleted():
            results = {**s.finalize_results, p.step: p.ok}
            changes: Changes = {"in_flight": None, "finalize_results": results}
            if p.head:
                changes["head"] = p.head
            if all(step.name in results for step in s.config.finalize):
                changes["stage"] = "done"
            return changes
        case ev.FinalizeCompleted():
            return {"stage": "done"}
        case ev.PhaseFailed():
            return _phase_failed(s, p)
        case ev.SelectStarted():
            in_flight = _in_flight(s, "select", p.round, event)
            return {"in_flight": in_flight, "offered": p.offered}
        case ev.ReconcileStarted():
            return {"in_flight": _in_flight(s, "reconcile", p.round, event)}
        case ev.ReconcileCompleted():
            return {
                "in_flight": None,
                "head": p.head,
                "base_sha": p.base_sha,
                "reconcile_base": None,
                "verify_results": {},
                "finalize_results": {},
                "stage": checks_stage(s.config),
            }
        case _:
            assert_never(p)


def tasks_changes(s: BuildState, event: ev.Event, p: TasksPayload) -> Changes:
    """The task graph and best of N: tasks started, landed or sent back; candidates."""
    match p:
        case ev.TaskStarted():
            return tasks.started(s, p) if s.task == p.task else {}
        case ev.TaskIntegrated():
            return tasks.landed(s, p)
        case ev.TaskReturned():
            return tasks.returned(s, p)
        case ev.CandidatesStarted():
            return tasks.candidates_started(s, p)
        case ev.CandidateChosen():
            return tasks.chosen(s, p)
        case _:
            assert_never(p)


def _phase_failed(s: BuildState, p: ev.PhaseFailed) -> Changes:
    key = attempt_key(p.phase, p.round)
    changes: Changes = {"in_flight": None, "last_error": {**s.last_error, key: p.error}}
    if p.guard and p.phase == "implement":
        reason = f"The previous round was refused: {p.error}"
        changes.update(next_impl_round(s, (*s.feedback, reason)))
        changes.update(ladder.failed_round(s, "implement", ladder.fingerprint("guard", p.error)))
    elif p.interrupted:
        changes["interruptions"] = {**s.interruptions, key: s.interruptions.get(key, 0) + 1}
    else:
        changes["attempts"] = {**s.attempts, key: s.attempts.get(key, 0) + 1}
    if p.permanent:
        changes["blocked"] = {**s.blocked, key: p.error}
    return changes


def _in_flight(s: BuildState, phase: str, round_: int, event: ev.Event) -> InFlight:
    key = attempt_key(phase, round_)
    attempt = s.runs(key) + 1
    return InFlight(key=key, phase=phase, round=round_, attempt=attempt, started=event.ts)


def _verify_completed(s: BuildState, p: ev.VerifyCompleted) -> Changes:
    changes = verify_recorded(s, p)
    done = {*s.verify_results, p.step}
    if p.outcome == "fail":
        tail = p.reason[-FEEDBACK_TAIL:]
        feedback = (f"Verify step `{p.step}` failed in round {p.round}:\n{tail}",)
        changes.update(next_impl_round(s, feedback))
        failure = p.failure or ladder.fingerprint(p.step, p.reason)
        changes.update(ladder.failed_round(s, "implement", failure))
    elif all(step.name in done for step in s.config.verify):
        changes["stage"] = "finalize" if s.config.finalize else "done"
    return changes
