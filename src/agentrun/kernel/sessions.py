"""What agent work records: the job, its start, its session's end, its failure.

Pure functions from a decision and what happened (the session's id, the agent's
report, the commit the runner made, the error) to the events to append. The runner's
``sessions`` module runs the agent and commits; it appends what these return.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentrun import events as ev
from agentrun.kernel.checks import finalize_ended
from agentrun.kernel.decide import RunAgentVerify, RunFinalizeStep, RunPhase
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import Report

AgentWork = RunPhase | RunAgentVerify | RunFinalizeStep
NO_TERMINAL = "no-terminal: the agent ended its turn without reporting (git agentrun agent …)"


@dataclass(frozen=True)
class SessionJob:
    """A decision that runs an agent, in the terms a session needs."""

    phase: str
    round: int
    attempt: int
    role: str
    feedback: tuple[str, ...]
    work: AgentWork


def job_of(work: AgentWork, impl_round: int) -> SessionJob:
    if isinstance(work, RunPhase):
        return SessionJob(work.phase, work.round, work.attempt, work.role, work.feedback, work)
    if isinstance(work, RunAgentVerify):
        return SessionJob(
            f"verify:{work.step}", work.round, work.attempt, work.role, work.feedback, work
        )
    return SessionJob(
        f"finalize:{work.step}", impl_round, work.attempt, work.role or "finalize", (), work
    )


def subject(report: Report) -> str:
    """The phase commit's subject line: what the agent reported."""
    if isinstance(report, ev.PlanReviewVerdict | ev.CodeReviewVerdict):
        if report.verdict == "approve":
            return "approve"
        return f"revise: {report.findings[0]}" if report.findings else "revise"
    if isinstance(report, ev.VerifyVerdict):
        return report.verdict + (f": {report.reason}" if report.reason else "")
    if isinstance(report, ev.PlanSubmitted | ev.AgentDone):
        return report.summary_text or report.type
    return report.type


def started_event(job: SessionJob) -> object:
    work = job.work
    if isinstance(work, RunPhase):
        starts = {
            "plan": ev.PlanStarted(round=job.round, feedback=job.feedback),
            "plan-review": ev.PlanReviewStarted(round=job.round),
            "implement": ev.ImplementStarted(round=job.round, feedback=job.feedback),
            "code-review": ev.CodeReviewStarted(round=job.round),
            "reconcile": ev.ReconcileStarted(round=job.round, base_sha=work.merge or ""),
            "select": ev.SelectStarted(round=job.round, offered=work.offered),
        }
        return starts[work.phase]
    if isinstance(work, RunAgentVerify):
        return ev.VerifyStarted(step=work.step, round=job.round, attempt=job.attempt, kind="agent")
    return ev.FinalizeStarted(step=work.step, attempt=job.attempt)


def failed(
    job: SessionJob,
    error: str,
    permanent: bool,
    session: str | None = None,
    max_attempts: int = 0,
    guard: bool = False,
) -> list[Draft]:
    """What a failed job records: finalize is failure-tolerant, the rest retry or ask."""
    work = job.work
    if isinstance(work, RunFinalizeStep):
        return finalize_ended(work, None, error)
    return [Draft(failure(job, error, permanent, False, session, max_attempts, guard))]


