"""A plan's task graph in the kernel: parsing, each task's view, the frontier, the queue.

Builds are folded from events made the way the runner and the verbs make them; the
decisions are the shipped ``decide`` / ``decide_task``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentrun import events as ev
from agentrun.config import Config, Ladder
from agentrun.kernel.decide import (
    Acknowledge,
    Climb,
    Integrate,
    Publish,
    RaiseEscalation,
    RunPhase,
    RunTasks,
    StartTask,
    Wait,
    decide,
    decide_task,
)
from agentrun.kernel.evolve import evolve
from agentrun.kernel.graph import GraphError, parse
from agentrun.kernel.state import BuildState, initial_state
from agentrun.kernel.tasks import view
from agentrun.kernel.verbs import AgentEnv, VerbReport, check_fits, verb_draft
from agentrun.snapshot import snapshot

BASE = "b" * 40
TS = datetime(2026, 1, 1, tzinfo=UTC)


def fence(doc: object) -> str:
    return f"# Plan\n\nIn parts.\n\n```agentrun-tasks\n{json.dumps(doc)}\n```\n"


GRAPH = [
    {"id": "alpha", "goal": "write alpha"},
    {"id": "beta", "goal": "write beta", "paths": ["beta/**"]},
    {"id": "gamma", "goal": "write gamma", "deps": ["alpha"]},
]


class Log:
    """A build folded event by event, as the store would append them."""

    def __init__(self, config: Config | None = None) -> None:
        self.state: BuildState = initial_state("b")
        self.n = 0
        created = ev.BuildCreated(
            goal="three parts",
            base_ref="main",
            base_sha=BASE,
            branch="agentrun/b",
            config=snapshot(config or Config()),
        )
        self.add(created)

    def add(self, payload: Any, task: str | None = None, actor: Any = None) -> BuildState:
        self.n += 1
        event = ev.Event(
            seq=self.state.seq + 1,
            ts=TS + timedelta(seconds=self.n),
            actor=actor or ev.KernelActor(),
            writer="t",
            payload=payload,
            task=task,
        )
        self.state = evolve(self.state, event)
        return self.state

    def session(
        self,
        phase: str,
        round_: int,
        report: Any,
        task: str | None = None,
        tokens: int = 100,
        head: str | None = None,
    ) -> None:
        """One session of ``phase`` that reports ``report`` (a payload made for it)."""
        sid = f"s-{self.n}"
        role = phase.split(":")[0]
        self.add(
            ev.SessionStarted(session=sid, role=role, runtime="x", phase=phase, round=round_),
            task,
        )
        self.add(report(sid), task, ev.AgentActor(role=role, session=sid))
        used = ev.Usage(tokens_in=tokens, cost_usd=0.0)
        self.add(ev.SessionEnded(session=sid, outcome="ok", usage=used, head=head), task)

    def planned(self, text: str, review: bool = True) -> None:
        env = AgentEnv("b", "plan", self.state.plan_round, "pending")
        self.add(ev.PlanStarted(round=self.state.plan_round))
        draft, _ = verb_draft(self.state, env, VerbReport("plan", text), lambda t: t)
        sub = draft.payload
        assert isinstance(sub, ev.PlanSubmitted)
        self.session("plan", self.state.plan_round, lambda s: sub.model_copy(update={"session": s}))
        if review and self.state.stage == "plan-review":
            self.add(ev.PlanReviewStarted(round=self.state.plan_round))
            self.session(
                "plan-review",
                self.state.plan_round,
                lambda s: ev.PlanReviewVerdict(session=s, round=1, verdict="approve"),
            )

    def implement(self, task: str, head: str, paths: tuple[str, ...] = ("x",)) -> None:
        t = self.state.tasks[task]
        r = t.impl_round
        self.add(ev.ImplementStarted(round=r), task)
        self.session("implement", r, lambda s: ev.AgentDone(session=s), task, head=head)
        self.add(ev.ImplementCompleted(round=r, head=head, changed_paths=paths), task)

    def review(self, task: str, verdict: str = "approve") -> None:
        r = self.state.tasks[task].impl_round
        self.add(ev.CodeReviewStarted(round=r), task)
        self.session(
            "code-review",
            r,
            lambda s: ev.CodeReviewVerdict(
                session=s, round=r, verdict=verdict, findings=("no",) if verdict == "revise" else ()
            ),
            task,
        )

    def through(self, task: str, head: str) -> None:
        """Start, implement and approve one task (no verify steps: it passes)."""
        move = decide_task(self.state, task)
        assert isinstance(move, StartTask), move
        self.add(ev.TaskStarted(task=task, base_sha=move.base_sha), task)
        self.implement(task, head)
        self.review(task)


def asks(session: str) -> ev.EscalationRaised:
    """An implement agent's question (``agent escalate``)."""
    return ev.EscalationRaised(
        id="e1",
        phase="implement",
        round=1,
        source="agent",
        cause="agent",
        question="Which file?",
        session=session,
    )


