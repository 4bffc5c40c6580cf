"""A pure stand-in for the runner, for kernel tests: the events a runner appends.

``execute(state, decision, agent)`` returns the events a real runner would append to
carry out ``decision`` (mirroring ``runner/loop.py``, ``sessions.py``, ``checks.py``,
``publish.py`` and the agent verbs), in the order it appends them. What the agent (or
a check command) does is a parameter: an ``Agent`` maps the ``Job`` at hand to an
``Act``. Nothing here reads a clock or draws a random id: timestamps are a fixed base
plus the event's seq, shas and session ids are derived from the log, so the same
inputs give the same events.

``drive`` runs a whole build with it (and a simulated ``Human`` who answers, pauses,
resumes and aborts), recording every decision made along the way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from agentrun.config import Config
from agentrun.events import (
    Actor,
    AgentActor,
    AgentDone,
    BuildAborted,
    BuildAbortRequested,
    BuildCompleted,
    BuildCreated,
    BuildFailed,
    BuildPaused,
    BuildPauseRequested,
    BuildResumed,
    BuildResumeRequested,
    CodeReviewStarted,
    CodeReviewVerdict,
    EscalationAnswered,
    EscalationRaised,
    Event,
    FinalizeCompleted,
    FinalizeStarted,
    FinalizeStepCompleted,
    HumanActor,
    ImplementCompleted,
    ImplementStarted,
    KernelActor,
    ObservationRecorded,
    PhaseFailed,
    PlanReviewStarted,
    PlanReviewVerdict,
    PlanStarted,
    PlanSubmitted,
    ProposalOpened,
    ProposalReady,
    PublicationPushed,
    ReconcileCompleted,
    ReconcileStarted,
    RunnerAttached,
    RunnerSetupFailed,
    SessionEnded,
    SessionStarted,
    Usage,
    VerifyCompleted,
    VerifyStarted,
    VerifyVerdict,
)
from agentrun.kernel.decide import (
    Acknowledge,
    Complete,
    Decision,
    Fail,
    Publish,
    RaiseEscalation,
    RunAgentVerify,
    RunCheck,
    RunFinalizeStep,
    RunPhase,
    SkipVerify,
    Wait,
    decide,
)
from agentrun.kernel.evolve import evolve
from agentrun.kernel.state import BuildState, initial_state

BASE_TS = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
WRITER = "sim"
SLUG = "b-sim"
GOAL = "Fix the login redirect"
BASE_SHA = "b" * 40
KERNEL = KernelActor()
RUNNER = "sim@sim-host"  # what RunnerAttached makes of instance "sim" on host "sim-host"
NO_TERMINAL = "no-terminal: the agent ended its turn without reporting (git agentrun agent …)"

ActKind = Literal[
    "ok",  # the phase's positive report: plan, approve, done, pass; a command exits 0
    "revise",  # a reviewer's revise; an agent verify's fail; a command exits 1
    "fail",  # the session fails (runtime error); a command exits 1
    "permanent",  # the session fails with an error retrying will not fix
    "timeout",  # the session runs out of its budget
    "no-report",  # the turn ends without a report (no-terminal)
    "escalate",  # the agent asks a human
    "crash",  # the runner dies once the session has started (nothing closes it)
    "crash-after-report",  # the runner dies after the agent reported, before closing
    "interrupt",  # Ctrl-C: the session is closed as interrupted, not counted
    "abort",  # a human asks to abort while the session runs
    "no-runtime",  # no runtime is configured for the role
    "setup-failed",  # the workspace could not be prepared
]


@dataclass(frozen=True)
class Act:
    """What happens in one session or command run."""

    kind: ActKind = "ok"
    text: str = ""  # findings, a verify reason, a question, a summary, a command's output
    paths: tuple[str, ...] = ("src/app.py",)  # what an implement session changed


@dataclass(frozen=True)
class Job:
    """What is being run: ``phase`` is ``plan`` … ``verify:<step>``, ``finalize:<step>``."""

    phase: str
    round: int
    attempt: int
    command: str | None = None  # a command the kernel runs itself; None for an agent session

    @property
    def family(self) -> str:
        return self.phase.split(":", 1)[0]


Agent = Callable[[Job], Act]


def always(act: Act | ActKind = "ok") -> Agent:
    chosen = act if isinstance(act, Act) else Act(act)
    return lambda job: chosen


class Script:
    """Plays ``acts`` in order, one per job, then ``then`` forever; records the jobs."""

    def __init__(self, acts: Sequence[Act | ActKind] = (), then: Act | ActKind = "ok") -> None:
        self.acts = [a if isinstance(a, Act) else Act(a) for a in acts]
        self.then = then if isinstance(then, Act) else Act(then)
        self.jobs: list[Job] = []

    def __call__(self, job: Job) -> Act:
        index = len(self.jobs)
        self.jobs.append(job)
        return self.acts[index] if index < len(self.acts) else self.then


def fake_sha(seed: str) -> str:
    return hashlib.sha1(seed.encode()).hexdigest()


def ts(seq: int) -> datetime:
    return BASE_TS + timedelta(seconds=seq)


def envelope(seq: int, payload: Any, actor: Actor | None = None) -> Event:
    return Event(seq=seq, ts=ts(seq), actor=actor or KERNEL, writer=WRITER, payload=payload)


def created(config: Config | dict[str, Any] | None = None, slug: str = SLUG) -> Event:
    """The ``build.created`` that starts a simulated build (seq 1)."""
    data = config.model_dump(mode="json") if isinstance(config, Config) else dict(config or {})
    payload = BuildCreated(
        goal=GOAL, base_ref="main", base_sha=BASE_SHA, branch=f"agentrun/{slug}", config=data
    )
    return envelope(1, payload, HumanActor(login="alice"))


class _Out:
    """Events appended after ``state``, numbered on from its seq."""

    def __init__(self, state: BuildState) -> None:
        self.state = state
        self.events: list[Event] = []

    @property
    def next_seq(self) -> int:
        return self.state.seq + len(self.events) + 1

    def add(self, payload: Any, actor: Actor | None = None) -> Event:
        event = envelope(self.next_seq, payload, actor)
        self.events.append(event)
        return event

    def head(self) -> str:
        """The phase commit the event about to be appended records."""
        return fake_sha(f"{self.state.slug}:{self.next_seq}")


# --- the runner -------------------------------------------------------------


def execute(state: BuildState, decision: Decision, agent: Agent | None = None) -> list[Event]:
    """The events a runner appends to carry out ``decision`` from ``state``."""
    agent = agent or always()
    out = _Out(state)
    if isinstance(decision, Acknowledge):
        ack = {"pause": BuildPaused, "resume": BuildResumed, "abort": BuildAborted}
        out.add(ack[decision.control](reason="acknowledged by sim"))
    elif isinstance(decision, RunPhase):
        job = Job(decision.phase, decision.round, decision.attempt)
        _session(out, job, decision.role, decision, agent(job))
    elif isinstance(decision, RunAgentVerify):
        job = Job(f"verify:{decision.step}", decision.round, decision.attempt)
        _session(out, job, decision.role, decision, agent(job))
    elif isinstance(decision, RunCheck):
        job = Job(f"verify:{decision.step}", decision.round, decision.attempt, decision.command)
        _check(out, decision, agent(job))
    elif isinstance(decision, SkipVerify):
        out.add(
            VerifyCompleted(
                step=decision.step,
                round=decision.round,
                attempt=0,
                outcome="skipped",
                reason=decision.reason,
            )
        )
    elif isinstance(decision, RunFinalizeStep):
        job = Job(f"finalize:{decision.step}", state.impl_round, decision.attempt, decision.command)
        if decision.give_up:
            _give_up(out, decision)
        elif decision.command is None:
            _session(out, job, decision.role or "finalize", decision, agent(job))
        else:
            _finalize_command(out, decision, agent(job))
    elif isinstance(decision, Publish):
        _publish(out, decision)
    elif isinstance(decision, RaiseEscalation):
        out.add(
            EscalationRaised(
                id=decision.id,
                phase=decision.phase,
                round=decision.round,
                source="policy",
                cause=decision.cause,
                question=decision.question,
            )
        )
    elif isinstance(decision, Complete):
        out.add(BuildCompleted(summary_text=state.goal))
    elif isinstance(decision, Fail):
        out.add(BuildFailed(reason=decision.reason))
    elif isinstance(decision, Wait):
        pass
    return out.events


def attach(state: BuildState) -> list[Event]:
    """A new runner takes the build over: it closes what a dead runner left open."""
    out = _Out(state)
    out.add(RunnerAttached(instance="sim", host="sim-host", pid=1, resumed_from_seq=state.seq))
    previous = state.runner or "a runner"
    if state.session is not None:
        out.add(
            SessionEnded(
                session=state.session.session,
                outcome="abandoned",
                error=f"{previous} stopped during the session",
            )
        )
    if state.in_flight is not None and state.status == "running":
        flight = state.in_flight
        out.add(
            PhaseFailed(
                phase=flight.phase,
                round=flight.round,
                attempt=flight.attempt,
                error=f"interrupted: {previous} stopped before {flight.key} finished",
                session=state.session.session if state.session else None,
                interrupted=True,
            )
        )
    return out.events


def _started(job: Job, work: RunPhase | RunAgentVerify | RunFinalizeStep, feedback: Any) -> Any:
    if isinstance(work, RunPhase):
        return {
            "plan": PlanStarted(round=job.round, feedback=feedback),
            "plan-review": PlanReviewStarted(round=job.round),
            "implement": ImplementStarted(round=job.round, feedback=feedback),
            "code-review": CodeReviewStarted(round=job.round),
            "reconcile": ReconcileStarted(round=job.round, base_sha=work.merge or ""),
        }[work.phase]
    if isinstance(work, RunAgentVerify):
        return VerifyStarted(step=work.step, round=job.round, attempt=job.attempt, kind="agent")
    return FinalizeStarted(step=work.step, attempt=job.attempt)


def _session(
    out: _Out,
    job: Job,
    role: str,
    work: RunPhase | RunAgentVerify | RunFinalizeStep,
    act: Act,
) -> None:
    """One agent session (``runner/sessions.py``)."""
    if act.kind == "setup-failed":
        out.add(RunnerSetupFailed(error=act.text or "could not prepare the worktree"))
        return
    feedback = getattr(work, "feedback", ())
    started = _started(job, work, feedback)
    if act.kind == "no-runtime":
        error = f"no runtime is configured for role {role!r}"
        out.add(started)
        out.add(_phase_failed(out, job, error, permanent=True))
        return
    state = out.state
    session = f"s-{state.sessions + 1:04d}"
    out.add(started)
    out.add(
        SessionStarted(session=session, role=role, runtime="sim", phase=job.phase, round=job.round)
    )
    if act.kind == "crash":
        return
    if act.kind == "interrupt":
        out.add(SessionEnded(session=session, outcome="interrupted", error="Ctrl-C"))
        out.add(
            PhaseFailed(
                phase=job.phase,
                round=job.round,
                attempt=job.attempt,
                error="interrupted by Ctrl-C",
                will_retry=True,
                session=session,
                interrupted=True,
            )
        )
        return
    if act.kind == "abort":
        out.add(BuildAbortRequested(reason="stop"), HumanActor(login="alice"))
        out.add(SessionEnded(session=session, outcome="aborted", error="aborted"))
        return
    usage = Usage(tokens_in=100, tokens_out=10)
    if act.kind in ("fail", "permanent", "timeout", "no-report"):
        error = {
            "fail": act.text or "the runtime failed",
            "permanent": act.text or "the model does not exist",
            "timeout": act.text or "the session ran past its budget",
            "no-report": NO_TERMINAL,
        }[act.kind]
        outcome = "timeout" if act.kind == "timeout" else "failed"
        out.add(SessionEnded(session=session, outcome=outcome, usage=usage, error=error))
        _failed(out, job, work, error, permanent=act.kind == "permanent", session=session)
        return
    report = _report(job, session, act, state.escalation_count)
    out.add(report, AgentActor(role=role, session=session))
    if act.kind == "crash-after-report":
        return
    if isinstance(report, EscalationRaised):
        out.add(SessionEnded(session=session, outcome="ok", usage=usage))
        return
    head = out.head()
    out.add(SessionEnded(session=session, outcome="ok", usage=usage, head=head))
    if isinstance(work, RunPhase) and work.merge:
        out.add(ReconcileCompleted(round=job.round, base_sha=work.merge, head=head))
    elif isinstance(work, RunPhase) and work.phase == "implement":
        text = report.summary_text if isinstance(report, AgentDone) else ""
        out.add(
            ImplementCompleted(
                round=job.round, head=head, changed_paths=act.paths, summary_text=text
            )
        )
    elif isinstance(work, RunAgentVerify):
        assert isinstance(report, VerifyVerdict)
        out.add(
            VerifyCompleted(
                step=work.step,
                round=job.round,
                attempt=job.attempt,
                outcome=report.verdict,
                reason=report.reason,
                head=head,
            )
        )
    elif isinstance(work, RunFinalizeStep):
        out.add(FinalizeStepCompleted(step=work.step, ok=True, head=head))
        if work.last:
            out.add(FinalizeCompleted())


def _report(job: Job, session: str, act: Act, escalation_count: int) -> Any:
    """What the agent's verb appends (``agent/verbs.py``)."""
    if act.kind == "escalate":
        return EscalationRaised(
            id=f"e{escalation_count + 1}",
            phase=job.phase,
            round=job.round,
            source="agent",
            cause="agent",
            question=act.text or "Which database should this use?",
            session=session,
        )
    family = job.family
    revise = act.kind == "revise"
    if family == "plan":
        return PlanSubmitted(session=session, plan=f"plan-r{job.round}.md", summary_text="plan")
    if family in ("plan-review", "code-review"):
        model = PlanReviewVerdict if family == "plan-review" else CodeReviewVerdict
        findings = (act.text or "handle the empty case",) if revise else ()
        return model(
            session=session,
            round=job.round,
            verdict="revise" if revise else "approve",
            findings=findings,
        )
    if family == "verify":
        reason = (act.text or "the change breaks login") if revise else ""
        return VerifyVerdict(session=session, verdict="fail" if revise else "pass", reason=reason)
    return AgentDone(session=session, summary_text=act.text)


