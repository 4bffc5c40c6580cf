"""Budgets in the kernel: tokens, cost and work time per build (DESIGN §4, issue 3).

A budget is hard: ``decide`` raises a policy escalation instead of starting a session
the remaining budget cannot cover (a running estimate from earlier sessions of the same
role). An answer allows as much again. Usage is booked per phase and per role; a model
with no price is reported, never priced at zero.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from scenario import BASE_TS, Build, drive, fake_sha, fold

from agentrun.config import Budget, Config, Pipeline, Policy, RuntimeConfig, VerifyStep
from agentrun.events import (
    Actor,
    AgentActor,
    AgentDone,
    CodeReviewStarted,
    CodeReviewVerdict,
    Event,
    ImplementCompleted,
    ImplementStarted,
    KernelActor,
    PhaseFailed,
    PlanReviewStarted,
    PlanReviewVerdict,
    PlanStarted,
    PlanSubmitted,
    RunnerAttached,
    SessionEnded,
    SessionStarted,
    Usage,
)
from agentrun.kernel.budget import FirstSession, how_to_price
from agentrun.kernel.decide import Publish, RaiseEscalation, RunCheck, RunPhase, Wait, decide
from agentrun.kernel.guard import before_first_session
from agentrun.kernel.state import ResumableSession, RoleUsage

TESTS = VerifyStep(name="tests", command="pytest -q")
# plan -> implement -> verify `tests`: a failing check starts the next implement round.
CHECKED = Config(
    pipeline=Pipeline(plan_review=False, code_review=False),
    verify=(TESTS,),
    # The same check fails round after round here: no stall question in between.
    policy=Policy(max_review_rounds=10, stall_rounds=10),
)
SIM_SESSION = 110  # tokens of each simulated session (100 in, 10 out)
CLOSING = (
    " Its work so far is on the build branch. Answer to allow as much again, or abort the build."
)
DEFAULTS = Config()


def budgeted(config: Config = DEFAULTS, **limits: Any) -> Config:
    return config.model_copy(update={"budget": Budget(**limits)})


def question(problem: str) -> str:
    return f"The build stopped at its budget: {problem}.{CLOSING}"


def escalation(b: Build) -> RaiseEscalation:
    decision = b.decide()
    assert isinstance(decision, RaiseEscalation), decision
    assert (decision.cause, decision.source) == ("budget", "policy")
    return decision


def publish_all(b: Build) -> None:
    """Carry out pending publications (the draft, pushes of new phase commits)."""
    while isinstance(b.decide(), Publish):
        b.step(kind="publish")


def fail_check(b: Build) -> None:
    """The verify command fails: the next implement round starts."""
    publish_all(b)
    b.step("revise", "run-check")
    publish_all(b)


# --- hand-made sessions with chosen usage ---------------------------------------


def at(b: Build, seconds: float, *payloads: Any, actor: Actor | None = None) -> Build:
    """Append events stamped ``seconds`` after the simulator's base time."""
    for payload in payloads:
        event = Event(
            seq=b.state.seq + 1,
            ts=BASE_TS + timedelta(seconds=seconds),
            actor=actor or KernelActor(),
            writer="test",
            payload=payload,
        )
        b.extend([event])
    return b