BUDGET_QUESTION = ev.EscalationRaised(
    id="e1", phase="implement", round=1, source="policy", cause="budget", question="?"
)


def planned(config: Config | None = None, graph: object = GRAPH) -> Log:
    log = Log(config)
    log.planned(fence(graph))
    return log


# --- parsing ----------------------------------------------------------------------


def test_a_plan_without_a_graph_has_none() -> None:
    assert parse("# Plan\n\n```json\n[1]\n```\n") == ()


def test_a_graph_is_read_in_its_order_with_its_deps_and_paths() -> None:
    tasks = parse(fence(GRAPH))
    assert [(t.id, t.deps, t.paths) for t in tasks] == [
        ("alpha", (), ()),
        ("beta", (), ("beta/**",)),
        ("gamma", ("alpha",), ()),
    ]


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        (
            [{"id": "a", "goal": "x", "deps": ["b"]}, {"id": "b", "goal": "y", "deps": ["a"]}],
            "the task graph has a cycle: a -> b -> a",
        ),
        (
            [{"id": "a", "goal": "x", "deps": ["b"]}, {"id": "b", "goal": "y"}],
            "task a depends on b, listed after it",
        ),
        ([{"id": "a", "goal": "x"}, {"id": "a", "goal": "y"}], "task id 'a' is used twice"),
        ([{"id": "Upper", "goal": "x"}], "id 'Upper' must match [a-z0-9][a-z0-9-]{0,31}"),
        ([{"id": "a" * 33, "goal": "x"}], "must match"),
        ([{"id": "a\n", "goal": "x"}], "must match"),
        ([{"id": "c1", "goal": "x"}], "id 'c1' is kept for candidates"),
        ([{"id": "a", "goal": "x", "deps": ["zz"]}], "task a depends on 'zz', which is not a task"),
        ([{"id": "a", "goal": "x", "deps": "a"}], "task 1: deps: Input should be a list"),
        ([{"id": "a", "goal": "x", "owner": "me"}], "task 1 has unknown key(s) owner"),
        ([{"goal": "x"}], "task 1: id: Field required"),
        ([{"id": "a", "goal": " "}], "task a: its goal is empty"),
        ([{"id": f"t{n}", "goal": "x"} for n in range(13)], "the graph has 13 tasks; at most 12"),
        ([], "must hold a non-empty JSON list"),
        ({"id": "a"}, "must hold a non-empty JSON list"),
    ],
)
def test_a_graph_that_does_not_hold_says_why_in_one_line(doc: object, said: str) -> None:
    with pytest.raises(GraphError) as caught:
        parse(fence(doc))
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_json_that_does_not_parse_and_two_blocks_are_refused() -> None:
    with pytest.raises(GraphError, match="is not JSON"):
        parse("```agentrun-tasks\n[{]\n```\n")
    with pytest.raises(GraphError, match="2 `agentrun-tasks` blocks"):
        parse(fence(GRAPH) + fence(GRAPH))


def test_a_block_of_another_language_or_inside_a_longer_fence_is_not_the_graph() -> None:
    text = "````md\n```agentrun-tasks\n[1]\n```\n````\n"
    assert parse(text) == ()


# --- the plan goes back when its graph does not hold -----------------------------