def _phase_failed(
    out: _Out, job: Job, error: str, permanent: bool = False, session: str | None = None
) -> PhaseFailed:
    attempts = out.state.config.policy.max_phase_attempts
    return PhaseFailed(
        phase=job.phase,
        round=job.round,
        attempt=job.attempt,
        error=error,
        permanent=permanent,
        will_retry=not permanent and job.attempt < attempts,
        session=session,
    )


def _failed(
    out: _Out,
    job: Job,
    work: RunPhase | RunAgentVerify | RunFinalizeStep,
    error: str,
    permanent: bool,
    session: str,
) -> None:
    """A failed session's closing facts: a phase failure, or a tolerated finalize failure."""
    if isinstance(work, RunFinalizeStep):
        out.add(FinalizeStepCompleted(step=work.step, ok=False, note=error))
        out.add(ObservationRecorded(phase=job.phase, text=error))
        if work.last:
            out.add(FinalizeCompleted())
        return
    out.add(_phase_failed(out, job, error, permanent=permanent, session=session))


def _interrupted(out: _Out, phase: str, round_: int, attempt: int, abort: bool) -> None:
    if abort:
        out.add(BuildAbortRequested(reason="stop"), HumanActor(login="alice"))
    why = "cancelled" if abort else "Ctrl-C"
    out.add(
        PhaseFailed(
            phase=phase,
            round=round_,
            attempt=attempt,
            error=f"interrupted ({why})",
            interrupted=True,
        )
    )


