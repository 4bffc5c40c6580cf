"""Builds for kernel tests, run by the shipped kernel functions.

``execute(state, decision, agent)`` returns the events the runner appends to carry out
``decision``: every one is made by the kernel's own functions (``kernel.runner``,
``kernel.sessions``, ``kernel.checks``, ``kernel.verbs``, ``kernel.requests``), the ones
the runner, the agent verbs and the CLI call. What stands in for the world is a test
parameter only: an ``Agent`` maps the ``Job`` at hand to an ``Act`` (what the agent or
the check command did), and session ids, commit shas and timestamps are derived from the
log, so the same inputs give the same events. No I/O, no clock.

``drive`` runs a whole build with it (and a ``Human`` who answers, pauses, resumes and
aborts), recording every decision made along the way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from agentrun.config import Config
from agentrun.errors import AgentrunError
from agentrun.events import (
    Actor,
    BuildAbortRequested,
    BuildCreated,
    Event,
    HumanActor,
    KernelActor,
    Usage,
)
from agentrun.kernel import checks, requests, sessions
from agentrun.kernel import runner as kernel_runner
from agentrun.kernel.decide import (
    Decision,
    Publish,
    Recorded,
    RunAgentVerify,
    RunCheck,
    RunFinalizeStep,
    RunPhase,
    Wait,
    decide,
)
from agentrun.kernel.draft import Draft
from agentrun.kernel.evolve import evolve
from agentrun.kernel.sessions import NO_TERMINAL, Turn
from agentrun.kernel.state import BuildState, initial_state
from agentrun.kernel.verbs import AgentEnv, VerbReport, check_fits, verb_draft

__all__ = ["NO_TERMINAL"]

BASE_TS = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
WRITER = "sim"
SLUG = "b-sim"
GOAL = "Fix the login redirect"
BASE_SHA = "b" * 40
KERNEL = KernelActor()
INSTANCE, HOST = "sim", "sim-host"
RUNNER = "sim@sim-host"  # what RunnerAttached makes of INSTANCE on HOST
ALICE = HumanActor(login="alice")

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
    return envelope(1, payload, ALICE)


class _Out:
    """Events appended after ``state``, numbered on from its seq; ``now`` folds them in."""

    def __init__(self, state: BuildState) -> None:
        self.start = state
        self.now = state
        self.events: list[Event] = []

    def add(self, *drafts: Draft) -> None:
        for draft in drafts:
            event = envelope(self.now.seq + 1, draft.payload, draft.actor)
            self.events.append(event)
            self.now = evolve(self.now, event)

    def head(self) -> str:
        """The phase commit the event about to be appended records."""
        return fake_sha(f"{self.now.slug}:{self.now.seq + 1}")


# --- the runner, through the kernel's functions ------------------------------------


def execute(state: BuildState, decision: Decision, agent: Agent | None = None) -> list[Event]:
    """The events the runner appends to carry out ``decision`` from ``state``."""
    agent = agent or always()
    out = _Out(state)
    if isinstance(decision, Recorded):
        out.add(*kernel_runner.made(state, decision, INSTANCE))
    elif isinstance(decision, RunPhase | RunAgentVerify):
        work = sessions.job_of(decision, state.impl_round)
        _session(out, work, agent(Job(work.phase, work.round, work.attempt)))
    elif isinstance(decision, RunCheck):
        job = Job(f"verify:{decision.step}", decision.round, decision.attempt, decision.command)
        _check(out, decision, agent(job))
    elif isinstance(decision, RunFinalizeStep):
        work = sessions.job_of(decision, state.impl_round)
        if decision.give_up:
            out.add(*checks.given_up(decision))
        elif decision.command is None:
            _session(out, work, agent(Job(work.phase, work.round, work.attempt)))
        else:
            job = Job(work.phase, work.round, work.attempt, decision.command)
            _finalize_command(out, decision, agent(job))
    elif isinstance(decision, Publish):
        url = f"refs/agentrun/pulls/1 ({SLUG})"
        out.add(kernel_runner.published(state, decision, "local", 1, url))
    else:
        assert isinstance(decision, Wait), decision
    return out.events


def attach(state: BuildState) -> list[Event]:
    """A new runner takes the build over: it closes what a dead runner left open."""
    out = _Out(state)
    out.add(*kernel_runner.attached(state, INSTANCE, HOST, 1))
    return out.events


def _abort_requested(out: _Out) -> None:
    out.add(Draft(BuildAbortRequested(reason="stop"), ALICE))


def _session(out: _Out, job: sessions.Job, act: Act) -> None:
    """One agent session, recorded as ``runner/sessions.py`` records it."""
    if act.kind == "setup-failed":
        out.add(kernel_runner.setup_failed(act.text or "could not prepare the worktree"))
        return
    if act.kind == "no-runtime":
        out.add(*sessions.no_runtime(job))
        return
    session = f"s-{out.now.sessions + 1:04d}"
    out.add(sessions.begun(job))
    rung = job.work.rung if isinstance(job.work, RunPhase) else None
    runtime = "sim" if rung is None else out.now.config.runtimes_for(job.role, rung)[0]
    out.add(sessions.session_started(job, session, runtime, None, None, rung))
    if act.kind == "crash":
        return
    if act.kind == "interrupt":
        out.add(*sessions.interrupted(job, session, "Ctrl-C"))
        return
    turn = Turn(
        session, sessions.transcript_name(session), usage=Usage(tokens_in=100, tokens_out=10)
    )
    if act.kind == "abort":
        _abort_requested(out)
        out.add(*sessions.aborted(turn))
        return
    if act.kind in ("fail", "permanent", "timeout", "no-report"):
        error = {
            "fail": act.text or "the runtime failed",
            "permanent": act.text or "the model does not exist",
            "timeout": act.text or "the session ran past its budget",
            "no-report": NO_TERMINAL,
        }[act.kind]
        attempts = out.now.config.policy.max_phase_attempts
        cause = "timeout" if act.kind == "timeout" else ""
        permanent = act.kind == "permanent"
        out.add(*sessions.session_failed(job, turn, error, permanent, cause, attempts))
        return
    env = AgentEnv(out.now.slug, job.phase, job.round, session)
    report = _verb(job, act)
    check_fits(out.now, env, report.verb)  # the kernel only asks for what a verb can say
    draft, _ = verb_draft(out.now, env, report, scrub=lambda text: text)
    out.add(draft)
    if act.kind == "crash-after-report":
        return
    said = out.now.session.report if out.now.session else None
    assert said is not None
    head = out.head() if sessions.commits(said) else None
    changed = act.paths if job.phase == "implement" else ()
    out.add(*sessions.succeeded(job, turn, said, head, changed))


def _verb(job: sessions.Job, act: Act) -> VerbReport:
    """What the agent says with its verb: the test's ``act`` in the verb's terms."""
    if act.kind == "escalate":
        return VerbReport("escalate", act.text or "Which database should this use?")
    family = job.phase.split(":", 1)[0]
    revise = act.kind == "revise"
    if family == "plan":
        return VerbReport("plan", act.text or "plan")
    if family in ("plan-review", "code-review"):
        if revise:
            return VerbReport("revise", findings=(act.text or "handle the empty case",))
        return VerbReport("approve")
    if family == "verify":
        if revise:
            return VerbReport("fail", act.text or "the change breaks login")
        return VerbReport("pass")
    return VerbReport("done", act.text)


def _output(act: Act) -> str:
    return act.text or "FAILED tests/test_login.py::test_redirect"


def _command_ran(act: Act) -> tuple[int, str]:
    code = 0 if act.kind == "ok" else 1
    return code, f"exit {code}"


def _cut_short(out: _Out, phase: str, round_: int, attempt: int, act: Act) -> bool:
    """Whether the command never finished (a crash, Ctrl-C or an abort), recorded so."""
    if act.kind in ("crash", "crash-after-report"):
        return True
    if act.kind in ("interrupt", "abort"):
        if act.kind == "abort":
            _abort_requested(out)
        why = "cancelled" if act.kind == "abort" else "Ctrl-C"
        out.add(checks.cut_short(phase, round_, attempt, why))
        return True
    return False


def _check(out: _Out, work: RunCheck, act: Act) -> None:
    """A verify command, recorded as ``runner/checks.py`` records it."""
    if act.kind == "setup-failed":
        out.add(kernel_runner.setup_failed(act.text or "could not prepare the worktree"))
        return
    out.add(checks.check_started(work))
    if _cut_short(out, f"verify:{work.step}", work.round, work.attempt, act):
        return
    code, status = _command_ran(act)
    output = "" if code == 0 else _output(act)
    out.add(checks.check_completed(work, code, status, output, output.encode(), out.head()))


def _finalize_command(out: _Out, work: RunFinalizeStep, act: Act) -> None:
    """A finalize command, recorded as ``runner/checks.py`` records it."""
    if act.kind == "setup-failed":
        out.add(kernel_runner.setup_failed(act.text or "could not prepare the worktree"))
        return
    out.add(checks.finalize_started(work))
    if _cut_short(out, f"finalize:{work.step}", out.now.impl_round, work.attempt, act):
        return
    code, status = _command_ran(act)
    if code == 0:
        out.add(*checks.finalize_ended(work, out.head(), "", b""))
    else:
        out.add(*checks.finalize_ended(work, None, f"`{work.command}` {status}", b""))


# --- people, through the kernel's requests ------------------------------------------

Control = Literal["pause", "resume", "abort"]
_REQUESTS = {"pause": requests.pause, "resume": requests.resume, "abort": requests.abort}


def request(state: BuildState, control: Control, login: str = "alice") -> list[Event]:
    """A person's ``git agentrun pause|resume|abort``: what it appends (maybe nothing)."""
    out = _Out(state)
    try:
        payload = _REQUESTS[control](state)
    except AgentrunError:
        return []  # refused in one line, nothing appended
    if payload is not None:
        out.add(Draft(payload, HumanActor(login=login)))
    return out.events


def answer(state: BuildState, text: str, login: str = "alice") -> list[Event]:
    """A person answers the open escalation (``git agentrun answer SLUG TEXT``)."""
    out = _Out(state)
    out.add(Draft(requests.answer(state, text, None, login), HumanActor(login=login)))
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
            out.add(Draft(payload, actor or KERNEL))
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