def session(
    b: Build,
    usage: Usage,
    model: str | None = "gpt-5",
    verdict: str = "approve",
    runtime_session_id: str | None = None,
    outcome: str = "ok",
    start: float | None = None,
    end: float | None = None,
) -> str:
    """Run the phase ``decide`` asks for as a runner would, with ``usage``; its session id."""
    work = b.decide()
    assert isinstance(work, RunPhase), work
    sid = f"s-{b.state.sessions + 1}"
    started = {
        "plan": PlanStarted(round=work.round),
        "plan-review": PlanReviewStarted(round=work.round),
        "implement": ImplementStarted(round=work.round),
        "code-review": CodeReviewStarted(round=work.round),
    }[work.phase]
    opened = SessionStarted(
        session=sid,
        role=work.role,
        runtime="agent",
        model=model,
        phase=work.phase,
        round=work.round,
    )
    t0 = b.state.seq + 100.0 if start is None else start
    t1 = t0 + 1 if end is None else end
    at(b, t0, started, opened)
    head = fake_sha(sid)
    if outcome != "ok":
        at(
            b,
            t1,
            SessionEnded(session=sid, outcome="failed", usage=usage, error="boom"),
            PhaseFailed(
                phase=work.phase, round=work.round, attempt=work.attempt, error="boom", session=sid
            ),
        )
        return sid
    report: Any
    if work.phase == "plan":
        report = PlanSubmitted(session=sid, plan="plan.md")
    elif work.phase == "implement":
        report = AgentDone(session=sid)
    else:
        model_ = PlanReviewVerdict if work.phase == "plan-review" else CodeReviewVerdict
        findings = ("handle the empty case",) if verdict == "revise" else ()
        report = model_(session=sid, round=work.round, verdict=verdict, findings=findings)
    at(b, t1, report, actor=AgentActor(role=work.role, session=sid))
    ended = SessionEnded(
        session=sid, outcome="ok", usage=usage, head=head, runtime_session_id=runtime_session_id
    )
    at(b, t1, ended)
    if work.phase == "implement":
        at(b, t1, ImplementCompleted(round=work.round, head=head, changed_paths=("src/app.py",)))
    return sid


def cost(usd: float, tokens: int = 1000) -> Usage:
    return Usage(tokens_in=tokens, tokens_out=0, cost_usd=usd)


# --- max_tokens ----------------------------------------------------------------------


def test_no_budget_no_escalation() -> None:
    trace = drive(CHECKED)
    assert trace.ending == "complete"
    assert not any(isinstance(d, RaiseEscalation) for _, d in trace.decisions)


def test_max_tokens_stops_before_a_session_its_estimate_would_take_over() -> None:
    b = Build(budgeted(CHECKED, max_tokens=300))
    b.step("ok", "run-phase")  # plan: 110
    b.step("ok", "run-phase")  # implement@1: 220
    fail_check(b)
    assert b.state.usage.tokens == 2 * SIM_SESSION
    assert b.state.role_usage["implement"] == RoleUsage(sessions=1, tokens=SIM_SESSION)

    # 220 spent + implement@1's 110 would make 330 > 300: implement@2 does not start.
    esc = escalation(b)
    assert (esc.phase, esc.round, esc.id) == ("implement", 2, "e1")
    assert esc.question == question(
        "it has used 220 tokens of its max_tokens budget of 300; "
        "the next implement session is estimated at 110"
    )
    b.step(kind="raise-escalation")
    assert b.decide() == Wait("parked")
    assert b.state.state_name == "parked"


def test_max_tokens_allows_a_session_that_exactly_fits() -> None:
    b = Build(budgeted(CHECKED, max_tokens=330))
    b.steps("ok", "ok")
    fail_check(b)
    work = b.decide()
    assert isinstance(work, RunPhase)
    assert (work.phase, work.round) == ("implement", 2)


def test_max_tokens_spent_parks_a_check_too() -> None:
    """Spent is spent: a build over its budget does not go on, even with a command."""
    b = Build(budgeted(CHECKED, max_tokens=200))
    b.steps("ok", "ok")  # plan, implement@1: 220 tokens
    publish_all(b)
    esc = escalation(b)
    assert (esc.phase, esc.round) == ("verify:tests", 1)
    assert esc.question == question("it has used 220 tokens of its max_tokens budget of 200")


def test_an_answer_allows_as_much_again() -> None:
    b = Build(budgeted(CHECKED, max_tokens=300))
    b.steps("ok", "ok")
    fail_check(b)
    b.step(kind="raise-escalation")
    b.answer("spend a little more")
    assert b.state.budget_grants == 1

    work = b.decide()
    assert isinstance(work, RunPhase)
    assert (work.phase, work.round) == ("implement", 2)
    # Now 600 in all: implement@2 (330), @3 (440), @4 (550); @5 would make 660.
    b.step("ok", "run-phase")
    fail_check(b)
    b.step("ok", "run-phase")
    fail_check(b)
    b.step("ok", "run-phase")
    fail_check(b)
    esc = escalation(b)
    assert (esc.phase, esc.round, esc.id) == ("implement", 5, "e2")
    assert esc.question == question(
        "it has used 550 tokens of its max_tokens budget of 600; "
        "the next implement session is estimated at 110"
    )