def _output(act: Act) -> str:
    return act.text or "FAILED tests/test_login.py::test_redirect"


def _check(out: _Out, work: RunCheck, act: Act) -> None:
    """A verify command (``runner/checks.py``): exit 0 passes."""
    if act.kind == "setup-failed":
        out.add(RunnerSetupFailed(error=act.text or "could not prepare the worktree"))
        return
    out.add(VerifyStarted(step=work.step, round=work.round, attempt=work.attempt))
    if act.kind in ("crash", "crash-after-report"):
        return
    if act.kind in ("interrupt", "abort"):
        _interrupted(out, f"verify:{work.step}", work.round, work.attempt, act.kind == "abort")
        return
    passed = act.kind == "ok"
    reason = "" if passed else f"`{work.command}` exit 1:\n{_output(act)[-2000:]}"
    out.add(
        VerifyCompleted(
            step=work.step,
            round=work.round,
            attempt=work.attempt,
            outcome="pass" if passed else "fail",
            exit_code=0 if passed else 1,
            report=f"verify-{work.step}-r{work.round}-a{work.attempt}.txt",
            reason=reason,
            head=out.head(),
        )
    )


def _give_up(out: _Out, work: RunFinalizeStep) -> None:
    note = "gave up: the step kept being cut short (Ctrl-C or a runner that stopped)"
    out.add(FinalizeStepCompleted(step=work.step, ok=False, note=note))
    out.add(ObservationRecorded(phase=f"finalize:{work.step}", text=note))
    if work.last:
        out.add(FinalizeCompleted())


