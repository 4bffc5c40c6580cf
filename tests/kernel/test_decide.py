"""``decide``: one row per decision the kernel makes and per rule (DESIGN §3, §4, §5, §12).

Each row drives a simulated build (``scenario.Build``: the events a runner, an agent and a
person would append) to a point and states the exact decision expected there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from scenario import NO_TERMINAL, Act, Build

from agentrun.config import Config, FinalizeStep, Pipeline, Policy, VerifyStep
from agentrun.events import (
    AgentActor,
    BuildFailed,
    EscalationRaised,
    PhaseFailed,
    PlanStarted,
    PlanSubmitted,
    RunnerSetupFailed,
    SessionEnded,
    SessionStarted,
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
)
from agentrun.kernel.state import FEEDBACK_TAIL

TESTS = VerifyStep(name="tests", command="pytest -q")
NOTES = FinalizeStep(name="notes", command="make notes")
CONFIG = Config(
    policy=Policy(max_phase_attempts=2, max_review_rounds=3), verify=(TESTS,), finalize=(NOTES,)
)
LIMIT2 = CONFIG.model_copy(update={"policy": Policy(max_review_rounds=2)})
LIMIT1 = CONFIG.model_copy(update={"policy": Policy(max_review_rounds=1)})
SRC_ONLY = Config(verify=(VerifyStep(name="tests", command="pytest -q", paths=("src/**",)),))
AGENT_VERIFY = Config(verify=(VerifyStep(name="security", agent="security-review"),))
FINALIZE_AGENT = Config(
    finalize=(
        FinalizeStep(name="changelog", agent="docs"),
        FinalizeStep(name="notes", command="make notes"),
    )
)
NO_PLAN_REVIEW = CONFIG.model_copy(update={"pipeline": Pipeline(plan_review=False)})
NO_CODE_REVIEW = CONFIG.model_copy(update={"pipeline": Pipeline(code_review=False)})
BARE = Config(pipeline=Pipeline(plan_review=False, code_review=False))

FINDING = "handle the empty case"  # a reviewer's default finding in the simulator
QUESTION = "Which database should this use?"  # an agent's default question
OUTPUT = "FAILED tests/test_login.py::test_redirect"  # a failing check's default output
VERIFY_FEEDBACK = f"Verify step `tests` failed in round 1:\n`pytest -q` exit 1:\n{OUTPUT}"


def plan(round_: int = 1, attempt: int = 1, feedback: tuple[str, ...] = ()) -> RunPhase:
    return RunPhase("plan", round_, attempt, "plan", feedback)


def plan_review(round_: int = 1, attempt: int = 1, feedback: tuple[str, ...] = ()) -> RunPhase:
    return RunPhase("plan-review", round_, attempt, "plan-review", feedback)


def implement(round_: int = 1, attempt: int = 1, feedback: tuple[str, ...] = ()) -> RunPhase:
    return RunPhase("implement", round_, attempt, "implement", feedback)


def code_review(round_: int = 1, attempt: int = 1, feedback: tuple[str, ...] = ()) -> RunPhase:
    return RunPhase("code-review", round_, attempt, "code-review", feedback)


def attempts_question(key: str, failures: int, error: str) -> str:
    return (
        f"{key} failed {failures} times; last error: {error} -- answer to try again"
        " (with any guidance), or abort the build."
    )


NO_RUNTIME = (
    "no runtime is configured for role 'plan': set roles.plan or roles.default in "
    ".agentrun.toml (`git agentrun init` writes an example)"
)


def permanent_question(key: str, error: str) -> str:
    return (
        f"{key} failed with an error that retrying will not fix: {error}"
        " -- answer once it is fixed (or with guidance), or abort the build."
    )


def limit_question(phase: str, limit: int, feedback: str) -> str:
    return (
        f"{phase} reached its limit of {limit} rounds without approval. Latest feedback: "
        f"{feedback} -- answer to allow more rounds, with any guidance, or abort the build."
    )


def answered(esc: str, question: str, text: str) -> str:
    return f"Answer to {esc} ({question}): {text}"


# --- walking a build to a point ---------------------------------------------


def to_implement(b: Build) -> Build:
    b.step("ok", "run-phase")  # plan
    b.step("ok", "run-phase")  # plan-review approves
    return b


def to_code_review(b: Build) -> Build:
    to_implement(b)
    b.step("ok", "run-phase")  # implement
    b.step(kind="publish")  # open the draft
    return b


def to_verify(b: Build) -> Build:
    to_code_review(b)
    b.step("ok", "run-phase")  # code-review approves
    b.step(kind="publish")  # push the review's phase commit
    return b


def to_finalize(b: Build) -> Build:
    to_verify(b)
    b.step("ok", "run-check")
    b.step(kind="publish")
    return b


def crashes(b: Build, times: int) -> Build:
    """The runner dies mid-step ``times`` times; each time a new one takes over."""
    for _ in range(times):
        b.steps("crash").attach()
    return b


def to_verify_changing(b: Build, *paths: str) -> Build:
    to_implement(b)
    b.step(Act(paths=paths), "run-phase")
    b.step(kind="publish")
    b.step("ok", "run-phase")
    b.step(kind="publish")
    return b


def revise_code(b: Build) -> Build:
    """A code-review ``revise``, then the push of its phase commit."""
    b.step("revise", "run-phase")
    b.step(kind="publish")
    return b


def implement_again(b: Build) -> Build:
    b.step("ok", "run-phase")  # implement@N+1
    b.step(kind="publish")  # push it to the open proposal
    return b


def hand_made_session(b: Build) -> Build:
    """A plan phase whose session ``s-1`` is open (events as a runner appends them)."""
    return b.add(
        PlanStarted(round=1),
        SessionStarted(session="s-1", role="plan", runtime="sim", phase="plan", round=1),
    )


def close_without_report(b: Build) -> Build:
    """The runner's closing facts for a session that did not report."""
    return b.add(
        SessionEnded(session="s-1", outcome="ok"),
        PhaseFailed(phase="plan", round=1, attempt=1, error=NO_TERMINAL, session="s-1"),
    )


