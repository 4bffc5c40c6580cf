"""A role's model ladder and the stall detection, decided from the log alone."""

from __future__ import annotations

import pytest
import scenario
from scenario import Act, fold

from agentrun.config import Config, Ladder, Pipeline, Policy, VerifyStep
from agentrun.config.load import parse_config
from agentrun.errors import ConfigError
from agentrun.events import LadderClimbed, Usage
from agentrun.kernel.budget import FirstSession, dollars, estimate
from agentrun.kernel.decide import Climb, Decision, Publish, RaiseEscalation, RunPhase, decide
from agentrun.kernel.ladder import fingerprint

TESTS = VerifyStep(name="tests", command="pytest -q")
LADDER = Ladder(rungs=("cheap", "strong"))


def config(ladder: dict[str, Ladder] | None = None, review: bool = False, **policy: int) -> Config:
    return Config(
        roles={"default": ("strong",)},
        pipeline=Pipeline(plan_review=review, code_review=review),
        verify=(TESTS,),
        policy=Policy(**{"max_review_rounds": 10, **policy}),
        ladder={"implement": LADDER} if ladder is None else ladder,
    )


def failing(output: str = "FAILED tests/test_login.py::test_redirect - assert 1 == 2") -> Act:
    return Act("revise", text=output)


class Build(scenario.Build):
    """A build whose publications (the draft, each push) are carried out as they come:
    these tests are about what runs between them."""

    def decide(self) -> Decision:
        decision = super().decide()
        while isinstance(decision, Publish):
            self.extend(scenario.execute(self.state, decision))
            decision = super().decide()
        return decision


def implement(b: Build) -> RunPhase:
    work = b.step("ok", "run-phase")
    assert isinstance(work, RunPhase) and work.phase == "implement", work
    return work


def started(b: Build) -> list[tuple[str, int | None]]:
    """Each implement session's runtime and rung, as session.started recorded them."""
    return [
        (e.payload.runtime, e.payload.rung)
        for e in b.events
        if e.payload.type == "session.started" and e.payload.phase == "implement"
    ]


def test_implement_starts_on_the_cheapest_rung_and_climbs_after_a_failed_round() -> None:
    b = Build(config())
    b.step("ok")  # plan
    work = implement(b)
    assert work.rung == 0
    b.step(failing(), "run-check")
    climb = b.step(kind="climb")
    assert climb == Climb("implement", 1, "strong", "1 failed round on cheap")
    assert b.state.rungs == {"implement": 1} and b.state.rung_failures == {"implement": 0}
    work = implement(b)
    assert (work.round, work.rung) == (2, 1)
    b.step("ok", "run-check")
    assert b.decide().kind == "complete"
    assert started(b) == [("cheap", 0), ("strong", 1)]
    assert b.state.rung_usage == {
        "implement:0": Usage(tokens_in=100, tokens_out=10),
        "implement:1": Usage(tokens_in=100, tokens_out=10),
    }


def test_climb_after_counts_the_failed_rounds_on_one_rung() -> None:
    b = Build(config({"implement": Ladder(rungs=("cheap", "mid", "strong"), climb_after=2)}))
    b.step("ok")
    for n, output in enumerate(("FAILED t.py::a", "FAILED t.py::b")):
        assert implement(b).rung == 0
        b.step(failing(output), "run-check")
        if n == 0:
            assert b.decide().kind == "run-phase"  # one failed round of two: no climb yet
    assert b.step(kind="climb") == Climb("implement", 1, "mid", "2 failed rounds on cheap")
    assert b.state.rung_failures == {"implement": 0}


def test_running_out_of_attempts_climbs_instead_of_asking_until_the_top_rung() -> None:
    b = Build(config())
    b.step("ok")
    b.steps("fail", "fail")  # implement@1 fails twice: out of its 2 attempts on cheap
    climb = b.step(kind="climb")
    assert isinstance(climb, Climb) and climb.reason == "implement@1 failed 2 times on cheap"
    work = b.step("fail", "run-phase")
    assert isinstance(work, RunPhase) and (work.round, work.attempt, work.rung) == (1, 1, 1)
    b.step("fail", "run-phase")
    asked = b.decide()  # the top rung: DESIGN §4's escalation, as without a ladder
    assert isinstance(asked, RaiseEscalation) and asked.cause == "attempts"


def test_climbing_never_steps_down_and_starts_a_fresh_session() -> None:
    b = Build(config())
    b.step("ok")
    implement(b)
    b.step(failing(), "run-check")
    b.step(kind="climb")
    assert "implement" not in b.state.resumable
    implement(b)
    b.step(failing("FAILED t.py::other"), "run-check")
    # On the top rung a failed round is only a round: no climb, no step down.
    work = b.decide()
    assert isinstance(work, RunPhase) and work.rung == 1


def test_a_review_that_asks_for_changes_is_a_failed_round() -> None:
    b = Build(config(review=True))
    b.steps("ok", "ok")  # plan, plan review
    implement(b)  # implement@1 on cheap
    b.step("revise", "run-phase")  # code review: revise
    assert b.step(kind="climb") == Climb("implement", 1, "strong", "1 failed round on cheap")


