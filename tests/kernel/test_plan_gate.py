"""The human plan gate (``[policy] plan_approval = "human"``): after plan review approves,
or after the plan when plan review is off, the build parks until a person approves it or
sends it back with what to change."""

from __future__ import annotations

import json

import pytest
from scenario import ALICE, Act, Build

from agentrun.agent.context import render_context
from agentrun.config import Config, Pipeline, Policy
from agentrun.errors import EscalationError
from agentrun.events import PlanApproved
from agentrun.kernel import approval, requests
from agentrun.kernel.decide import RaiseEscalation, RunPhase, Wait
from agentrun.kernel.requests import NotRunningError
from agentrun.kernel.verbs import AgentEnv

GATED = Config(policy=Policy(plan_approval="human", max_review_rounds=2))
GATED_NO_REVIEW = GATED.model_copy(update={"pipeline": Pipeline(plan_review=False)})
CHANGE = "Split the change in two commits."


def asked(round_: int = 1, id_: str = "e1") -> RaiseEscalation:
    """The plan's question, as the kernel raises it (the runner quotes the plan's text)."""
    question = approval.question("b-sim", round_, f"plan-r{round_}.md", None)
    return RaiseEscalation(id_, "plan", round_, "plan-approval", question)


def approve(b: Build, login: str = "alice") -> Build:
    """``git agentrun approve SLUG``: what it appends."""
    return b.add(requests.approve(b.state, login), actor=ALICE)


def implement(feedback: tuple[str, ...] = ()) -> RunPhase:
    return RunPhase("implement", 1, 1, "implement", feedback)


def test_off_by_default_an_approved_plan_goes_on_to_implement() -> None:
    assert Policy().plan_approval == "agent"
    b = Build(Config(policy=Policy(max_review_rounds=2))).steps("ok", "ok")
    assert b.decide() == implement()
    assert b.state.escalations == ()


def test_on_the_build_parks_after_plan_review_approves() -> None:
    b = Build(GATED).steps("ok")  # the plan
    assert b.decide() == RunPhase("plan-review", 1, 1, "plan-review", ())
    b.step("ok")  # plan review approves
    assert (b.state.stage, b.state.phase_label) == ("plan-approval", "plan-approval@1")
    assert b.decide() == asked()

    b.step(kind="raise-escalation")

    assert b.decide() == Wait("parked")
    assert b.state.state_name == "parked"
    assert approval.waiting(b.state) is not None
    assert not b.state.implemented


def test_without_plan_review_the_build_parks_after_the_plan() -> None:
    b = Build(GATED_NO_REVIEW).steps("ok")
    assert b.decide() == asked()


def test_a_revised_plan_is_reviewed_again_before_it_reaches_a_person() -> None:
    b = Build(GATED).steps("ok", "revise")
    assert b.decide() == RunPhase("plan", 2, 1, "plan", ("handle the empty case",))


def test_approve_goes_on_to_implement() -> None:
    b = Build(GATED).steps("ok", "ok", "ok")  # plan, plan review, the question

    approve(b)

    assert b.events[-1].payload == PlanApproved(id="e1", by="alice")
    assert b.decide() == implement()  # no feedback: the plan is approved as it is
    (esc,) = b.state.escalations
    assert (esc.answer, esc.by, esc.is_open) == ("approved", "alice", False)
    while b.decide() != Wait("complete"):  # on to the end, as without the gate
        b.step()
    assert b.state.status == "complete" and b.state.impl_round == 1


def test_an_approved_plan_with_a_task_graph_goes_on_to_its_tasks() -> None:
    graph = [{"id": "alpha", "goal": "write alpha"}, {"id": "beta", "goal": "write beta"}]
    plan = f"# Plan\n\n```agentrun-tasks\n{json.dumps(graph)}\n```\n"
    b = Build(GATED_NO_REVIEW).steps(Act("ok", plan))
    b.step(kind="raise-escalation")
    assert b.state.tasks == {}  # nothing of the graph runs before a person approves

    approve(b)

    assert b.state.stage == "tasks"
    assert list(b.state.tasks) == ["alpha", "beta"]
    assert b.decide().kind == "run-tasks"  # then as any graph runs (tests/kernel/test_tasks.py)


def test_an_answer_sends_the_plan_back_with_the_text_as_feedback() -> None:
    b = Build(GATED).steps("ok", "ok", "ok")

    b.answer(CHANGE)

    feedback = (f"A person read plan round 1 and asked for changes:\n{CHANGE}",)
    assert b.decide() == RunPhase("plan", 2, 1, "plan", feedback)
    assert b.state.plan_round == 2
    b.steps("ok", "ok")  # the second plan, and its review
    assert b.decide() == asked(round_=2, id_="e2")