def test_decisions_replay_the_same() -> None:
    """The budget reads only the log: a replay of the same events decides the same."""
    b = Build(budgeted(CHECKED, max_tokens=300))
    b.steps("ok", "ok")
    fail_check(b)
    assert decide(fold(b.events)) == b.decide() == decide(fold(list(b.events)))


# --- max_cost_usd ----------------------------------------------------------------------


def test_max_cost_stops_once_spent() -> None:
    b = Build(budgeted(max_cost_usd=0.01))
    session(b, cost(0.006))  # plan
    assert isinstance(b.decide(), RunPhase)  # $0.006 spent, plan-review has no estimate yet
    session(b, cost(0.0065))  # plan-review approves: $0.0125 in all
    assert b.state.usage.cost_usd == 0.0125
    esc = escalation(b)
    assert (esc.phase, esc.round) == ("implement", 1)
    assert esc.question == question(
        "it has spent $0.0125 of its max_cost_usd budget of $0.01; "
        "the next implement session is estimated at $0.0000"
    )


def test_max_cost_stops_before_a_session_its_estimate_would_take_over() -> None:
    b = Build(budgeted(max_cost_usd=0.01))
    session(b, cost(0.006))  # plan@1
    session(b, cost(0.001), verdict="revise")  # plan-review@1 asks for a revision
    esc = escalation(b)  # $0.007 + plan@1's $0.006 > $0.01
    assert (esc.phase, esc.round) == ("plan", 2)
    assert esc.question == question(
        "it has spent $0.0070 of its max_cost_usd budget of $0.01; "
        "the next plan session is estimated at $0.0060"
    )


def test_the_estimate_is_the_mean_of_the_role_sessions() -> None:
    b = Build(budgeted(max_cost_usd=1.0))
    session(b, Usage(tokens_in=100, tokens_out=0, cost_usd=0.01))  # plan@1
    session(b, cost(0.0), verdict="revise")
    session(b, Usage(tokens_in=300, tokens_out=0, cost_usd=0.03))  # plan@2
    usage = b.state.role_usage["plan"]
    assert usage == RoleUsage(sessions=2, tokens=400, cost_usd=0.04, priced=2)
    assert usage.estimate_tokens() == 200
    assert usage.estimate_cost() == 0.02


def test_a_runtime_without_a_model_is_told_to_name_one() -> None:
    config = Config(runtimes={"agent": RuntimeConfig(kind="command", command=("agent",))})
    assert how_to_price(config, ("agent", "my-model")) == (
        'add [prices."my-model"]; set [runtimes.agent] model = "…" and price it'
    )


def test_unknown_price_asks_before_spending_more() -> None:
    b = Build(budgeted(max_cost_usd=0.01))
    session(b, Usage(tokens_in=500, tokens_out=50), model="my-model")
    assert b.state.unpriced_models == ("my-model",)
    assert b.state.usage.cost_usd is None  # unknown, not zero
    esc = escalation(b)
    assert (esc.phase, esc.round) == ("plan-review", 1)
    assert esc.question == question(
        "the price of my-model is unknown, so max_cost_usd ($0.01) cannot be kept: "
        'add [prices."my-model"] in .agentrun.toml'
    )
    b.step(kind="raise-escalation")
    b.answer("go on without a price")
    work = b.decide()
    assert isinstance(work, RunPhase)
    assert work.phase == "plan-review"


def test_unknown_price_without_a_cost_budget_goes_on() -> None:
    b = Build(budgeted(max_tokens=1_000_000))
    session(b, Usage(tokens_in=500, tokens_out=50), model="my-model")
    assert b.state.unpriced_models == ("my-model",)
    assert isinstance(b.decide(), RunPhase)


def test_a_session_without_tokens_is_not_unpriced() -> None:
    b = Build(budgeted(max_cost_usd=0.01))
    session(b, Usage(), model="my-model")
    assert b.state.unpriced_models == ()
    assert isinstance(b.decide(), RunPhase)


