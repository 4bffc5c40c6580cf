"""Running one agent session for a phase: brackets, prompt, turn, phase commit, facts.

The session is bracketed by ``session.started`` / ``session.ended`` (with the
transcript). The agent reports through its verbs; after the turn the runner reads
the log, and no report from the session means ``phase.failed`` (``no-terminal``).
"""

from __future__ import annotations

import contextlib
import sys
import sysconfig
import uuid
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun import procs
from agentrun.errors import GuardError, LeaseLostError, RuntimeSetupError
from agentrun.events import (
    AgentDone,
    CodeReviewStarted,
    CodeReviewVerdict,
    EscalationRaised,
    FinalizeCompleted,
    FinalizeStarted,
    FinalizeStepCompleted,
    ImplementCompleted,
    ImplementStarted,
    ObservationRecorded,
    PhaseFailed,
    PlanReviewStarted,
    PlanReviewVerdict,
    PlanStarted,
    PlanSubmitted,
    SessionEnded,
    SessionStarted,
    VerifyCompleted,
    VerifyStarted,
    VerifyVerdict,
)
from agentrun.gitrepo import child_env
from agentrun.kernel.decide import RunAgentVerify, RunFinalizeStep, RunPhase
from agentrun.kernel.state import Report
from agentrun.runner.build import BuildHandle, Observer
from agentrun.runner.prompts import render_prompt
from agentrun.runner.watch import AbortWatcher
from agentrun.runner.workspace import PhaseMark, Workspace
from agentrun.runtimes.base import (
    UNAVAILABLE,
    SessionControl,
    SessionSpec,
    TurnResult,
    make_runtime,
)
from agentrun.store.lease import Heartbeat
from agentrun.store.log import Draft
from agentrun.store.notes import add_note

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


def agent_env(build: str, phase: str, round_: int, session: str) -> dict[str, str]:
    """The session environment: ours, the agent variables, and ``git-agentrun`` on PATH."""
    env = child_env()
    scripts = sysconfig.get_path("scripts")
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = ":".join(dict.fromkeys([scripts, bindir, env.get("PATH", "")]))
    env.update(AGENTRUN_BUILD=build, AGENTRUN_PHASE=f"{phase}@{round_}", AGENTRUN_SESSION=session)
    return env


