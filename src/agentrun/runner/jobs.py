"""What the runner records about agent work: the job, its start, its failure.

Pure functions from a decision (and what happened) to events; ``sessions`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrun.events import (
    AgentDone,
    CodeReviewStarted,
    CodeReviewVerdict,
    FinalizeCompleted,
    FinalizeStarted,
    FinalizeStepCompleted,
    ImplementStarted,
    ObservationRecorded,
    PhaseFailed,
    PlanReviewStarted,
    PlanReviewVerdict,
    PlanStarted,
    PlanSubmitted,
    ReconcileStarted,
    VerifyStarted,
    VerifyVerdict,
)
from agentrun.kernel.decide import RunAgentVerify, RunFinalizeStep, RunPhase
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import Report

AgentWork = RunPhase | RunAgentVerify | RunFinalizeStep


@dataclass(frozen=True)
class Job:
    """A decision that runs an agent, in the terms a session needs."""

    phase: str
    round: int
    attempt: int
    role: str
    feedback: tuple[str, ...]
    work: AgentWork


def job_of(work: AgentWork, impl_round: int) -> Job:
    if isinstance(work, RunPhase):
        return Job(work.phase, work.round, work.attempt, work.role, work.feedback, work)
    if isinstance(work, RunAgentVerify):
        return Job(f"verify:{work.step}", work.round, work.attempt, work.role, work.feedback, work)
    return Job(f"finalize:{work.step}", impl_round, work.attempt, work.role or "finalize", (), work)


def subject(report: Report) -> str:
    """The phase commit's subject line: what the agent reported."""
    if isinstance(report, PlanReviewVerdict | CodeReviewVerdict):
        if report.verdict == "approve":
            return "approve"
        return f"revise: {report.findings[0]}" if report.findings else "revise"
    if isinstance(report, VerifyVerdict):
        return report.verdict + (f": {report.reason}" if report.reason else "")
    if isinstance(report, PlanSubmitted | AgentDone):
        return report.summary_text or report.type
    return report.type


def started_event(job: Job) -> object:
    work = job.work
    if isinstance(work, RunPhase):
        starts = {
            "plan": PlanStarted(round=job.round, feedback=job.feedback),
            "plan-review": PlanReviewStarted(round=job.round),
            "implement": ImplementStarted(round=job.round, feedback=job.feedback),
            "code-review": CodeReviewStarted(round=job.round),
            "reconcile": ReconcileStarted(round=job.round, base_sha=work.merge or ""),
        }
        return starts[work.phase]
    if isinstance(work, RunAgentVerify):
        return VerifyStarted(step=work.step, round=job.round, attempt=job.attempt, kind="agent")
    return FinalizeStarted(step=work.step, attempt=job.attempt)


def failed(
    job: Job,
    error: str,
    permanent: bool,
    session: str | None = None,
    max_attempts: int = 0,
    guard: bool = False,
) -> list[Draft]:
    """What a failed job records: finalize is failure-tolerant, the rest retry or ask."""
    work = job.work
    if isinstance(work, RunFinalizeStep):
        drafts = [
            Draft(FinalizeStepCompleted(step=work.step, ok=False, note=error)),
            Draft(ObservationRecorded(phase=job.phase, text=error)),
        ]
        return drafts + ([Draft(FinalizeCompleted())] if work.last else [])
    return [Draft(failure(job, error, permanent, False, session, max_attempts, guard))]


def failure(
    job: Job,
    error: str,
    permanent: bool = False,
    interrupted: bool = False,
    session: str | None = None,
    max_attempts: int = 0,
    guard: bool = False,
) -> PhaseFailed:
    return PhaseFailed(
        phase=job.phase,
        round=job.round,
        attempt=job.attempt,
        error=error,
        permanent=permanent,
        will_retry=not permanent and (interrupted or guard or job.attempt < max_attempts),
        session=session,
        interrupted=interrupted,
        guard=guard,
    )
