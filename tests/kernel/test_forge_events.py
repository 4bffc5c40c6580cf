"""Forge-driven events in the kernel: review feedback, retry, cursors, base moves (§5, §12)."""

from __future__ import annotations

from scenario import Build
from test_decide import CONFIG, to_code_review, to_finalize

from agentrun.events import (
    BaseMoved,
    BuildFailed,
    BuildRetryRequested,
    EscalationRaised,
    FeedbackReceived,
    ForgeCursor,
    HumanActor,
    PhaseFailed,
    ProposalClosed,
)
from agentrun.kernel.decide import Complete, Publish, RunCheck, RunPhase, Wait

REVIEW = FeedbackReceived(forge="github", number=7, review=42, author="bob", text="Rename it.")
BOB = HumanActor(login="bob")


def complete(b: Build) -> Build:
    to_finalize(b)
    b.step("ok", "run-finalize-step")
    b.step(kind="publish")  # push the finalize commit
    b.step(kind="publish")  # mark ready
    b.step(kind="complete")
    assert b.state.status == "complete"
    return b


def test_review_feedback_reopens_a_complete_build_as_the_next_implement_round() -> None:
    b = complete(Build(CONFIG))
    b.add(REVIEW, actor=BOB)
    assert (b.state.status, b.state.stage, b.state.impl_round) == ("running", "implement", 2)
    decision = b.decide()
    assert isinstance(decision, RunPhase)
    assert (decision.phase, decision.round) == ("implement", 2)
    assert decision.feedback == ("Review 42 by bob on #7:\nRename it.",)
    assert b.state.forge_review == 42


def test_the_reopened_build_checks_again_and_completes_without_a_second_ready() -> None:
    b = complete(Build(CONFIG))
    b.add(REVIEW, actor=BOB)
    b.step("ok", "run-phase")  # implement@2
    b.step(kind="publish")  # push
    b.step("ok", "run-phase")  # code-review@2
    b.step(kind="publish")
    assert isinstance(b.decide(), RunCheck)
    b.step("ok", "run-check")
    b.step(kind="publish")
    b.step("ok", "run-finalize-step")
    b.step(kind="publish")
    assert b.decide() == Complete()  # the proposal is already ready for review


def test_feedback_waits_for_the_phase_in_flight() -> None:
    b = to_code_review(Build(CONFIG))
    b.steps("crash")  # a code-review session is open (its runner died)
    b.add(REVIEW, actor=BOB)
    assert b.state.stage == "code-review"
    assert b.state.pending_feedback
    b.attach()  # the next runner closes the dead session: now the review takes effect
    assert (b.state.stage, b.state.impl_round) == ("implement", 2)
    assert b.state.pending_feedback == ()


def test_feedback_on_a_closed_proposal_changes_nothing() -> None:
    b = complete(Build(CONFIG))
    number = b.state.proposal.number if b.state.proposal else 0
    b.add(ProposalClosed(number=number, merged=True))
    b.add(REVIEW, actor=BOB)
    assert b.state.status == "complete"
    assert b.decide() == Wait("complete")


def test_a_forge_cursor_only_moves_forward() -> None:
    b = Build(CONFIG)
    b.add(ForgeCursor(forge="github", comment=10, review=3))
    b.add(ForgeCursor(forge="github", comment=4, review=9))
    assert (b.state.forge_comment, b.state.forge_review) == (10, 9)


def test_retry_reopens_a_failed_build() -> None:
    b = Build(CONFIG)
    b.add(BuildFailed(reason="the runner could not set up the build"))
    assert b.decide() == Wait("failed")
    b.add(BuildRetryRequested(reason="fixed the disk"), actor=BOB)
    assert b.state.status == "running"
    decision = b.decide()
    assert isinstance(decision, RunPhase) and decision.phase == "plan"


def test_retry_rearms_a_phase_out_of_attempts_and_closes_its_question() -> None:
    b = Build(CONFIG)
    b.steps("fail", "fail")
    b.step(kind="raise-escalation")
    assert b.decide() == Wait("parked")
    b.add(BuildRetryRequested(), actor=BOB)
    assert b.state.open_escalations == ()
    assert b.state.escalations[0].by == "bob"
    decision = b.decide()
    assert isinstance(decision, RunPhase)
    assert (decision.phase, decision.attempt) == ("plan", 1)


def test_a_conflicting_base_runs_reconcile_then_verify_again() -> None:
    b = to_finalize(Build(CONFIG))
    b.step("ok", "run-finalize-step")
    b.step(kind="publish")
    assert b.decide() == Publish("mark-ready")
    b.add(BaseMoved(base_sha="c" * 40, conflicts=("src/app.py",)))
    decision = b.decide()
    assert isinstance(decision, RunPhase)
    assert (decision.phase, decision.round, decision.merge) == ("reconcile", 1, "c" * 40)
    b.step("ok", "run-phase")
    assert b.state.base_sha == "c" * 40
    assert b.state.verify_results == {}
    assert b.decide() == Publish("push")
    b.step(kind="publish")
    assert isinstance(b.decide(), RunCheck)


def test_a_failing_reconcile_retries_then_asks() -> None:
    b = to_finalize(Build(CONFIG))
    b.step("ok", "run-finalize-step")
    b.step(kind="publish")
    b.add(BaseMoved(base_sha="c" * 40, conflicts=("src/app.py",)))
    b.steps("fail", "fail")
    failures = [e.payload for e in b.events if isinstance(e.payload, PhaseFailed)]
    assert [f.phase for f in failures] == ["reconcile", "reconcile"]
    b.step(kind="raise-escalation")
    raised = b.events[-1].payload
    assert isinstance(raised, EscalationRaised) and raised.phase == "reconcile"


def test_a_base_move_before_implementation_is_ignored() -> None:
    b = Build(CONFIG)
    b.add(BaseMoved(base_sha="c" * 40))
    assert b.state.stage == "plan"
    assert b.state.reconcile_base is None
