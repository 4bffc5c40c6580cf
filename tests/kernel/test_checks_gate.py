"""The forge's CI as a gate before ready (``[forge] require_checks``, ``kernel.gate``).

A simulated build reaches the end of its pipeline; ``checks.seen`` events are what a
runner would record of the forge's checks; each test states the decision made of them.
"""

from __future__ import annotations

from typing import Any

from scenario import Build
from test_decide import CONFIG, to_finalize

from agentrun.config import Config
from agentrun.events import ChecksSeen, SeenCheck
from agentrun.kernel.decide import AwaitChecks, Publish, RaiseEscalation, RunPhase, Wait
from agentrun.kernel.gate import ANY_CHECK, question

# ts(seq) in the simulator is one second per event: 0.05 minutes is three events.
TIMEOUT = 0.05


def gated(require: Any = ("test", "lint"), minutes: float = TIMEOUT) -> Config:
    forge = CONFIG.forge.model_copy(
        update={"require_checks": require, "checks_timeout_minutes": minutes}
    )
    return CONFIG.model_copy(update={"forge": forge})


def at_the_gate(config: Config) -> Build:
    b = to_finalize(Build(config))
    b.step("ok", "run-finalize-step")
    b.step(kind="publish")  # the finalize commit is pushed: the head is on the forge
    return b


def passed(name: str) -> SeenCheck:
    return SeenCheck(name=name, state="success", conclusion="success")


def pending(name: str) -> SeenCheck:
    return SeenCheck(name=name, state="pending", conclusion="in_progress")


def failed(name: str) -> SeenCheck:
    return SeenCheck(
        name=name,
        state="failure",
        conclusion="failure",
        summary="2 tests failed",
        log_tail="FAILED tests/test_login.py::test_redirect",
        url="https://github.com/o/r/actions/runs/1/job/2",
    )


def test_without_the_gate_the_proposal_is_marked_ready() -> None:
    assert at_the_gate(CONFIG).decide() == Publish("mark-ready")


def test_the_gate_looks_at_the_head_first_then_waits() -> None:
    b = at_the_gate(gated())
    head = b.state.head
    assert b.decide() == AwaitChecks(sha=head, deadline=None)
    assert b.state.state_name == "running"  # not looked at yet
    b.add(ChecksSeen(sha=head, checks=(pending("test"),)))
    since = b.state.checks_gate.since if b.state.checks_gate else None
    assert since is not None
    # lint has not appeared: the look says until when it may.
    assert b.decide() == AwaitChecks(sha=head, deadline=since + gate_timeout())
    assert b.state.state_name == "waiting"
    b.add(ChecksSeen(sha=head, checks=(pending("lint"), pending("test"))))
    assert b.decide() == AwaitChecks(sha=head, deadline=None)  # all there: no time limit
    assert b.state.checks_gate is not None and b.state.checks_gate.since == since


def gate_timeout() -> Any:
    from datetime import timedelta

    return timedelta(minutes=TIMEOUT)


def test_all_required_checks_green_mark_ready_then_complete() -> None:
    b = at_the_gate(gated())
    head = b.state.head
    # Checks the gate does not require do not hold it up.
    b.add(ChecksSeen(sha=head, checks=(passed("lint"), passed("test"), pending("deploy"))))
    assert b.decide() == Publish("mark-ready")
    b.step(kind="publish")
    b.step(kind="complete")
    assert b.state.status == "complete"


def test_a_failing_check_is_the_next_implement_rounds_feedback() -> None:
    b = at_the_gate(gated())
    head = b.state.head
    b.add(ChecksSeen(sha=head, checks=(failed("test"), pending("lint"))))
    decision = b.decide()
    assert isinstance(decision, RunPhase)
    assert (decision.phase, decision.round) == ("implement", 2)
    (feedback,) = decision.feedback
    assert feedback.startswith(f"CI check `test` failed (failure) on {head[:10]} after round 1.")
    assert "2 tests failed" in feedback
    assert "The end of its log:\nFAILED tests/test_login.py::test_redirect" in feedback
    assert b.state.state_name == "running"
    # The new round goes through review and verify again, then waits on its new head.
    b.step("ok", "run-phase")  # implement@2
    b.step(kind="publish")
    b.step("ok", "run-phase")  # code-review@2
    b.step(kind="publish")
    b.step("ok", "run-check")
    b.step(kind="publish")
    b.step("ok", "run-finalize-step")
    b.step(kind="publish")
    assert b.state.head != head
    assert b.decide() == AwaitChecks(sha=b.state.head, deadline=None)


def test_failing_checks_count_toward_the_round_limit() -> None:
    policy = CONFIG.policy.model_copy(update={"max_review_rounds": 1})
    b = at_the_gate(gated().model_copy(update={"policy": policy}))
    b.add(ChecksSeen(sha=b.state.head, checks=(failed("test"), passed("lint"))))
    decision = b.decide()
    assert isinstance(decision, RaiseEscalation) and decision.cause == "round-limit"
    assert "CI check `test` failed" in decision.question


def test_checks_of_an_older_head_change_nothing() -> None:
    b = at_the_gate(gated())
    b.add(ChecksSeen(sha="0" * 40, checks=(failed("test"), failed("lint"))))
    assert b.decide() == AwaitChecks(sha=b.state.head, deadline=None)
    assert b.state.impl_round == 1


def test_a_check_that_never_appears_asks_after_the_timeout_and_an_answer_rearms() -> None:
    b = at_the_gate(gated())
    head = b.state.head
    seen = ChecksSeen(sha=head, checks=(passed("test"),))
    b.add(seen)  # the wait begins
    b.add(seen, seen)
    assert isinstance(b.decide(), AwaitChecks)  # two seconds later: not yet
    b.add(seen)  # the runner records the same again once the deadline has passed
    decision = b.decide()
    assert isinstance(decision, RaiseEscalation)
    assert (decision.cause, decision.phase) == ("checks-timeout", "checks")
    assert "lint did not appear" in decision.question
    assert "GitHub App" in decision.question
    b.step(kind="raise-escalation")
    assert b.decide() == Wait("parked")
    assert b.state.state_name == "parked"
    b.answer("I renamed the workflow's job to lint")
    assert b.decide() == AwaitChecks(sha=head, deadline=None)  # the wait begins again
    b.add(ChecksSeen(sha=head, checks=(passed("lint"), passed("test"))))
    assert b.decide() == Publish("mark-ready")


def test_all_waits_for_any_check_then_every_check_seen() -> None:
    b = at_the_gate(gated("all", minutes=60))
    head = b.state.head
    b.add(ChecksSeen(sha=head, checks=()))
    decision = b.decide()
    assert isinstance(decision, AwaitChecks) and decision.deadline is not None
    assert question(b.state, gate_verdict(b)).startswith(f"The required check(s) {ANY_CHECK}")
    b.add(ChecksSeen(sha=head, checks=(passed("build"), pending("docs"))))
    assert b.decide() == AwaitChecks(sha=head, deadline=None)
    b.add(ChecksSeen(sha=head, checks=(passed("build"), passed("docs"))))
    assert b.decide() == Publish("mark-ready")


def gate_verdict(b: Build) -> Any:
    from agentrun.kernel.gate import judge

    assert b.state.checks_gate is not None
    return judge(b.state.config, b.state.checks_gate.checks)