def test_a_refused_graph_is_plan_review_s_finding_when_plan_review_runs() -> None:
    log = Log()
    log.planned(fence([{"id": "a", "goal": "x", "deps": ["a"]}]))
    s = log.state
    assert (s.stage, s.plan_round, s.tasks) == ("plan", 2, {})
    assert "graph was refused" in s.feedback[0] and "cycle" in s.feedback[0]
    move = decide(s)
    assert isinstance(move, RunPhase) and (move.phase, move.round) == ("plan", 2)
    assert move.feedback == s.feedback


def test_a_refused_graph_is_a_failed_plan_attempt_without_plan_review() -> None:
    config = Config.model_validate({"pipeline": {"plan_review": False}})
    log = Log(config)
    log.planned(fence([{"id": "A", "goal": "x"}]), review=False)
    s = log.state
    assert (s.stage, s.plan_round, s.attempts) == ("plan", 1, {"plan@1": 1})
    move = decide(s)
    assert isinstance(move, RunPhase) and (move.round, move.attempt) == (1, 2)
    assert "must match" in move.feedback[-1]
    log.planned(fence([{"id": "B", "goal": "x"}]), review=False)
    asked = decide(log.state)
    assert isinstance(asked, RaiseEscalation) and asked.cause == "attempts"


def test_the_plan_verb_says_the_graph_goes_back() -> None:
    log = Log()
    log.add(ev.PlanStarted(round=1))
    log.add(ev.SessionStarted(session="s-9", role="plan", runtime="x", phase="plan", round=1))
    env = AgentEnv("b", "plan", 1, "s-9")
    check_fits(log.state, env, "plan")
    _, said = verb_draft(log.state, env, VerbReport("plan", fence([{"id": "a"}])), str)
    assert "its task graph is refused and the plan goes back to you" in said
    _, said = verb_draft(log.state, env, VerbReport("plan", fence(GRAPH)), str)
    assert said.endswith("with a graph of 3 task(s)")


# --- the frontier and each task's view ---------------------------------------------


def test_an_approved_graph_makes_the_tasks_and_the_frontier_has_those_without_deps() -> None:
    s = planned().state
    assert s.stage == "tasks" and list(s.tasks) == ["alpha", "beta", "gamma"]
    assert decide(s) == RunTasks(("alpha", "beta"))
    assert decide_task(s, "gamma") == Wait("tasks")
    assert decide_task(s, "alpha") == StartTask(task="alpha", base_sha=BASE)


def test_a_task_s_view_has_its_own_round_head_and_goal_and_it_never_publishes() -> None:
    log = planned()
    log.add(ev.TaskStarted(task="beta", base_sha=BASE), "beta")
    s = log.state
    move = decide_task(s, "beta")
    assert isinstance(move, RunPhase) and (move.phase, move.round, move.attempt) == (
        "implement",
        1,
        1,
    )
    seen = view(s, "beta")
    assert seen.task == "beta" and seen.head == BASE
    assert seen.goal.startswith("write beta") and "three parts" in seen.goal
    assert "beta/**" in seen.goal
    log.implement("beta", "c" * 40)
    assert log.state.tasks["beta"].stage == "code-review"
    assert log.state.head == BASE, "the build's head moves only when the queue lands it"
    assert not log.state.implemented
    log.review("beta")
    assert log.state.tasks["beta"].stage == "passed"
    assert decide_task(log.state, "beta") == Wait("complete")


def test_the_queue_lands_in_the_graph_s_order_and_the_last_landing_goes_on() -> None:
    log = planned()
    log.through("beta", "c" * 40)
    log.through("alpha", "a" * 40)
    first = decide(log.state)
    assert first == Integrate(task="alpha", head="a" * 40, changed_paths=("x",))
    log.add(ev.TaskIntegrated(task="alpha", head="a" * 40, changed_paths=("x",)))
    assert decide(log.state) == Integrate(task="beta", head="c" * 40, changed_paths=("x",))
    log.add(ev.TaskIntegrated(task="beta", head="d" * 40, changed_paths=("x", "y")))
    assert decide(log.state) == RunTasks(("gamma",))
    assert decide_task(log.state, "gamma") == StartTask(task="gamma", base_sha="d" * 40)
    log.through("gamma", "e" * 40)
    log.add(ev.TaskIntegrated(task="gamma", head="f" * 40, changed_paths=("x", "y", "z")))
    s = log.state
    assert (s.stage, s.implemented, s.head) == ("code-review", True, "f" * 40)
    assert decide(s) == Publish("open-draft")


