"""Builds that change nothing park (unless allowed); a reconcile request re-opens a build."""

from __future__ import annotations

import pytest
from scenario import BASE_SHA, GOAL, Act, Build, envelope, fold

from agentrun.config import Config, Pipeline, VerifyStep
from agentrun.events import (
    BuildCreated,
    BuildReconcileRequested,
    HumanActor,
    ReconcileCompleted,
    ReconcileStarted,
)
from agentrun.kernel.decide import Complete, Publish, RaiseEscalation, RunCheck, RunPhase, Wait

CONFIG = Config(
    pipeline=Pipeline(plan_review=False), verify=(VerifyStep(name="tests", command="pytest -q"),)
)
EMPTY = Act(paths=())
NEW_BASE = "c" * 40


def allowed(config: Config) -> Build:
    """A build created with ``allow_empty`` (as ``run --allow-empty`` records it)."""
    b = Build(config)
    payload = BuildCreated(
        goal=GOAL,
        base_ref="main",
        base_sha=BASE_SHA,
        branch="agentrun/b-sim",
        config=config.model_dump(mode="json"),
        allow_empty=True,
    )
    b.events = [envelope(1, payload, HumanActor(login="alice"))]
    b.state = fold(b.events)
    return b


def test_an_implement_that_changed_nothing_parks_with_a_question() -> None:
    b = Build(CONFIG).steps("ok")  # plan
    assert b.step(EMPTY, "run-phase") == RunPhase("implement", 1, 1, "implement", ())
    decision = b.decide()
    assert isinstance(decision, RaiseEscalation)
    assert (decision.phase, decision.round, decision.cause) == ("implement", 1, "empty")
    assert decision.question.startswith(
        f"implement@1 ended with no change against the base (main {BASE_SHA[:10]})"
    )
    b.step()
    assert b.decide() == Wait("parked")
    assert b.state.proposal is None  # nothing was proposed


def test_an_answer_lets_the_empty_build_go_on_as_if_allowed() -> None:
    b = Build(CONFIG).steps("ok", EMPTY, "ok").answer("fine, nothing to change")
    assert b.state.allow_empty
    assert b.decide() == Publish("open-draft")
    b.steps("ok", "ok", "ok")  # open, code-review, push
    assert b.decide() == RunCheck("tests", "pytest -q", 1, 1)


def test_allow_empty_recorded_at_creation_never_asks() -> None:
    b = allowed(CONFIG).steps("ok", EMPTY)
    assert b.decide() == Publish("open-draft")


def complete(config: Config = CONFIG) -> Build:
    b = Build(config)
    for _ in range(40):
        if b.decide() == Wait("complete"):
            return b
        b.step()
    raise AssertionError("the build did not complete")


def test_a_reconcile_request_reopens_a_complete_build_and_drafts_its_proposal() -> None:
    b = complete()
    assert b.state.proposal is not None and b.state.proposal.ready
    b.add(BuildReconcileRequested(base_sha=NEW_BASE), actor=HumanActor(login="alice"))
    assert b.state.status == "running"
    assert b.state.proposal is not None and not b.state.proposal.ready
    decision = b.decide()
    assert decision == RunPhase(
        "reconcile", b.state.impl_round, 1, "reconcile", b.state.feedback, merge=NEW_BASE
    )


def test_after_the_reconcile_verification_runs_again_then_ready() -> None:
    b = complete()
    b.add(BuildReconcileRequested(base_sha=NEW_BASE), actor=HumanActor(login="alice"))
    round_ = b.state.impl_round
    b.add(
        ReconcileStarted(round=round_, base_sha=NEW_BASE),
        ReconcileCompleted(round=round_, base_sha=NEW_BASE, head="d" * 40),
    )
    assert b.state.base_sha == NEW_BASE
    assert b.decide() == Publish("push")
    b.step()
    assert b.decide() == RunCheck("tests", "pytest -q", round_, 1)
    b.steps("ok", "ok")  # the check and its push
    assert b.decide() == Publish("mark-ready")
    b.step()
    assert b.decide() == Complete()


@pytest.mark.parametrize("when", ["running", "closed"])
def test_a_reconcile_request_changes_nothing_unless_complete_with_an_open_proposal(
    when: str,
) -> None:
    if when == "running":
        b = Build(CONFIG).steps("ok", "ok")
    else:
        from agentrun.events import ProposalClosed

        b = complete()
        assert b.state.proposal is not None
        b.add(ProposalClosed(number=b.state.proposal.number, merged=False))
    before = b.state
    b.add(BuildReconcileRequested(base_sha=NEW_BASE), actor=HumanActor(login="alice"))
    assert b.state.model_copy(update={"seq": before.seq, "updated_at": before.updated_at}) == before