def test_a_model_less_runtime_is_reported_once() -> None:
    """A runtime with no model is named by the runtime, once, however many sessions it ran."""
    b = Build()
    b.steps("ok", "ok", "ok")  # plan, plan-review, implement: the simulator names no model
    assert b.state.unpriced_models == ("sim",)


# --- max_wall_minutes ----------------------------------------------------------------------


def test_work_time_counts_phases_not_the_waits_between_them() -> None:
    b = Build(budgeted(max_wall_minutes=2))
    session(b, cost(0.0), start=10, end=100)  # plan: 90 s
    assert b.state.active_seconds == 90.0
    assert isinstance(b.decide(), RunPhase)
    # A quarter of an hour passes (a human reads the plan, a runner waits for a lease).
    session(b, cost(0.0), start=1000, end=1030)  # plan-review: 30 s
    assert b.state.active_seconds == 120.0
    esc = escalation(b)
    assert (esc.phase, esc.round) == ("implement", 1)
    worked = "it has worked 2.00 minutes of its max_wall_minutes budget of 2 minutes"
    assert esc.question == question(worked)


def test_work_time_counts_failed_sessions() -> None:
    b = Build(budgeted(max_wall_minutes=1))
    session(b, cost(0.0), outcome="failed", start=0, end=61)
    assert b.state.active_seconds == 61.0
    esc = escalation(b)
    assert (esc.phase, esc.round) == ("plan", 1)


def test_a_dead_runner_s_downtime_is_not_work_time() -> None:
    """A runner dies mid-phase; one takes over a day later. The day was waiting, not work.

    ``evolve`` counts work time from a phase's start to the event that closes it; when a
    new runner closes a dead runner's phase, that event comes after all the downtime.
    """
    b = Build(budgeted(max_wall_minutes=60))
    at(
        b,
        10,
        PlanStarted(round=1),
        SessionStarted(session="s-1", role="plan", runtime="agent", phase="plan", round=1),
    )
    day = 24 * 3600
    at(
        b,
        day,
        RunnerAttached(instance="r2", host="h2", pid=2, resumed_from_seq=b.state.seq),
        SessionEnded(session="s-1", outcome="abandoned", error="a runner stopped"),
        PhaseFailed(
            phase="plan",
            round=1,
            attempt=1,
            error="interrupted: a runner stopped",
            session="s-1",
            interrupted=True,
        ),
    )
    assert b.state.active_seconds < 3600
    assert isinstance(b.decide(), RunPhase)


# --- booking usage ------------------------------------------------------------------------


def test_usage_is_booked_per_phase_and_per_role() -> None:
    config = Config(
        verify=(VerifyStep(name="security", agent="security-review"),),
    )
    state = drive(config).state
    one = Usage(tokens_in=100, tokens_out=10)
    assert state.phase_usage == {
        "plan": one,
        "plan-review": one,
        "implement": one,
        "code-review": one,
        "verify": one,  # verify:security, booked under its family
    }
    assert state.usage == Usage(tokens_in=500, tokens_out=50)
    assert set(state.role_usage) == {
        "plan",
        "plan-review",
        "implement",
        "code-review",
        "security-review",
    }
    assert state.role_usage["security-review"] == RoleUsage(sessions=1, tokens=SIM_SESSION)


def test_cost_adds_up_and_stays_known_when_some_is_unknown() -> None:
    b = Build()
    session(b, cost(0.01))
    session(b, Usage(tokens_in=10, tokens_out=0), model="my-model")
    assert b.state.usage.cost_usd == 0.01  # the known part; the unknown one is named
    assert b.state.unpriced_models == ("my-model",)
    assert b.state.phase_usage["plan"].cost_usd == 0.01
    assert b.state.phase_usage["plan-review"].cost_usd is None
    assert b.state.role_usage["plan-review"] == RoleUsage(sessions=1, tokens=10, priced=0)