class SessionRunner:
    def __init__(
        self,
        repo: pygit2.Repository,
        build: BuildHandle,
        workspace: Workspace,
        beat: Heartbeat,
        observer: Observer,
    ) -> None:
        self.repo = repo
        self.build = build
        self.workspace = workspace
        self.beat = beat
        self.observer = observer

    def run(self, work: AgentWork) -> None:
        state = self.build.state
        job = job_of(work, state.impl_round)
        names = state.config.runtimes_for(job.role)
        started = _started_event(job)
        if not names:
            error = (
                f"no runtime is configured for role {job.role!r}: set roles.{job.role} or "
                "roles.default in .agentrun.toml (`git agentrun init` writes an example)"
            )
            self.build.append([Draft(started), *_failed(job, error, permanent=True)], fact=False)
            return
        self.build.append([Draft(started)], fact=False)
        for index, name in enumerate(names):
            substitution = names[0] if index else None
            retry_elsewhere = self._session(job, name, substitution, last=index == len(names) - 1)
            if not retry_elsewhere:
                return

    def _session(self, job: Job, name: str, substitution: str | None, last: bool) -> bool:
        """One session on runtime ``name``; True when an alternate should take over."""
        state = self.build.state
        session = f"s-{uuid.uuid4().hex[:8]}"
        config = state.config.runtime(name)
        self.build.append(
            [
                Draft(
                    SessionStarted(
                        session=session,
                        role=job.role,
                        runtime=name,
                        model=config.model if config else None,
                        phase=job.phase,
                        round=job.round,
                        substitution=substitution,
                    )
                )
            ]
        )
        if config is None:
            error = f"role {job.role!r} is routed to runtime {name!r}, which is not configured"
            self._fail(job, session, TurnResult(ok=False, error=error, permanent=True), "")
            return False
        plan = self.build.log.text(self.build.tip, state.plan)
        spec = SessionSpec(
            session=session,
            build=state.slug,
            phase=job.phase,
            round=job.round,
            attempt=job.attempt,
            role=job.role,
            prompt=render_prompt(self.repo, state, job.phase, job.round, job.feedback, plan),
            workdir=self.workspace.path,
            env=agent_env(state.slug, job.phase, job.round, session),
            budget_seconds=state.config.policy.session_budget_seconds,
            repo_root=Path(self.repo.workdir or self.workspace.path),
        )
        control = SessionControl(on_activity=self.observer.activity, on_process=self._record_agent)
        watcher = AbortWatcher(self.repo, state.slug, control.cancel)
        try:
            runtime = make_runtime(name, config)
            handle, turn = runtime.start(spec, control)
            transcript = runtime.end(handle)
        except RuntimeSetupError as exc:
            watcher.stop()
            self._fail(job, session, TurnResult(ok=False, error=str(exc), permanent=True), "")
            return False
        except KeyboardInterrupt:
            control.cancel.set()
            watcher.stop()
            self._end_agent()
            self.build.append(
                [
                    Draft(SessionEnded(session=session, outcome="interrupted", error="Ctrl-C")),
                    Draft(
                        _failure(job, "interrupted by Ctrl-C", interrupted=True, session=session)
                    ),
                ]
            )
            raise
        watcher.stop()
        self._record_agent(None)
        state = self.build.refresh()
        open_session = state.session if state.session and state.session.session == session else None
        report = open_session.report if open_session else None
        artifact = f"transcript-{session}.txt"
        arts = {artifact: transcript.text.encode()}
        if control.cancel.is_set() or turn.cause == "aborted":
            ended = SessionEnded(
                session=session,
                outcome="aborted",
                transcript=artifact,
                usage=turn.usage,
                error="aborted",
            )
            self.build.append([Draft(ended, artifacts=arts)])
            return False
        if report is None:
            if turn.ok or not turn.error:
                turn = TurnResult(
                    ok=False,
                    usage=turn.usage,
                    error="no-terminal: the agent ended its turn without reporting "
                    "(git agentrun agent …)",
                )
            if turn.cause == UNAVAILABLE and not last:
                self._fail(job, session, turn, transcript.text, count=False)
                return True  # the runtime is not available here: an alternate takes over
            self._fail(job, session, turn, transcript.text)
            return False
        # A report stands even if the program then exited badly or ran out its budget.
        self._succeed(job, session, report, turn, artifact, arts, transcript.runtime_session_id)
        return False

    def _succeed(
        self,
        job: Job,
        session: str,
        report: Report,
        turn: TurnResult,
        artifact: str,
        arts: dict[str, bytes],
        runtime_session_id: str | None,
    ) -> None:
        state = self.build.state
        ended = dict(
            session=session,
            transcript=artifact,
            usage=turn.usage,
            runtime_session_id=runtime_session_id,
        )
        if isinstance(report, EscalationRaised):
            self.build.append([Draft(SessionEnded(outcome="ok", **ended), artifacts=arts)])
            return
        summary = _subject(report)
        mark = PhaseMark(state.slug, job.phase, job.round, session, summary)
        try:
            head = self.workspace.commit_phase(state.head, mark)
        except GuardError as exc:
            refused = TurnResult(ok=False, error=str(exc), usage=turn.usage, cause="guard")
            self._fail(job, session, refused, "", arts)
            return
        drafts = [Draft(SessionEnded(outcome="ok", head=head, **ended), artifacts=arts)]
        work = job.work
        if isinstance(work, RunPhase) and work.phase == "implement":
            paths = self.workspace.changed_paths(state.base_sha, head)
            text = report.summary_text if isinstance(report, AgentDone) else ""
            drafts.append(
                Draft(
                    ImplementCompleted(
                        round=job.round, head=head, changed_paths=paths, summary_text=text
                    )
                )
            )
        elif isinstance(work, RunAgentVerify):
            verdict = report if isinstance(report, VerifyVerdict) else None
            outcome = verdict.verdict if verdict else "fail"
            drafts.append(
                Draft(
                    VerifyCompleted(
                        step=work.step,
                        round=job.round,
                        attempt=job.attempt,
                        outcome=outcome,
                        reason=verdict.reason if verdict else "",
                        head=head,
                    )
                )
            )
        elif isinstance(work, RunFinalizeStep):
            drafts.append(Draft(FinalizeStepCompleted(step=work.step, ok=True, head=head)))
            if work.last:
                drafts.append(Draft(FinalizeCompleted()))
        self.build.append(drafts)
        add_note(
            self.repo,
            head,
            {
                "build": state.slug,
                "phase": job.phase,
                "round": job.round,
                "session": session,
                "report": report.type,
            },
        )

    def _fail(
        self,
        job: Job,
        session: str,
        turn: TurnResult,
        transcript: str,
        arts: dict[str, bytes] | None = None,
        count: bool = True,
    ) -> None:
        artifact = f"transcript-{session}.txt"
        arts = arts or {artifact: transcript.encode()}
        outcome = "timeout" if turn.cause == "timeout" else "failed"
        drafts = [
            Draft(
                SessionEnded(
                    session=session,
                    outcome=outcome,
                    transcript=artifact,
                    usage=turn.usage,
                    error=turn.error,
                ),
                artifacts=arts,
            )
        ]
        if not count:
            self.build.append(drafts)
            return
        max_attempts = self.build.state.config.policy.max_phase_attempts
        guard = turn.cause == "guard"
        drafts += _failed(job, turn.error, turn.permanent, session, max_attempts, guard)
        self.build.append(drafts)

    def _record_agent(self, pid: int | None) -> None:
        self._agent_pid = pid
        # A lost lease is noticed by the loop's check; the session is not cut short here.
        with contextlib.suppress(LeaseLostError):
            self.beat.renew(agent_pgid=pid)

    def _end_agent(self) -> None:
        pid = getattr(self, "_agent_pid", None)
        if pid:
            procs.end_tree(pid)


def _subject(report: Report) -> str:
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


def _started_event(job: Job) -> object:
    work = job.work
    if isinstance(work, RunPhase):
        starts = {
            "plan": PlanStarted(round=job.round, feedback=job.feedback),
            "plan-review": PlanReviewStarted(round=job.round),
            "implement": ImplementStarted(round=job.round, feedback=job.feedback),
            "code-review": CodeReviewStarted(round=job.round),
        }
        return starts[work.phase]
    if isinstance(work, RunAgentVerify):
        return VerifyStarted(step=work.step, round=job.round, attempt=job.attempt, kind="agent")
    return FinalizeStarted(step=work.step, attempt=job.attempt)


def _failed(
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
    return [Draft(_failure(job, error, permanent, False, session, max_attempts, guard))]


def _failure(
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