def test_a_plan_ladder_climbs_when_plan_review_asks_for_changes() -> None:
    b = Build(config({"plan": LADDER}, review=True))
    work = b.step("ok", "run-phase")
    assert isinstance(work, RunPhase) and (work.phase, work.rung) == ("plan", 0)
    b.step("revise", "run-phase")
    assert b.step(kind="climb") == Climb("plan", 1, "strong", "1 failed round on cheap")
    work = b.decide()
    assert isinstance(work, RunPhase) and (work.phase, work.round, work.rung) == ("plan", 2, 1)


def test_a_role_without_a_ladder_has_no_rung() -> None:
    b = Build(config({}))
    b.step("ok")
    work = b.decide()
    assert isinstance(work, RunPhase) and work.rung is None


# --- the stall detection ------------------------------------------------------------


def test_the_same_failure_twice_in_a_row_parks_the_build() -> None:
    b = Build(config({}))
    b.step("ok")
    for output in ("FAILED t.py::a - 1 != 2 at 0x7f3a", "FAILED t.py::a - 3 != 4 at 0x7f3b"):
        implement(b)
        b.step(failing(output), "run-check")
    asked = b.decide()
    assert isinstance(asked, RaiseEscalation) and asked.cause == "stall"
    assert asked.question.startswith(
        "The same failure came back 2 rounds in a row (tests: t.py::a), so the build "
        "stopped instead of using its remaining rounds; it has spent 330 tokens"
    )
    b.step(kind="raise-escalation")
    assert b.state.state_name == "parked"
    b.answer("look at the redirect's query string")
    assert b.state.stall == ()
    work = b.decide()
    assert isinstance(work, RunPhase) and work.round == 3


def test_different_failures_do_not_stall() -> None:
    b = Build(config({}))
    b.step("ok")
    for output in ("FAILED t.py::a", "FAILED t.py::b", "FAILED t.py::a"):
        implement(b)
        b.step(failing(output), "run-check")
    assert isinstance(b.decide(), RunPhase)


def test_a_review_in_between_breaks_the_run() -> None:
    b = Build(config({}, review=True, stall_rounds=2))
    b.steps("ok", "ok")
    implement(b)
    b.step("ok")  # code review approves
    b.step(failing(), "run-check")  # round 1 fails tests
    implement(b)
    b.step("revise")  # code review: revise (a failure that names no test)
    implement(b)
    b.step("ok")
    b.step(failing(), "run-check")
    assert b.state.stall == ("tests: tests/test_login.py::test_redirect",)
    assert isinstance(b.decide(), RunPhase)


def test_a_stall_on_the_last_round_asks_as_a_stall_not_at_the_round_limit() -> None:
    b = Build(config({}, max_review_rounds=2))
    b.step("ok")
    for _ in range(2):
        implement(b)
        b.step(failing(), "run-check")
    asked = b.decide()
    assert isinstance(asked, RaiseEscalation) and asked.cause == "stall"


def test_stall_rounds_sets_how_many() -> None:
    b = Build(config({}, stall_rounds=3))
    b.step("ok")
    for _ in range(2):
        implement(b)
        b.step(failing(), "run-check")
    assert isinstance(b.decide(), RunPhase)
    implement(b)
    b.step(failing(), "run-check")
    asked = b.decide()
    assert isinstance(asked, RaiseEscalation) and asked.cause == "stall"


def test_on_a_ladder_a_stall_climbs_and_only_the_top_rung_parks() -> None:
    b = Build(config({"implement": Ladder(rungs=("cheap", "strong"), climb_after=5)}))
    b.step("ok")
    for _ in range(2):
        implement(b)
        b.step(failing(), "run-check")
    climb = b.step(kind="climb")
    assert isinstance(climb, Climb)
    assert climb.reason == "the same failure 2 rounds in a row on cheap"
    assert b.state.stall == ()
    for _ in range(2):
        implement(b)
        b.step(failing(), "run-check")
    asked = b.decide()
    assert isinstance(asked, RaiseEscalation) and asked.cause == "stall"


def test_the_ladder_replays_the_same() -> None:
    b = Build(config())
    b.step("ok")
    implement(b)
    b.step(failing(), "run-check")
    b.step(kind="climb")
    assert decide(fold(b.events)) == b.decide()
    assert fold(b.events) == b.state
    climbed = [e.payload for e in b.events if isinstance(e.payload, LadderClimbed)]
    assert climbed == [LadderClimbed(role="implement", rung=1, runtime="strong",
                                     reason="1 failed round on cheap")]  # fmt: skip


# --- what counts as the same failure ------------------------------------------------