def _finalize_command(out: _Out, work: RunFinalizeStep, act: Act) -> None:
    """A finalize command (``runner/checks.py``): failure-tolerant."""
    if act.kind == "setup-failed":
        out.add(RunnerSetupFailed(error=act.text or "could not prepare the worktree"))
        return
    phase = f"finalize:{work.step}"
    round_ = out.state.impl_round
    out.add(FinalizeStarted(step=work.step, attempt=work.attempt))
    if act.kind in ("crash", "crash-after-report"):
        return
    if act.kind in ("interrupt", "abort"):
        _interrupted(out, phase, round_, work.attempt, act.kind == "abort")
        return
    if act.kind == "ok":
        out.add(FinalizeStepCompleted(step=work.step, ok=True, head=out.head()))
    else:
        note = f"`{work.command}` exit 1"
        out.add(FinalizeStepCompleted(step=work.step, ok=False, note=note))
        out.add(ObservationRecorded(phase=phase, text=note))
    if work.last:
        out.add(FinalizeCompleted())


def _publish(out: _Out, work: Publish) -> None:
    """Publication (``runner/publish.py``) on the local forge."""
    state = out.state
    if work.operation == "open-draft":
        out.add(
            ProposalOpened(
                forge="local", number=1, url=f"refs/agentrun/pulls/1 ({SLUG})", head=state.head
            )
        )
    elif work.operation == "push":
        out.add(PublicationPushed(branch=state.branch, sha=state.head))
    else:
        assert state.proposal is not None
        out.add(ProposalReady(number=state.proposal.number))