def test_producers_remember_their_session_reviewers_do_not() -> None:
    b = Build()
    at(b, 1, RunnerAttached(instance="r1", host="box", pid=1, resumed_from_seq=1))
    session(b, cost(0.0), runtime_session_id="rt-plan-1")
    session(b, cost(0.0), runtime_session_id="rt-review-1", verdict="revise")
    session(b, cost(0.0), runtime_session_id="rt-plan-2")
    assert b.state.resumable == {
        "plan": ResumableSession(runtime="agent", id="rt-plan-2", host="box"),
    }
    session(b, cost(0.0), runtime_session_id="rt-review-2")  # approves
    session(b, cost(0.0), runtime_session_id="rt-impl-1")
    assert b.state.resumable["implement"] == ResumableSession(
        runtime="agent", id="rt-impl-1", host="box"
    )
    assert "plan-review" not in b.state.resumable
    assert "code-review" not in b.state.resumable


def test_a_failed_producer_session_is_not_continued() -> None:
    b = Build(Config(policy=Policy(max_phase_attempts=3)))
    at(b, 1, RunnerAttached(instance="r1", host="box", pid=1, resumed_from_seq=1))
    session(b, cost(0.0), runtime_session_id="rt-1", outcome="failed")
    assert b.state.resumable == {}
    assert isinstance(b.decide(), RunPhase)


def test_a_check_is_not_budgeted_as_a_session() -> None:
    """A verify command spends no tokens: under budget it runs even with a costly estimate."""
    b = Build(budgeted(CHECKED, max_cost_usd=0.01))
    session(b, cost(0.004))  # plan
    session(b, cost(0.004))  # implement@1
    publish_all(b)
    assert isinstance(b.decide(), RunCheck)


# --- a role's first session ------------------------------------------------------------


def test_a_first_session_is_estimated_at_its_prompt_and_one_answer() -> None:
    """The runner rendered the prompt (4,000 bytes: about 1,000 tokens); one answer is
    capped at 500. 1,500 do not fit 1,200: the build parks before the session, with the
    question ``decide`` would have raised."""
    b = Build(budgeted(CHECKED, max_tokens=1_200))
    work = b.decide()
    assert isinstance(work, RunPhase) and work.phase == "plan"  # decide alone sees 0
    first = FirstSession(prompt_bytes=4_000, output_cap=500)
    esc = before_first_session(b.state, work, first)
    assert isinstance(esc, RaiseEscalation)
    assert (esc.cause, esc.phase, esc.round, esc.id) == ("budget", "plan", 1, "e1")
    assert esc.question == question(
        "it has used 0 tokens of its max_tokens budget of 1,200; the next plan session is "
        "estimated at 1,500 (its prompt (about 1,000) and one response of 500)"
    )
    assert before_first_session(b.state, work, replace(first, output_cap=200)) is None


def test_a_later_session_keeps_its_roles_average() -> None:
    """Once the role has run, its average is the estimate, whatever the prompt."""
    huge = FirstSession(prompt_bytes=40_000, output_cap=8_192)
    b = Build(budgeted(CHECKED, max_tokens=400))
    b.step("ok", "run-phase")  # plan: 110
    first = b.decide()
    assert isinstance(first, RunPhase) and first.phase == "implement"
    assert isinstance(before_first_session(b.state, first, huge), RaiseEscalation)
    b.step("ok", "run-phase")  # implement@1: 220 in all
    fail_check(b)
    again = b.decide()
    assert isinstance(again, RunPhase) and (again.phase, again.round) == ("implement", 2)
    assert before_first_session(b.state, again, huge) is None  # 220 + 110 fits 400


def test_a_first_session_is_priced_for_max_cost() -> None:
    """gpt-5: $1.25 in, $10 out a million: 1,000 in and 1,000 out cost $0.01125."""
    first = FirstSession(prompt_bytes=4_000, output_cap=1_000, model="gpt-5")
    b = Build(budgeted(CHECKED, max_cost_usd=0.01))
    work = b.decide()
    assert isinstance(work, RunPhase)
    esc = before_first_session(b.state, work, first)
    assert isinstance(esc, RaiseEscalation)
    assert "the next plan session is estimated at $0.011" in esc.question
    assert "(its prompt (about 1,000) and one response of 1,000)" in esc.question
    ok = Build(budgeted(CHECKED, max_cost_usd=0.02))
    assert before_first_session(ok.state, work, first) is None