@pytest.mark.parametrize(
    ("output", "ids"),
    [
        (
            "FAILED tests/test_a.py::test_x - AssertionError\n"
            "ERROR tests/test_b.py::test_y - fixture\n1 failed, 1 error in 0.31s",
            "tests/test_a.py::test_x, tests/test_b.py::test_y",
        ),
        (
            "FAIL: test_round_up (pager.tests.PagerTest.test_round_up)\n"
            "ERROR: test_zero (pager.tests.PagerTest.test_zero)\nFAILED (failures=1)",
            "pager.tests.PagerTest.test_round_up, pager.tests.PagerTest.test_zero",
        ),
        ("--- FAIL: TestPages (0.00s)\nFAIL\texample.com/pager\t0.004s", "TestPages"),
        (
            "FAILED t.py::test_case[a b] - assert 1\nFAILED t.py::test_case[a c]",
            "t.py::test_case[a b], t.py::test_case[a c]",
        ),
        (
            "FAIL: test_pages (pager.PagerTest.test_pages) (n=1)\n"
            "FAIL: test_pages (pager.PagerTest) (n=2)",
            "pager.PagerTest.test_pages (n=1), pager.PagerTest.test_pages (n=2)",
        ),
        (
            "FAIL src/pager.test.js\n  ● pages › rounds up\n\n    expect(received)",
            "pages › rounds up",
        ),
    ],
    ids=["pytest", "unittest", "go-test", "jest", "pytest-params", "unittest-subtests"],
)
def test_the_failing_test_ids_are_the_failure(output: str, ids: str) -> None:
    assert fingerprint("tests", output) == f"tests: {ids}"


def test_without_test_ids_the_output_is_compared_with_numbers_and_paths_masked() -> None:
    one = fingerprint("build", "error at /tmp/a1/x.c:12: 3 warnings in 0.52s, ref 9f8e7d6c")
    two = fingerprint("build", "error at /tmp/b7/x.c:14: 5 warnings in 1.07s, ref 1a2b3c4d")
    other = fingerprint("build", "linker: undefined symbol main")
    assert one == two != other
    assert one.startswith("build: output ")


# --- the configuration ----------------------------------------------------------------


def test_a_ladder_names_known_runtimes() -> None:
    with pytest.raises(ConfigError, match=r"at `ladder.implement.rungs`: no runtime 'claud'"):
        parse_config('[ladder.implement]\nrungs = ["codex", "claud"]\n', "x.toml")
    parsed = parse_config('[ladder.implement]\nrungs = ["codex", "claude:opus"]\n', "x.toml")
    assert parsed.runtimes_for("implement") == ("codex", "claude:opus")
    assert parsed.runtimes_for("implement", 1) == ("claude:opus",)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[ladder.implement]\nrungs = ["codex"]\n', "a ladder needs 2 to 8 rungs, cheapest first"),
        ('[ladder.implement]\nrungs = ["codex", "claude"]\nclimb_after = 0\n', "climb_after"),
        (
            '[ladder.implement]\nrungs = ["codex", "claude"]\n[candidates]\ncount = 2\n'
            '[roles]\ndefault = "codex"\n',
            "[ladder.implement] and [candidates] are two ways to run implement",
        ),
        ('[ladder.implemnt]\nrungs = ["codex", "claude"]\n', "no role 'implemnt'"),
        ('[ladder.implement]\nrungs = ["codex", "codex"]\n', "a rung is named twice: codex"),
        ('[ladder.implement]\nrungs = ["codex", "claude"]\nclimb_after = "2"\n', "integer"),
        ('[ladder.default]\nrungs = ["codex", "claude"]\n', "a ladder is for one role"),
        (
            '[roles]\nimplement = "codex"\n[ladder.implement]\nrungs = ["codex", "claude"]\n',
            "roles.implement and [ladder.implement] both route implement: keep one",
        ),
    ],
    ids=[
        "one-rung",
        "climb-after-0",
        "with-candidates",
        "misspelled-role",
        "twice",
        "a-string",
        "default",
        "with-roles",
    ],
)
def test_a_wrong_ladder_gets_one_clear_line(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "x.toml")
    assert error in str(caught.value) and "\n" not in str(caught.value)


# --- budgets on a ladder --------------------------------------------------------------


def test_a_rungs_first_session_is_not_estimated_at_the_rung_below() -> None:
    """The strong rung's first session is a first session: the runner's measure of its
    prompt and output cap estimates it, not the cheap rung's average."""
    b = Build(config())
    b.step("ok")
    implement(b)
    b.step(failing(), "run-check")
    assert estimate(b.state, "implement") == (110, 0.0)  # the cheap rung's one session
    b.step(kind="climb")
    assert estimate(b.state, "implement") == (0, 0.0)
    first = FirstSession(prompt_bytes=4000, output_cap=1000, model=None)
    assert estimate(b.state, "implement", first) == (2000, 0.0)
    implement(b)
    assert estimate(b.state, "implement", first) == (110, 0.0)  # its own sessions now


def test_a_budget_under_a_cent_is_said_as_written() -> None:
    assert (dollars(0.005), dollars(5.0), dollars(0.015)) == ("$0.005", "$5.00", "$0.015")