# --- people -----------------------------------------------------------------

Control = Literal["pause", "resume", "abort"]


def request(state: BuildState, control: Control, login: str = "alice") -> list[Event]:
    """A human's ``git agentrun pause|resume|abort``."""
    kinds = {
        "pause": BuildPauseRequested,
        "resume": BuildResumeRequested,
        "abort": BuildAbortRequested,
    }
    out = _Out(state)
    out.add(kinds[control](reason=f"{control} by {login}"), HumanActor(login=login))
    return out.events


def answer(state: BuildState, text: str, login: str = "alice") -> list[Event]:
    """A human answers the open escalation (``git agentrun answer SLUG TEXT``)."""
    (esc,) = state.open_escalations
    out = _Out(state)
    out.add(EscalationAnswered(id=esc.id, answer=text, by=login), HumanActor(login=login))
    return out.events


# --- whole builds -----------------------------------------------------------

Ending = Literal["complete", "aborted", "failed", "parked", "steps"]


@dataclass
class Human:
    """Answers up to ``answers`` escalations, resumes what is paused, and before decision
    ``i`` makes the request ``controls[i]`` (if any)."""

    answers: int = 10
    controls: Sequence[Control | None] = ()
    login: str = "alice"
    answered: int = 0

    def control(self, step: int) -> Control | None:
        return self.controls[step] if step < len(self.controls) else None