def test_a_conflict_sends_the_task_to_reconcile_and_a_failed_gate_to_implement() -> None:
    log = planned()
    log.through("alpha", "a" * 40)
    log.add(ev.TaskReturned(task="alpha", why="conflict", base_sha="9" * 40, reason="a.py"))
    move = decide_task(log.state, "alpha")
    assert isinstance(move, RunPhase)
    assert (move.phase, move.round, move.merge) == ("reconcile", 1, "9" * 40)
    log.through("beta", "c" * 40)
    log.add(ev.TaskReturned(task="beta", why="gate", base_sha="9" * 40, reason="FAILED t.py"))
    move = decide_task(log.state, "beta")
    assert isinstance(move, RunPhase) and (move.phase, move.round) == ("implement", 2)
    assert "failed its gate" in move.feedback[-1] and "FAILED t.py" in move.feedback[-1]


def test_a_question_in_one_task_parks_only_that_task() -> None:
    log = planned()
    log.add(ev.TaskStarted(task="alpha", base_sha=BASE), "alpha")
    log.add(ev.ImplementStarted(round=1), "alpha")

    log.session("implement", 1, asks, "alpha")
    s = log.state
    assert [(e.id, e.task) for e in s.open_escalations] == [("e1", "alpha")]
    assert decide_task(s, "alpha") == Wait("parked")
    assert isinstance(decide_task(s, "beta"), StartTask)
    assert decide(s) == RunTasks(("beta",))
    assert s.state_name == "running"
    log.add(ev.EscalationAnswered(id="e1", answer="alpha.txt", by="alice"))
    move = decide_task(log.state, "alpha")
    assert isinstance(move, RunPhase) and move.phase == "implement"
    assert "alpha.txt" in move.feedback[-1]


def test_every_pending_task_parked_parks_the_build() -> None:
    log = planned(graph=[{"id": "solo", "goal": "x"}])
    log.add(ev.TaskStarted(task="solo", base_sha=BASE), "solo")
    log.add(ev.ImplementStarted(round=1), "solo")
    log.session("implement", 1, asks, "solo")
    assert decide(log.state) == Wait("parked")
    assert log.state.state_name == "parked"


def test_controls_are_the_build_s_runner_s_and_tasks_stop_for_them() -> None:
    log = planned()
    log.add(ev.TaskStarted(task="alpha", base_sha=BASE), "alpha")
    log.add(ev.BuildAbortRequested(reason="stop"), actor=ev.HumanActor(login="alice"))
    assert decide_task(log.state, "alpha") == Wait("aborted")
    assert decide(log.state) == Acknowledge("abort")
    log.add(ev.BuildPauseRequested(), actor=ev.HumanActor(login="alice"))


def test_running_sessions_reserve_their_estimate_before_another_starts() -> None:
    """400 tokens; plan and its review spent 200. A role's first session holds all that
    is left, so the next task waits for it; then each running implement holds its
    estimate (100): a session that fits only once others end waits, one that would not
    fit even alone asks."""
    config = Config.model_validate({"budget": {"max_tokens": 400}})
    log = planned(config, graph=[{"id": f"t{n}", "goal": "x"} for n in range(3)])
    for task in ("t0", "t1", "t2"):
        log.add(ev.TaskStarted(task=task, base_sha=BASE), task)
    log.add(ev.ImplementStarted(round=1), "t0")
    assert decide_task(log.state, "t1") == Wait("budget")
    assert view(log.state, "t1").reserved_tokens == 200
    log.session("implement", 1, lambda s: ev.AgentDone(session=s), "t0", tokens=100)
    log.add(ev.ImplementCompleted(round=1, head="a" * 40, changed_paths=("a",)), "t0")
    move = decide_task(log.state, "t1")
    assert isinstance(move, RunPhase) and move.phase == "implement"
    log.add(ev.ImplementStarted(round=1), "t1")
    assert decide_task(log.state, "t2") == Wait("budget")
    assert view(log.state, "t2").reserved_tokens == 100
    log.session("implement", 1, lambda s: ev.AgentDone(session=s), "t1", tokens=100)
    log.add(ev.ImplementCompleted(round=1, head="b" * 40, changed_paths=("b",)), "t1")
    asked = decide_task(log.state, "t2")
    assert isinstance(asked, RaiseEscalation) and asked.cause == "budget"
    assert "it has used 400 tokens of its max_tokens budget of 400" in asked.question