def test_rounds_sent_back_by_a_person_count_toward_the_plan_round_limit() -> None:
    b = Build(GATED).steps("ok", "ok", "ok")  # max_review_rounds = 2
    b.answer("more detail")
    b.steps("ok", "ok", "ok")  # round 2: plan, review, question
    b.answer("still more")

    decision = b.decide()

    assert isinstance(decision, RaiseEscalation)
    assert (decision.cause, decision.phase, decision.round) == ("round-limit", "plan", 3)
    assert "plan reached its limit of 2 rounds" in decision.question
    assert "still more" in decision.question  # the latest feedback


def test_approve_is_refused_when_no_plan_waits() -> None:
    b = Build(GATED)
    with pytest.raises(EscalationError, match=r"^build b-sim has no plan waiting for approval$"):
        requests.approve(b.state, "alice")
    b.steps("ok", "ok", "ok")
    approve(b)
    with pytest.raises(EscalationError, match=r"has no plan waiting for approval$"):
        requests.approve(b.state, "alice")  # approved already


def test_a_build_parked_on_another_question_is_not_approvable() -> None:
    b = Build(GATED).steps("escalate")  # the plan agent asks a question
    assert b.decide() == Wait("parked")
    with pytest.raises(
        EscalationError,
        match=r"^build b-sim has no plan waiting for approval: it waits on e1, which `answer`",
    ):
        requests.approve(b.state, "alice")


def test_approve_is_refused_on_a_finished_build() -> None:
    b = Build(GATED).steps("ok", "ok", "ok").request("abort")
    b.step()  # the abort is acknowledged
    with pytest.raises(
        NotRunningError, match=r"^build b-sim is aborted; there is nothing to approve$"
    ):
        requests.approve(b.state, "alice")


def test_a_hand_written_approval_of_another_question_changes_nothing() -> None:
    b = Build(GATED).steps("escalate")
    before = b.state
    b.add(PlanApproved(id="e1", by="mallory"), actor=ALICE)
    assert b.state.escalations == before.escalations
    assert b.state.stage == before.stage


def test_the_question_quotes_the_plan_and_both_replies() -> None:
    decision = approval.quoting(asked(), "b-sim", "plan-r1.md", "1. Add src/app.py.\n")
    text = decision.question
    assert text == (
        "Plan round 1 waits for a person's approval before any code is written.\n\n"
        "---\n\n1. Add src/app.py.\n\n---\n\n"
        "Reply `/agentrun approve` to go on, or `/agentrun answer <what to change>` to send "
        "the plan back for another round (locally: `git agentrun approve b-sim` or "
        '`git agentrun answer b-sim "…"`).'
    )
    long = approval.quoting(asked(), "b-sim", "plan-r1.md", "x" * 10_000).question
    assert "x" * approval.PLAN_LIMIT in long and "x" * (approval.PLAN_LIMIT + 1) not in long
    assert "(the whole plan: `git agentrun show b-sim --artifact plan-r1.md`)" in long
    fenced = approval.quoting(asked(), "b-sim", "plan-r1.md", "Run:\n````sh\nmake\n```\n")
    assert "````sh\nmake\n```\n````\n\n---\n\nReply" in fenced.question  # closed
    other = RaiseEscalation("e1", "implement", 1, "stall", "why?")
    assert approval.quoting(other, "b-sim", "plan-r1.md", "plan") is other


def test_later_prompts_are_the_same_as_without_the_gate() -> None:
    """The approved question holds the whole plan: it is not repeated in later prompts."""
    env = AgentEnv("b-sim", "implement", 1, "s-0003")
    plain = Build(Config(policy=Policy(max_review_rounds=2))).steps("ok", "ok")
    gated = approve(Build(GATED).steps("ok", "ok", "ok"))
    assert gated.decide() == plain.decide() == implement()

    text = render_context(gated.state, env, "1. Add src/app.py.")

    assert text == render_context(plain.state, env, "1. Add src/app.py.")
    assert "## Approved plan" in text and "Answers from people" not in text


def test_the_plan_sent_back_is_shown_as_the_plan_with_the_change_asked() -> None:
    b = Build(GATED).steps("ok", "ok", "ok").answer(CHANGE)
    text = render_context(b.state, AgentEnv("b-sim", "plan", 2, "s-0004"), "1. Add src/app.py.")
    assert "## Plan\n\n1. Add src/app.py." in text and "Approved plan" not in text
    asked = f"- A person read plan round 1 and asked for changes:\n{CHANGE}"
    assert f"## Feedback for this round\n\n{asked}" in text
    assert "Answers from people" not in text  # the change is the feedback, once
