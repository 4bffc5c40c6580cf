"""People's requests: one meaning each, whether typed at the CLI or in a forge comment."""

from __future__ import annotations

import pytest
from scenario import Build

from agentrun.errors import EscalationError
from agentrun.events import (
    BuildAbortRequested,
    BuildPauseRequested,
    BuildResumeRequested,
    BuildRetryRequested,
    EscalationAnswered,
    EscalationRaised,
)
from agentrun.kernel import requests
from agentrun.kernel.decide import Acknowledge, RunPhase


def test_a_pause_is_asked_once() -> None:
    b = Build()
    assert requests.pause(b.state) == BuildPauseRequested()
    b.request("pause")
    assert requests.pause(b.state) is None  # requested already: nothing more to record
    b.step()  # acknowledged
    assert b.state.paused
    assert requests.pause(b.state) is None


def test_resume_goes_on_from_a_pause() -> None:
    b = Build().request("pause")
    b.step()
    assert b.state.paused
    assert requests.resume(b.state) == BuildResumeRequested()
    b.request("resume")
    assert requests.resume(b.state) is None  # asked already
    assert b.decide() == Acknowledge("resume")


def test_resume_withdraws_a_pause_not_yet_acknowledged() -> None:
    b = Build().request("pause")
    assert b.state.pause_requested and not b.state.paused
    assert requests.resume(b.state) == BuildResumeRequested()
    b.request("resume")
    assert not b.state.pause_requested
    assert isinstance(b.decide(), RunPhase)  # the build goes on, never paused


def test_resume_of_a_running_build_records_nothing() -> None:
    assert requests.resume(Build().state) is None


def test_an_abort_is_asked_once() -> None:
    b = Build()
    assert requests.abort(b.state) == BuildAbortRequested()
    b.request("abort")
    assert requests.abort(b.state) is None


@pytest.mark.parametrize("verb", ["pause", "resume", "abort", "retry"])
def test_a_finished_build_refuses_in_one_line(verb: str) -> None:
    b = Build().request("abort")
    b.step()
    assert b.state.status == "aborted"
    with pytest.raises(requests.NotRunningError) as refused:
        getattr(requests, verb)(b.state)
    assert str(refused.value) == f"build b-sim is aborted; there is nothing to {verb}"


def test_retry_is_always_recorded_while_the_build_can_go_on() -> None:
    b = Build()
    assert requests.retry(b.state) == BuildRetryRequested()


def test_an_answer_goes_to_the_one_open_escalation() -> None:
    b = Build().steps("escalate")
    assert requests.answer(b.state, "  use SQLite  ", None, "alice") == EscalationAnswered(
        id="e1", answer="use SQLite", by="alice"
    )


def test_answers_are_refused_when_they_cannot_be_placed() -> None:
    b = Build()
    with pytest.raises(EscalationError, match="the answer is empty"):
        requests.answer(b.state, "  ", None, "alice")
    with pytest.raises(EscalationError, match="b-sim has no open escalation to answer"):
        requests.answer(b.state, "yes", None, "alice")
    b.steps("escalate").answer("SQLite")
    with pytest.raises(EscalationError, match="e1 of b-sim was already answered by alice"):
        requests.answer(b.state, "again", "e1", "alice")
    with pytest.raises(EscalationError, match=r"no escalation 'e9' \(escalations: e1\)"):
        requests.answer(b.state, "yes", "e9", "alice")


def test_several_open_escalations_need_a_name_said_in_the_askers_terms() -> None:
    b = Build().add(*(_question(esc) for esc in ("e1", "e2")))
    with pytest.raises(EscalationError, match=r"several open escalations \(e1, e2\): pass"):
        requests.answer(b.state, "yes", None, "alice")
    with pytest.raises(EscalationError, match=r"\(e1, e2\): write `/agentrun answer ID TEXT`"):
        requests.answer(b.state, "yes", None, "bob", "write `/agentrun answer ID TEXT`")
    assert requests.answer(b.state, "yes", "e2", "alice").id == "e2"


def _question(esc: str) -> EscalationRaised:
    return EscalationRaised(
        id=esc, phase="plan", round=1, source="policy", cause="setup", question="which?"
    )