def failure(
    job: SessionJob,
    error: str,
    permanent: bool = False,
    interrupted: bool = False,
    session: str | None = None,
    max_attempts: int = 0,
    guard: bool = False,
) -> ev.PhaseFailed:
    return ev.PhaseFailed(
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


@dataclass(frozen=True)
class Turn:
    """How a session's turn ended, as its ``session.ended`` records it."""

    session: str
    transcript: str  # the transcript's artifact name
    artifacts: Mapping[str, bytes] = field(default_factory=dict)
    usage: ev.Usage = field(default_factory=ev.Usage)
    runtime_session_id: str | None = None


def transcript_name(session: str) -> str:
    return f"transcript-{session}.txt"


def no_runtime(job: SessionJob) -> list[Draft]:
    """The job starts and fails for good: nothing is configured to run its role."""
    error = (
        f"no runtime is configured for role {job.role!r}: set roles.{job.role} or "
        "roles.default in .agentrun.toml (`git agentrun init` writes an example)"
    )
    return refused(job, error)


def begun(job: SessionJob) -> Draft:
    """The phase (or step) starts: its ``*.started`` event."""
    return Draft(started_event(job))


def refused(job: SessionJob, error: str) -> list[Draft]:
    """The job starts and fails for good before any agent runs (retrying will not help)."""
    return [begun(job), *failed(job, error, permanent=True)]


def merged(job: SessionJob, base: str, head: str) -> list[Draft]:
    """Reconcile merged the moved base cleanly: no agent is needed."""
    done = ev.ReconcileCompleted(round=job.round, base_sha=base, head=head)
    return [begun(job), Draft(done)]


def session_started(
    job: SessionJob,
    session: str,
    runtime: str,
    model: str | None,
    substitution: str | None,
    rung: int | None = None,
) -> Draft:
    return Draft(
        ev.SessionStarted(
            session=session,
            role=job.role,
            runtime=runtime,
            model=model,
            phase=job.phase,
            round=job.round,
            substitution=substitution,
            rung=rung,
        )
    )


def interrupted(job: SessionJob, session: str, why: str) -> list[Draft]:
    """Ctrl-C (or the runner stopping) ended the session: the attempt does not count."""
    return [
        Draft(ev.SessionEnded(session=session, outcome="interrupted", error=why)),
        Draft(failure(job, f"interrupted by {why}", interrupted=True, session=session)),
    ]


def aborted(turn: Turn) -> list[Draft]:
    ended = ev.SessionEnded(
        session=turn.session,
        outcome="aborted",
        transcript=turn.transcript,
        usage=turn.usage,
        error="aborted",
    )
    return [Draft(ended, artifacts=turn.artifacts)]


def commits(report: Report) -> bool:
    """Whether the report ends the phase with a commit (an escalation only parks it, a
    choice between candidates changes nothing)."""
    return not isinstance(report, ev.EscalationRaised | ev.CandidateSelected)


def succeeded(
    job: SessionJob, turn: Turn, report: Report, head: str | None, changed: tuple[str, ...] = ()
) -> list[Draft]:
    """The agent reported; ``head`` is the phase commit (None when ``commits`` is false),
    ``changed`` the paths an implement round changed since the base."""
    ended = ev.SessionEnded(
        session=turn.session,
        outcome="ok",
        transcript=turn.transcript,
        usage=turn.usage,
        runtime_session_id=turn.runtime_session_id,
        head=head,
    )
    drafts = [Draft(ended, artifacts=turn.artifacts)]
    if head is None:
        return drafts
    work = job.work
    if isinstance(work, RunPhase) and work.merge:
        drafts.append(Draft(ev.ReconcileCompleted(round=job.round, base_sha=work.merge, head=head)))
    elif isinstance(work, RunPhase) and work.phase == "implement":
        text = report.summary_text if isinstance(report, ev.AgentDone) else ""
        completed = ev.ImplementCompleted(
            round=job.round, head=head, changed_paths=changed, summary_text=text
        )
        drafts.append(Draft(completed))
    elif isinstance(work, RunAgentVerify):
        verdict = report if isinstance(report, ev.VerifyVerdict) else None
        completed_verify = ev.VerifyCompleted(
            step=work.step,
            round=job.round,
            attempt=job.attempt,
            outcome=verdict.verdict if verdict else "fail",
            reason=verdict.reason if verdict else "",
            head=head,
        )
        drafts.append(Draft(completed_verify))
    elif isinstance(work, RunFinalizeStep):
        drafts.append(Draft(ev.FinalizeStepCompleted(step=work.step, ok=True, head=head)))
        if work.last:
            drafts.append(Draft(ev.FinalizeCompleted()))
    return drafts


def session_failed(
    job: SessionJob,
    turn: Turn,
    error: str,
    permanent: bool = False,
    cause: str = "",
    max_attempts: int = 0,
    count: bool = True,
) -> list[Draft]:
    """The session ended without a report (or its commit was refused: ``cause`` guard).

    ``count`` False: the runtime was unavailable and an alternate takes the job over, so
    only the session is closed.
    """
    ended = ev.SessionEnded(
        session=turn.session,
        outcome="timeout" if cause == "timeout" else "failed",
        transcript=turn.transcript,
        usage=turn.usage,
        error=error,
    )
    drafts = [Draft(ended, artifacts=turn.artifacts)]
    if not count:
        return drafts
    guard = cause == "guard"
    return drafts + failed(job, error, permanent, turn.session, max_attempts, guard)