@dataclass
class Trace:
    """A simulated build: its log, and each decision with the seq of the state it read."""

    events: list[Event]
    decisions: list[tuple[int, Decision]] = field(default_factory=list)
    ending: Ending = "steps"

    @property
    def state(self) -> BuildState:
        return fold(self.events)

    @property
    def kinds(self) -> list[str]:
        return [d.kind for _, d in self.decisions]


def fold(events: Sequence[Event], slug: str = SLUG) -> BuildState:
    state = initial_state(slug)
    for event in events:
        state = evolve(state, event)
    return state


def drive(
    config: Config | dict[str, Any] | None = None,
    agent: Agent | None = None,
    human: Human | None = None,
    max_steps: int = 500,
) -> Trace:
    """Run a build from ``build.created`` until it waits for good (or ``max_steps``)."""
    agent = agent or always()
    human = human or Human()
    first = created(config)
    trace = Trace(events=[first])
    state = evolve(initial_state(SLUG), first)
    for step in range(max_steps):
        control = human.control(step)
        events = request(state, control, human.login) if control else []
        for event in events:
            state = evolve(state, event)
        trace.events.extend(events)
        decision = decide(state)
        trace.decisions.append((state.seq, decision))
        if isinstance(decision, Wait):
            if decision.reason in ("complete", "aborted", "failed"):
                trace.ending = decision.reason
                return trace
            if decision.reason == "in-flight":
                events = attach(state)
            elif decision.reason == "paused":
                events = request(state, "resume", human.login)
            elif human.answered < human.answers:
                human.answered += 1
                events = answer(state, f"answer {human.answered}", human.login)
            else:
                trace.ending = "parked"
                return trace
        else:
            events = execute(state, decision, agent)
        for event in events:
            state = evolve(state, event)
        trace.events.extend(events)
    return trace


class Build:
    """A simulated build driven step by step, for table-driven tests."""

    def __init__(self, config: Config | dict[str, Any] | None = None) -> None:
        self.events: list[Event] = [created(config)]
        self.state = fold(self.events)

    def extend(self, events: Sequence[Event]) -> Build:
        for event in events:
            self.state = evolve(self.state, event)
            self.events.append(event)
        return self

    def add(self, *payloads: Any, actor: Actor | None = None) -> Build:
        """Append hand-made events (as someone other than the runner would)."""
        out = _Out(self.state)
        for payload in payloads:
            out.add(payload, actor)
        return self.extend(out.events)

    def decide(self) -> Decision:
        return decide(self.state)

    def step(self, act: Act | ActKind = "ok", kind: str | None = None) -> Decision:
        """Decide and carry the decision out; ``act`` is what the agent or command does."""
        decision = self.decide()
        if kind is not None:
            assert decision.kind == kind, f"expected {kind}, decided {decision}"
        self.extend(execute(self.state, decision, always(act)))
        return decision

    def steps(self, *acts: Act | ActKind) -> Build:
        for act in acts:
            self.step(act)
        return self

    def attach(self) -> Build:
        return self.extend(attach(self.state))

    def request(self, control: Control) -> Build:
        return self.extend(request(self.state, control))

    def answer(self, text: str) -> Build:
        return self.extend(answer(self.state, text))
