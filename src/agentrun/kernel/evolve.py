"""The fold step: ``evolve(state, event)`` is the state after one event (DESIGN §3).

Pure: no I/O, no clock. Everything it needs comes in the event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import assert_never

from agentrun import events as ev
from agentrun.kernel import approval, gate, ladder, tasks
from agentrun.kernel.session_end import (
    Changes,
    checks_stage,
    escalation,
    implemented,
    next_impl_round,
    report,
    session_ended,
    verify_recorded,
    work_starts,
)
from agentrun.kernel.state import (
    FEEDBACK_TAIL,
    BuildState,
    InFlight,
    OpenSession,
    Proposal,
    attempt_key,
    initial_state,
)
from agentrun.snapshot import read as read_snapshot


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
    p = event.payload
    match p:
        case ev.BuildCreated():
            config = read_snapshot(p.config)
            return {
                "created_at": event.ts,
                "goal": p.goal,
                "base_ref": p.base_ref,
                "base_sha": p.base_sha,
                "branch": p.branch,
                "source": p.source,
                "issue": p.issue,
                "requested_by": p.requested_by,
                "config": config,
                "allow_empty": p.allow_empty,
                "head": p.base_sha,
                "plan_round_limit": config.policy.max_review_rounds,
                "impl_round_limit": config.policy.max_review_rounds,
            }
        case ev.BuildCompleted():
            return {"status": "complete", "stage": "done"}
        case ev.BuildFailed():
            return {"status": "failed", "reason": p.reason}
        case ev.BuildPauseRequested():
            return {"pause_requested": True}
        case ev.BuildPaused():
            return {"paused": True, "pause_requested": False, "resume_requested": False}
        case ev.BuildResumeRequested():
            return {"resume_requested": True, "pause_requested": False}
        case ev.BuildResumed():
            return {"paused": False, "resume_requested": False}
        case ev.BuildAbortRequested():
            return {"abort_requested": True}
        case ev.BuildAborted():
            return {"status": "aborted", "reason": p.reason, "session": None, "in_flight": None}
        case ev.RunnerAttached():
            return _attached(s, p)
        case ev.RunnerSetupFailed():
            return {
                "setup_failures": s.setup_failures + 1,
                "setup_permanent": s.setup_permanent or p.permanent,
                "reason": p.error,
            }
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
        case ev.EscalationRaised():
            if p.source == "agent":
                # Opened only when the session ends well (see session_end.session_ended).
                return {"escalation_count": s.escalation_count + 1, **report(s, p)}
            return {
                "escalation_count": s.escalation_count + 1,
                "escalations": (*s.escalations, escalation(p)),
            }
        case ev.EscalationAnswered():
            return _answered(s, p)
        case ev.PlanApproved():
            return _plan_approved(s, p)
        case ev.ProposalOpened():
            proposal = Proposal(forge=p.forge, number=p.number, url=p.url)
            return {"proposal": proposal, "published_head": p.head}
        case ev.PublicationPushed():
            return {"published_head": p.sha}
        case ev.ProposalReady():
            return {
                "proposal": s.proposal.model_copy(update={"ready": True}) if s.proposal else None
            }
        case ev.ProposalClosed():
            if s.proposal is None:
                return {}
            return {"proposal": s.proposal.model_copy(update={"closed": True, "merged": p.merged})}
        case ev.ObservationRecorded():
            where = f"{p.phase} ({s.task})" if s.task else p.phase
            return {"observations": (*s.observations, f"{where}: {p.text}")}
        case ev.BuildRetryRequested():
            return {**_retry(s, event), **tasks.retried(s)}
        case ev.TaskStarted():
            return tasks.started(s, p) if s.task == p.task else {}
        case ev.TaskIntegrated():
            return tasks.landed(s, p)
        case ev.TaskReturned():
            return tasks.returned(s, p)
        case ev.CandidatesStarted():
            return tasks.candidates_started(s, p)
        case ev.SelectStarted():
            in_flight = _in_flight(s, "select", p.round, event)
            return {"in_flight": in_flight, "offered": p.offered}
        case ev.CandidateChosen():
            return tasks.chosen(s, p)
        case ev.BuildReconcileRequested():
            return _reconcile_requested(s, p)
        case ev.FeedbackReceived():
            text = f"Review {p.review} by {p.author} on #{p.number}:\n{p.text[-FEEDBACK_TAIL:]}"
            return {
                "pending_feedback": (*s.pending_feedback, text),
                "forge_review": max(s.forge_review, p.review),
            }
        case ev.ForgeCursor():
            return {
                "forge_comment": max(s.forge_comment, p.comment),
                "forge_review": max(s.forge_review, p.review),
            }
        case ev.BaseMoved():
            if s.status != "running" or not s.implemented:
                return {}
            return {"stage": "reconcile", "reconcile_base": p.base_sha}
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
        case ev.MemoryAdded() | ev.MemoryAccepted() | ev.MemoryForgotten():
            return {}  # facts live in refs/agentrun/memory, folded by kernel.memory
        case ev.ChecksSeen():
            return gate.seen(s, p, event.ts)
        case _:
            assert_never(p)


def _retry(s: BuildState, event: ev.Event) -> Changes:
    """Try again: a failed build re-opens, spent attempts re-arm, open questions close."""
    by = event.actor.login if isinstance(event.actor, ev.HumanActor) else "retry"
    changes: Changes = {
        "attempts": {},
        "interruptions": {},
        "blocked": {},
        "setup_failures": 0,
        "setup_permanent": False,
        "escalations": tuple(
            e.model_copy(update={"answer": "retry", "by": by}) if e.is_open else e
            for e in s.escalations
        ),
    }
    if s.status == "failed":
        changes.update(status="running", reason="")
    return changes


def _reconcile_requested(s: BuildState, p: ev.BuildReconcileRequested) -> Changes:
    """A complete build with an open proposal runs again: reconcile, verify, ready.

    The proposal goes back to draft until verification passes again (DESIGN §5).
    """
    proposal = s.proposal
    if s.status != "complete" or proposal is None or proposal.closed or not s.implemented:
        return {}  # the command refuses this; a hand-written log cannot force it
    return {
        "status": "running",
        "stage": "reconcile",
        "reconcile_base": p.base_sha,
        "proposal": proposal.model_copy(update={"ready": False}),
        "verify_results": {},
        "finalize_results": {},
    }


def _attached(s: BuildState, p: ev.RunnerAttached) -> Changes:
    changes: Changes = {"runner": f"{p.instance}@{p.host}"}
    flight = s.in_flight
    if flight is not None and flight.started and s.updated_at:
        # The dead runner's work ended with its last event; the downtime until this
        # runner came is not work time.
        spent = max((s.updated_at - flight.started).total_seconds(), 0.0)
        changes["active_seconds"] = s.active_seconds + spent
        changes["in_flight"] = flight.model_copy(update={"started": None})
    return changes


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


def _answered(s: BuildState, p: ev.EscalationAnswered) -> Changes:
    escalations = []
    changes: Changes = {}
    for esc in s.escalations:
        if esc.id == p.id and esc.is_open:
            esc = esc.model_copy(update={"answer": p.answer, "by": p.by})
            key = attempt_key(esc.phase, esc.round)
            # An answer re-arms whatever budget raised the question.
            if esc.cause == "budget":
                changes["budget_grants"] = s.budget_grants + 1
                changes["accepted_unpriced"] = s.unpriced_models
            if esc.cause == "empty":
                changes["allow_empty"] = True
            if esc.cause == "stall":
                changes["stall"] = ()
            if esc.cause == "checks-timeout":
                changes.update(gate.rearmed())
            if esc.cause == "round-limit":
                step = s.config.policy.max_review_rounds
                if esc.phase == "plan":
                    changes["plan_round_limit"] = s.plan_round_limit + step
                else:
                    changes["impl_round_limit"] = s.impl_round_limit + step
            changes["attempts"] = {k: v for k, v in s.attempts.items() if k != key}
            changes["interruptions"] = {k: v for k, v in s.interruptions.items() if k != key}
            changes["blocked"] = {k: v for k, v in s.blocked.items() if k != key}
            changes["feedback"] = (*s.feedback, f"Answer to {esc.id} ({esc.question}): {p.answer}")
            if esc.cause == approval.CAUSE:
                changes.update(approval.sent_back(s, esc, p.answer))
        escalations.append(esc)
    changes["escalations"] = tuple(escalations)
    return changes


def _plan_approved(s: BuildState, p: ev.PlanApproved) -> Changes:
    """A person approved the plan that waited: the work starts (implement@1, or the graph)."""
    asked = approval.waiting(s)
    if asked is None or asked.id != p.id or s.stage != "plan-approval":
        return {}  # `approve` refuses this; a hand-written log cannot force it
    closed = asked.model_copy(update={"answer": "approved", "by": p.by})
    escalations = tuple(closed if e.id == p.id else e for e in s.escalations)
    return {"escalations": escalations, **work_starts(s, s.graph)}


def replay(slug: str, events: Iterable[ev.Event]) -> BuildState:
    """The state of a build after its whole log: a fold of ``evolve``."""
    state = initial_state(slug)
    for event in events:
        state = evolve(state, event)
    return state