@dataclass(frozen=True)
class Case:
    name: str
    given: Callable[[Build], object]
    expected: Decision
    config: Config = CONFIG


# --- the default pipeline, one row per decision -------------------------------

HAPPY: list[Decision] = [
    plan(),
    plan_review(),
    implement(),
    Publish("open-draft"),
    code_review(),
    Publish("push"),  # the review's (empty) phase commit
    RunCheck("tests", "pytest -q", 1, 1),
    Publish("push"),  # the check's phase commit
    RunFinalizeStep("notes", "make notes", None, 1, last=True),
    Publish("push"),
    Publish("mark-ready"),  # ready for review comes last
    Complete(),
    Wait("complete"),
]


@pytest.mark.parametrize("index", range(len(HAPPY)), ids=[d.kind for d in HAPPY])
def test_default_pipeline(index: int) -> None:
    b = Build(CONFIG)
    for expected in HAPPY[:index]:
        assert b.step("ok") == expected
    assert b.decide() == HAPPY[index]


# --- rules ------------------------------------------------------------------

CASES = [
    # plan <-> plan-review
    Case(
        "plan-review revise starts the next plan round with the findings",
        lambda b: b.steps("ok", Act("revise", "split the migration")),
        plan(2, feedback=("split the migration",)),
    ),
    Case(
        "the next plan round is reviewed afresh",
        lambda b: b.steps("ok", "revise", "ok"),
        plan_review(2),
    ),
    Case(
        "plan-review approve starts implement@1",
        lambda b: b.steps("ok", "revise", "ok", "ok"),
        implement(1),
    ),
    # implement <-> code-review
    Case(
        "code-review revise pushes its phase commit first",
        lambda b: to_code_review(b).step("revise"),
        Publish("push"),
    ),
    Case(
        "code-review revise starts implement@N+1 with the findings",
        lambda b: revise_code(to_code_review(b)),
        implement(2, feedback=(FINDING,)),
    ),
    Case(
        "implement@2 is pushed to the open proposal",
        lambda b: revise_code(to_code_review(b)).step("ok"),
        Publish("push"),
    ),
    Case(
        "implement@2 is reviewed in code-review@2",
        lambda b: implement_again(revise_code(to_code_review(b))),
        code_review(2),
    ),
    Case(
        "every verify step runs again in the new round",
        lambda b: implement_again(revise_code(to_code_review(b))).steps("ok", "ok"),
        RunCheck("tests", "pytest -q", 2, 1),
    ),
    # verify
    Case(
        "a failed check pushes its phase commit first",
        lambda b: to_verify(b).step("fail"),
        Publish("push"),
    ),
    Case(
        "a failed check starts implement@N+1 with the output tail",
        lambda b: to_verify(b).steps("fail", "ok"),
        implement(2, feedback=(VERIFY_FEEDBACK,)),
    ),
    Case(
        "a step whose paths match no changed path is skipped",
        lambda b: to_verify_changing(b, "docs/guide.md"),
        SkipVerify("tests", 1, "no changed path matches its `paths`"),
        SRC_ONLY,
    ),
    Case(
        "a step whose paths match a changed path runs",
        lambda b: to_verify_changing(b, "docs/guide.md", "src/login.py"),
        RunCheck("tests", "pytest -q", 1, 1),
        SRC_ONLY,
    ),
    Case(
        "after a skipped step the build goes on",
        lambda b: to_verify_changing(b, "docs/guide.md").step(),
        Publish("mark-ready"),
        SRC_ONLY,
    ),
    Case(
        "an agent verify step runs a session",
        to_verify,
        RunAgentVerify("security", "security-review", 1, 1, ()),
        AGENT_VERIFY,
    ),
    Case(
        "an agent verify fail starts implement@N+1 with its reason",
        lambda b: to_verify(b).steps("revise", "ok"),
        implement(
            2, feedback=("Verify step `security` failed in round 1:\nthe change breaks login",)
        ),
        AGENT_VERIFY,
    ),
    # finalize
    Case(
        "a failed finalize step is tolerated",
        lambda b: to_finalize(b).step("fail"),
        Publish("mark-ready"),
    ),
    Case(
        "a build with a failed finalize step completes",
        lambda b: to_finalize(b).steps("fail", "ok"),
        Complete(),
    ),
    Case(
        "a finalize step re-runs after a crash",
        lambda b: to_finalize(b).steps("crash").attach(),
        RunFinalizeStep("notes", "make notes", None, 2, last=True),
    ),
    Case(
        "a finalize step that keeps being cut short is given up",
        lambda b: crashes(to_finalize(b), 4),
        RunFinalizeStep("notes", "make notes", None, 5, last=True, give_up=True),
    ),
    Case(
        "a given-up finalize step does not stop the build",
        lambda b: crashes(to_finalize(b), 4).steps("ok"),
        Publish("mark-ready"),
    ),
    Case(
        "Ctrl-C on a finalize step is not given up at once",
        lambda b: to_finalize(b).steps("interrupt", "interrupt"),
        RunFinalizeStep("notes", "make notes", None, 3, last=True),
    ),
    Case(
        "an agent finalize step runs a session, not the last",
        lambda b: to_code_review(b).steps("ok", "ok"),
        RunFinalizeStep("changelog", None, "docs", 1, last=False),
        FINALIZE_AGENT,
    ),
    Case(
        "the last finalize step says so",
        lambda b: to_code_review(b).steps("ok", "ok", "ok", "ok"),
        RunFinalizeStep("notes", "make notes", None, 1, last=True),
        FINALIZE_AGENT,
    ),
    # pipeline switches
    Case(
        "without plan review, a plan goes to implement",
        lambda b: b.steps("ok"),
        implement(1),
        NO_PLAN_REVIEW,
    ),
    Case(
        "without code review, an implement goes to verify",
        lambda b: to_implement(b).steps("ok", "ok"),
        RunCheck("tests", "pytest -q", 1, 1),
        NO_CODE_REVIEW,
    ),
    Case(
        "a bare pipeline opens the draft after implement",
        lambda b: b.steps("ok", "ok"),
        Publish("open-draft"),
        BARE,
    ),
    Case(
        "a bare pipeline marks the draft ready",
        lambda b: b.steps("ok", "ok", "ok"),
        Publish("mark-ready"),
        BARE,
    ),
    Case("a bare pipeline completes", lambda b: b.steps("ok", "ok", "ok", "ok"), Complete(), BARE),
    # the retry guard
    Case("a failed phase retries", lambda b: to_implement(b).step("fail"), implement(1, attempt=2)),
    Case(
        "attempts exhausted escalate by policy",
        lambda b: to_implement(b).steps("fail", "fail"),
        RaiseEscalation(
            "e1",
            "implement",
            1,
            "attempts",
            attempts_question("implement@1", 2, "the runtime failed"),
        ),
    ),
    Case(
        "a turn without a report is a failed attempt",
        lambda b: to_implement(b).steps("no-report", "timeout"),
        RaiseEscalation(
            "e1",
            "implement",
            1,
            "attempts",
            attempts_question("implement@1", 2, "the session ran past its budget"),
        ),
    ),
    Case(
        "a permanent failure escalates at once",
        lambda b: to_implement(b).step("permanent"),
        RaiseEscalation(
            "e1",
            "implement",
            1,
            "permanent-failure",
            permanent_question("implement@1", "the model does not exist"),
        ),
    ),
    Case(
        "a role without a runtime is a permanent failure",
        lambda b: b.step("no-runtime"),
        RaiseEscalation(
            "e1",
            "plan",
            1,
            "permanent-failure",
            permanent_question("plan@1", NO_RUNTIME),
        ),
    ),
    Case(
        "a check cut short too often asks a human",
        lambda b: crashes(to_verify(b), 4),
        RaiseEscalation(
            "e1",
            "verify:tests",
            1,
            "interrupted",
            "verify:tests@1 was cut short 4 times (Ctrl-C or a runner that stopped); last: "
            "interrupted: sim@sim-host stopped before verify:tests@1 finished -- answer to try "
            "again, or abort.",
        ),
    ),
    Case(
        "a check re-runs after a crash with the next attempt",
        lambda b: to_verify(b).steps("crash").attach(),
        RunCheck("tests", "pytest -q", 1, 2),
    ),
    Case(
        "Ctrl-C on a check re-runs it as the next attempt",
        lambda b: to_verify(b).steps("interrupt"),
        RunCheck("tests", "pytest -q", 1, 2),
    ),
    Case(
        "a policy escalation parks the build",
        lambda b: to_implement(b).steps("fail", "fail", "ok"),
        Wait("parked"),
    ),
    Case(
        "an answer re-arms the attempts, its text as feedback",
        lambda b: to_implement(b).steps("fail", "fail", "ok").answer("use the v2 API"),
        implement(
            1,
            feedback=(
                answered(
                    "e1",
                    attempts_question("implement@1", 2, "the runtime failed"),
                    "use the v2 API",
                ),
            ),
        ),
    ),
    Case(
        "an answer re-arms a permanent failure",
        lambda b: b.steps("no-runtime", "ok").answer("configured now"),
        plan(
            feedback=(
                answered(
                    "e1",
                    permanent_question("plan@1", NO_RUNTIME),
                    "configured now",
                ),
            )
        ),
    ),
    Case(
        "a crashed run is re-run as the next attempt",
        lambda b: b.steps("crash").attach(),
        plan(attempt=2),
    ),
    Case(
        "an interrupted attempt does not use up the budget",
        lambda b: b.steps("interrupt", "interrupt"),
        plan(attempt=3),
    ),
    # round limits
    Case(
        "code-review rounds stop at the limit",
        lambda b: revise_code(implement_again(revise_code(to_code_review(b)))),
        RaiseEscalation(
            "e1", "implement", 3, "round-limit", limit_question("implement", 2, FINDING)
        ),
        LIMIT2,
    ),
    Case(
        "an answer allows more implement rounds",
        lambda b: (
            revise_code(implement_again(revise_code(to_code_review(b))))
            .steps("ok")
            .answer("one more")
        ),
        implement(
            3,
            feedback=(
                FINDING,
                answered("e1", limit_question("implement", 2, FINDING), "one more"),
            ),
        ),
        LIMIT2,
    ),
    Case(
        "plan rounds stop at the limit",
        lambda b: b.steps("ok", "revise", "ok", "revise"),
        RaiseEscalation("e1", "plan", 3, "round-limit", limit_question("plan", 2, FINDING)),
        LIMIT2,
    ),
    Case(
        "an answer allows more plan rounds",
        lambda b: b.steps("ok", "revise", "ok", "revise", "ok").answer("narrow it"),
        plan(
            3, feedback=(FINDING, answered("e1", limit_question("plan", 2, FINDING), "narrow it"))
        ),
        LIMIT2,
    ),
    Case(
        "verify failures count toward the round limit",
        lambda b: to_verify(b).steps("fail", "ok"),
        RaiseEscalation(
            "e1",
            "implement",
            2,
            "round-limit",
            limit_question("implement", 1, " ".join(VERIFY_FEEDBACK.split())),
        ),
        LIMIT1,
    ),
    # agent escalations
    Case(
        "an agent escalation parks the build",
        lambda b: to_implement(b).step("escalate"),
        Wait("parked"),
    ),
    Case(
        "an answered agent escalation re-runs the same phase as its next attempt",
        lambda b: to_implement(b).steps("escalate").answer("postgres"),
        implement(1, attempt=2, feedback=(answered("e1", QUESTION, "postgres"),)),
    ),
    Case(
        "a plan-review escalation re-runs plan-review",
        lambda b: b.steps("ok", "escalate").answer("yes"),
        plan_review(attempt=2, feedback=(answered("e1", QUESTION, "yes"),)),
    ),
    Case(
        "a code-review escalation re-runs code-review",
        lambda b: to_code_review(b).steps("escalate").answer("keep it"),
        code_review(attempt=2, feedback=(answered("e1", QUESTION, "keep it"),)),
    ),
    Case(
        "an agent verify escalation re-runs the step",
        lambda b: to_verify(b).steps("escalate").answer("fine"),
        RunAgentVerify("security", "security-review", 1, 2, (answered("e1", QUESTION, "fine"),)),
        AGENT_VERIFY,
    ),
    Case(
        "escalation ids count up",
        lambda b: to_implement(b).steps("escalate").answer("postgres").steps("fail", "fail"),
        RaiseEscalation(
            "e2",
            "implement",
            1,
            "attempts",
            attempts_question("implement@1", 2, "the runtime failed"),
        ),
    ),
    # controls
    Case("a pause request is acknowledged", lambda b: b.request("pause"), Acknowledge("pause")),
    Case("a paused build waits", lambda b: b.request("pause").step(), Wait("paused")),
    Case(
        "a resume request is acknowledged",
        lambda b: b.request("pause").steps("ok").request("resume"),
        Acknowledge("resume"),
    ),
    Case(
        "a resumed build goes on",
        lambda b: b.request("pause").steps("ok").request("resume").steps("ok"),
        plan(),
    ),
    Case(
        "resume cancels a pause not yet acknowledged",
        lambda b: b.request("pause").request("resume"),
        plan(),
    ),
    Case(
        "a pause request while parked is acknowledged",
        lambda b: to_implement(b).steps("escalate").request("pause"),
        Acknowledge("pause"),
    ),
    Case("an abort request is acknowledged", lambda b: b.request("abort"), Acknowledge("abort")),
    Case(
        "abort while parked",
        lambda b: to_implement(b).steps("escalate").request("abort"),
        Acknowledge("abort"),
    ),
    Case(
        "abort while paused",
        lambda b: b.request("pause").steps("ok").request("abort"),
        Acknowledge("abort"),
    ),
    Case("abort during a session", lambda b: to_implement(b).step("abort"), Acknowledge("abort")),
    Case("abort during a check", lambda b: to_verify(b).step("abort"), Acknowledge("abort")),
    Case(
        "abort while a phase is in flight",
        lambda b: b.steps("crash").request("abort"),
        Acknowledge("abort"),
    ),
    Case("an aborted build waits", lambda b: b.request("abort").step(), Wait("aborted")),
    Case(
        "an aborted build stays aborted",
        lambda b: b.request("abort").steps("ok").request("resume"),
        Wait("aborted"),
    ),
    Case("a failed build waits", lambda b: b.add(BuildFailed(reason="gave up")), Wait("failed")),
    # in flight
    Case("an open session waits", lambda b: b.step("crash"), Wait("in-flight")),
    Case(
        "a reported but open session waits",
        lambda b: b.step("crash-after-report"),
        Wait("in-flight"),
    ),
    Case(
        "a started phase without a session waits",
        lambda b: b.add(PlanStarted(round=1)),
        Wait("in-flight"),
    ),
    Case("a running check waits", lambda b: to_verify(b).step("crash"), Wait("in-flight")),
    Case(
        "a running finalize step waits", lambda b: to_finalize(b).step("crash"), Wait("in-flight")
    ),
    # the runner's own setup
    Case(
        "a permanent setup failure fails the build",
        lambda b: b.add(RunnerSetupFailed(error="disk full", permanent=True)),
        Fail("the runner could not set up the build: disk full"),
    ),
    Case(
        "repeated setup failures fail the build",
        lambda b: b.steps("setup-failed", "setup-failed"),
        Fail("the runner could not set up the build: could not prepare the worktree"),
    ),
    Case("one setup failure is retried", lambda b: b.step("setup-failed"), plan()),
    # reports
    Case(
        "a report from a session that is not the open one is ignored",
        lambda b: close_without_report(
            hand_made_session(b).add(
                PlanSubmitted(session="s-stale", plan="plan-r1.md"),
                actor=AgentActor(role="plan", session="s-stale"),
            )
        ),
        plan(attempt=2),
    ),
    Case(
        "an escalation from a session that is not the open one does not park",
        lambda b: close_without_report(
            hand_made_session(b).add(
                EscalationRaised(
                    id="e1",
                    phase="plan",
                    round=1,
                    source="agent",
                    cause="agent",
                    question="?",
                    session="s-stale",
                ),
                actor=AgentActor(role="plan", session="s-stale"),
            )
        ),
        plan(attempt=2),
    ),
    Case(
        "a session that ended badly discards its report",
        lambda b: (
            hand_made_session(b)
            .add(
                PlanSubmitted(session="s-1", plan="plan-r1.md"),
                actor=AgentActor(role="plan", session="s-1"),
            )
            .add(
                SessionEnded(session="s-1", outcome="failed", error="boom"),
                PhaseFailed(phase="plan", round=1, attempt=1, error="boom", session="s-1"),
            )
        ),
        plan(attempt=2),
    ),
    Case(
        "a report after its session ended is ignored",
        lambda b: (
            hand_made_session(b)
            .add(
                SessionEnded(session="s-1", outcome="failed", error="boom"),
                PhaseFailed(phase="plan", round=1, attempt=1, error="boom", session="s-1"),
            )
            .add(
                PlanSubmitted(session="s-1", plan="plan-r1.md"),
                actor=AgentActor(role="plan", session="s-1"),
            )
        ),
        plan(attempt=2),
    ),
    Case(
        "an abandoned session's escalation does not park",
        lambda b: (
            hand_made_session(b)
            .add(
                EscalationRaised(
                    id="e1",
                    phase="plan",
                    round=1,
                    source="agent",
                    cause="agent",
                    question="?",
                    session="s-1",
                ),
                actor=AgentActor(role="plan", session="s-1"),
            )
            .attach()
        ),
        plan(attempt=2),
    ),
    Case(
        "an abandoned session discards its verdict",
        lambda b: b.steps("ok", "crash-after-report").attach(),
        plan_review(attempt=2),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule(case: Case) -> None:
    b = Build(case.config)
    case.given(b)
    assert b.decide() == case.expected


def test_case_names_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


# --- what the decisions rest on ---------------------------------------------


def test_a_failed_check_feeds_back_the_tail_of_its_output_and_resets_results() -> None:
    output = "x" * 5000 + "\nAssertionError: the last line"
    b = to_verify(Build(CONFIG))
    b.step(Act("fail", output))
    feedback = b.state.feedback
    assert len(feedback) == 1
    header, _, tail = feedback[0].partition("\n")
    assert header == "Verify step `tests` failed in round 1:"
    assert len(tail) == FEEDBACK_TAIL
    assert tail.endswith("AssertionError: the last line")
    assert b.state.verify_results == {}
    assert (b.state.stage, b.state.impl_round) == ("implement", 2)


def test_a_failed_finalize_step_is_recorded_as_an_observation() -> None:
    b = to_finalize(Build(CONFIG))
    b.steps("fail", "ok", "ok")
    assert b.state.status == "complete"
    assert b.state.finalize_results == {"notes": False}
    assert b.state.observations == ("finalize:notes: `make notes` exit 1",)


def test_a_given_up_finalize_step_says_why() -> None:
    b = to_finalize(Build(CONFIG))
    crashes(b, 4).steps("ok")
    assert b.state.observations == (
        "finalize:notes: gave up: the step kept being cut short (Ctrl-C or a runner that stopped)",
    )


def test_a_discarded_report_leaves_no_trace() -> None:
    b = hand_made_session(Build(CONFIG))
    b.add(
        PlanSubmitted(session="s-1", plan="plan-r1.md"),
        actor=AgentActor(role="plan", session="s-1"),
    )
    b.add(SessionEnded(session="s-1", outcome="abandoned"))
    assert b.state.plan is None
    assert b.state.session is None
    assert b.state.stage == "plan"


def test_an_agent_escalation_is_opened_only_when_its_session_ends_well() -> None:
    b = to_implement(Build(CONFIG))
    b.step("crash-after-report")
    escalate = Build(CONFIG)
    to_implement(escalate).step("escalate")
    assert [e.id for e in escalate.state.open_escalations] == ["e1"]
    assert escalate.state.in_flight is None
    assert b.state.open_escalations == ()


def test_the_kernel_never_decides_twice_from_one_state() -> None:
    b = Build(CONFIG)
    to_finalize(b)
    assert b.decide() == b.decide()