def test_a_budget_question_from_one_task_parks_every_task() -> None:
    log = planned()
    log.add(
        BUDGET_QUESTION,
        "alpha",
    )
    assert decide_task(log.state, "beta") == Wait("parked")
    assert decide(log.state) == Wait("parked")


def test_a_parked_build_waits_for_the_tasks_in_the_middle_of_a_phase() -> None:
    """The build's runner does not leave while a task's session runs: the task finishes
    its phase, then stops at the question like the others."""
    log = planned()
    log.add(ev.TaskStarted(task="beta", base_sha=BASE), "beta")
    log.add(ev.ImplementStarted(round=1), "beta")
    log.add(
        BUDGET_QUESTION,
        "alpha",
    )
    assert decide(log.state) == RunTasks(("beta",))
    log.implement("beta", "c" * 40)  # the rest of the phase: its session, its commit
    assert decide(log.state) == Wait("parked")


def test_an_event_of_a_task_the_graph_does_not_have_changes_nothing() -> None:
    log = planned()
    before = log.state
    after = log.add(ev.ImplementStarted(round=1), "nope")
    assert after.tasks == before.tasks and after.stage == before.stage


@pytest.mark.parametrize(
    "payload",
    [
        ev.BuildCompleted(summary_text="done"),
        ev.TaskIntegrated(task="alpha", head="f" * 40),
        ev.ProposalReady(number=1),
    ],
    ids=lambda p: p.type,
)
def test_what_only_the_build_records_is_ignored_from_a_task(payload: Any) -> None:
    """An agent without isolation could write refs: an event only the build's runner
    records, carried by a task's envelope, changes nothing (and the runner's log check
    stops the build at it)."""
    log = planned()
    log.through("alpha", "a" * 40)
    before = log.state
    after = log.add(payload, "alpha")
    assert after.model_copy(update={"seq": before.seq, "updated_at": before.updated_at}) == before
    assert after.status == "running" and after.tasks["alpha"].stage == "passed"


def test_a_state_with_tasks_survives_the_cache_s_json() -> None:
    log = planned()
    log.through("alpha", "a" * 40)
    s = log.state
    assert BuildState.model_validate_json(s.model_dump_json()) == s


def test_each_task_climbs_its_own_ladder() -> None:
    """A task's failed round moves that task up the ladder; the others stay on rung 0."""
    config = Config(
        roles={"default": ("strong",)},
        ladder={"implement": Ladder(rungs=("cheap", "strong"))},
    )
    log = planned(config)
    log.add(ev.TaskStarted(task="alpha", base_sha=BASE), "alpha")
    log.add(ev.TaskStarted(task="beta", base_sha=BASE), "beta")
    first = decide_task(log.state, "alpha")
    assert isinstance(first, RunPhase) and (first.phase, first.rung) == ("implement", 0)
    log.implement("alpha", "a" * 40)
    log.review("alpha", "revise")
    climb = decide_task(log.state, "alpha")
    assert climb == Climb("implement", 1, "strong", "1 failed round on cheap")
    log.add(ev.LadderClimbed(role="implement", rung=1, runtime="strong", reason=climb.reason),
            "alpha")  # fmt: skip
    assert log.state.tasks["alpha"].rungs == {"implement": 1}
    assert log.state.tasks["beta"].rungs == {} and log.state.rungs == {}
    again = decide_task(log.state, "alpha")
    assert isinstance(again, RunPhase) and (again.round, again.rung) == (2, 1)
    beta = decide_task(log.state, "beta")
    assert isinstance(beta, RunPhase) and beta.rung == 0
