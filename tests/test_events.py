"""The event catalog: every event type survives its commit message; bad ones are refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from agentrun.errors import InvalidEventError, MalformedEventError
from agentrun.events import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    AgentActor,
    AgentDone,
    BaseMoved,
    BuildAborted,
    BuildAbortRequested,
    BuildCompleted,
    BuildCreated,
    BuildFailed,
    BuildPaused,
    BuildPauseRequested,
    BuildReconcileRequested,
    BuildResumed,
    BuildResumeRequested,
    BuildRetryRequested,
    CandidateChosen,
    CandidateSelected,
    CandidatesStarted,
    ChecksSeen,
    CodeReviewStarted,
    CodeReviewVerdict,
    EscalationAnswered,
    EscalationRaised,
    Event,
    FeedbackReceived,
    FinalizeCompleted,
    FinalizeStarted,
    FinalizeStepCompleted,
    ForgeCursor,
    HumanActor,
    ImplementCompleted,
    ImplementStarted,
    KernelActor,
    LadderClimbed,
    MemoryAccepted,
    MemoryAdded,
    MemoryForgotten,
    ObservationRecorded,
    Payload,
    PhaseFailed,
    PlanApproved,
    PlanReviewStarted,
    PlanReviewVerdict,
    PlanStarted,
    PlanSubmitted,
    ProposalClosed,
    ProposalOpened,
    ProposalReady,
    PublicationPushed,
    ReconcileCompleted,
    ReconcileStarted,
    RunnerAttached,
    RunnerSetupFailed,
    SeenCheck,
    SelectStarted,
    SessionEnded,
    SessionStarted,
    TaskIntegrated,
    TaskReturned,
    TaskStarted,
    Usage,
    VerifyCompleted,
    VerifyStarted,
    VerifyVerdict,
    check_payload,
    decode,
    encode,
)

SHA = "0123456789abcdef0123456789abcdef01234567"
TS = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)

# One instance of every payload class, each with its optional fields filled where it has any.
PAYLOADS: list[Any] = [
    BuildCreated(
        goal="Fix the login redirect",
        base_ref="main",
        base_sha=SHA,
        branch="agentrun/fix-login",
        source="issue",
        issue="octo/app#42",
        config={"policy": {"max_phase_attempts": 3}, "verify": [{"name": "t", "command": "x"}]},
    ),
    BuildCompleted(summary_text="done"),
    BuildFailed(reason="the runner could not set up the build"),
    BuildPauseRequested(reason="lunch"),
    BuildPaused(),
    BuildResumeRequested(reason="back"),
    BuildResumed(reason="acknowledged"),
    BuildAbortRequested(reason="wrong goal"),
    BuildAborted(reason="acknowledged"),
    RunnerAttached(instance="r-1", host="ci-7", pid=4242, resumed_from_seq=12),
    RunnerSetupFailed(error="disk full", permanent=True),
    SessionStarted(
        session="s-1",
        role="implement",
        runtime="claude",
        model="sonnet",
        phase="implement",
        round=2,
        substitution="codex",
    ),
    SessionEnded(
        session="s-1",
        outcome="timeout",
        transcript="transcript-s-1.txt",
        usage=Usage(tokens_in=1200, tokens_out=300, cost_usd=0.0125),
        runtime_session_id="rt-9",
        head=SHA,
        error="ran past 1800s",
    ),
    PlanStarted(round=2, feedback=("split the migration",)),
    PlanSubmitted(session="s-1", plan="plan-r1.md", summary_text="Three steps"),
    PlanReviewStarted(round=1),
    PlanReviewVerdict(session="s-2", round=1, verdict="revise", findings=("too broad", "no tests")),
    PlanApproved(id="e1", by="alice"),
    ImplementStarted(round=3, feedback=("add a test",)),
    ImplementCompleted(round=3, head=SHA, changed_paths=("src/app.py",), summary_text="fixed"),
    CodeReviewStarted(round=3),
    CodeReviewVerdict(session="s-3", round=3, verdict="approve"),
    AgentDone(session="s-4", summary_text="changelog updated"),
    VerifyStarted(step="tests", round=1, attempt=2, kind="agent"),
    VerifyVerdict(session="s-5", verdict="fail", reason="breaks login"),
    VerifyCompleted(
        step="tests",
        round=1,
        attempt=2,
        outcome="fail",
        exit_code=1,
        report="verify-tests-r1-a2.txt",
        reason="`pytest -q` exit 1",
        head=SHA,
    ),
    FinalizeStarted(step="notes", attempt=1),
    FinalizeStepCompleted(step="notes", ok=False, note="`make notes` exit 2", head=SHA),
    FinalizeCompleted(),
    PhaseFailed(
        phase="verify:tests",
        round=1,
        attempt=1,
        error="interrupted (Ctrl-C)",
        permanent=False,
        will_retry=True,
        session="s-6",
        interrupted=True,
    ),
    EscalationRaised(
        id="e1",
        phase="implement",
        round=2,
        source="agent",
        cause="agent",
        question="Which database?",
        session="s-7",
    ),
    EscalationAnswered(id="e1", answer="postgres", by="alice"),
    ProposalOpened(forge="local", number=7, url="refs/agentrun/pulls/7", head=SHA),
    ProposalReady(number=7),
    ProposalClosed(number=7, merged=True),
    PublicationPushed(branch="agentrun/fix-login", sha=SHA),
    ObservationRecorded(phase="finalize:notes", text="`make notes` exit 2"),
    BuildRetryRequested(reason="the disk is fixed"),
    BuildReconcileRequested(base_sha=SHA),
    FeedbackReceived(forge="github", number=3, review=17, author="bob", text="Rename it."),
    ForgeCursor(forge="github", comment=1204, review=17),
    BaseMoved(base_sha=SHA, conflicts=("src/app.py",)),
    ReconcileStarted(round=2, base_sha=SHA),
    ReconcileCompleted(round=2, base_sha=SHA, head=SHA),
    TaskStarted(task="parser", base_sha=SHA),
    TaskIntegrated(task="parser", head=SHA, changed_paths=("src/parse.py",)),
    TaskReturned(task="parser", why="conflict", base_sha=SHA, reason="conflicts in src/a.py"),
    CandidatesStarted(round=1, base_sha=SHA, runtimes=("claude", "codex")),
    SelectStarted(round=1, offered=("c1", "c2")),
    CandidateSelected(session="s-8", number=2),
    CandidateChosen(round=1, candidate="c2", passed=True, reason="codex: the one that passed"),
    LadderClimbed(role="implement", rung=1, runtime="claude", reason="1 failed round on local"),
    MemoryAdded(id="m-1", text="Tests run with pytest -q", who="verify", build="b", phase="v@1"),
    MemoryAccepted(id="m-1", by="alice"),
    MemoryForgotten(id="m-1", by="alice"),
    ChecksSeen(
        sha=SHA,
        checks=(
            SeenCheck(name="lint", state="success", conclusion="success"),
            SeenCheck(name="test", state="failure", conclusion="failure", summary="1 failed"),
        ),
    ),
]
ACTORS = [KernelActor(), AgentActor(role="code-review", session="s-3"), HumanActor(login="alice")]


def event(payload: Any, seq: int = 5, actor: Any = None) -> Event:
    return Event(seq=seq, ts=TS, actor=actor or KernelActor(), writer="r-1", payload=payload)


def message(doc: dict[str, Any], subject: str = "x: y") -> str:
    return f"{subject}\n\n{json.dumps(doc)}\n"


def valid_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "seq": 3,
        "type": "plan.started",
        "ts": "2024-05-06T07:08:09Z",
        "actor": {"kind": "kernel"},
        "writer": "r-1",
        "payload": {"round": 1},
    }
    doc.update(changes)
    return doc


def test_every_payload_class_has_an_instance_here() -> None:
    classes = get_args(get_args(Payload)[0])
    assert sorted(c.__name__ for c in classes) == sorted(type(p).__name__ for p in PAYLOADS)
    assert {p.type for p in PAYLOADS} == EVENT_TYPES


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p.type for p in PAYLOADS])
def test_round_trip(payload: Any) -> None:
    original = event(payload)
    back = decode(encode(original), "abc123")
    assert back == original
    assert type(back.payload) is type(payload)
    assert back.type == payload.type


@pytest.mark.parametrize("actor", ACTORS, ids=lambda a: a.kind)
def test_actors_round_trip(actor: Any) -> None:
    original = event(PlanReviewStarted(round=1), actor=actor)
    assert decode(encode(original), "abc123").actor == actor


def test_the_message_is_a_subject_a_blank_line_and_the_envelope() -> None:
    text = encode(event(PlanStarted(round=2), seq=9))
    subject, blank, body = text.split("\n", 2)
    assert subject == "plan.started: round 2"
    assert blank == ""
    doc = json.loads(body)
    assert list(doc)[:3] == ["v", "seq", "type"]
    assert doc["v"] == SCHEMA_VERSION
    assert doc["seq"] == 9
    assert doc["type"] == "plan.started"
    assert doc["payload"] == {"round": 2, "feedback": []}  # the type is said once, at the top
    assert doc["actor"] == {"kind": "kernel"}
    assert datetime.fromisoformat(doc["ts"]) == TS


def test_non_ascii_text_is_kept() -> None:
    original = event(EscalationAnswered(id="e1", answer="Ja, bitte – über „v2“ ✓", by="jörg"))
    text = encode(original)
    assert "über „v2“ ✓" in text
    assert decode(text, "abc123") == original


def multi_line(payload: Any) -> Any:
    """``payload`` with a line break in every free-text field."""
    texts = {
        name: getattr(payload, name) + "\nand more"
        for name, value in type(payload).model_fields.items()
        if name != "type" and isinstance(getattr(payload, name), str) and value.annotation is str
    }
    return type(payload).model_validate({**payload.model_dump(), **texts})


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p.type for p in PAYLOADS])
def test_summaries_are_one_line(payload: Any) -> None:
    summary = payload.summary()
    assert isinstance(summary, str)
    assert summary
    assert "\n" not in summary
    for version in (payload, multi_line(payload)):
        original = event(version)
        text = encode(original)
        subject, blank, _ = text.split("\n", 2)
        assert subject.startswith(f"{version.type}: ")
        assert len(subject) <= len(version.type) + 2 + 120
        assert blank == ""
        assert decode(text, "abc123") == original


def test_a_multi_line_summary_becomes_one_line() -> None:
    text = encode(event(BuildFailed(reason="first line\nsecond line")))
    subject, blank, _ = text.split("\n", 2)
    assert subject == "build.failed: first line second line"
    assert blank == ""


def test_a_long_summary_is_cut() -> None:
    text = encode(event(BuildFailed(reason="x" * 500)))
    subject = text.split("\n", 1)[0]
    summary = subject.removeprefix("build.failed: ")
    assert len(summary) == 120
    assert summary.endswith("...")


def test_the_full_text_survives_a_cut_summary() -> None:
    original = event(BuildFailed(reason="line one\n" + "y" * 500))
    assert decode(encode(original), "abc123") == original


# --- decode refuses ---------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "plan.started: round 1",  # no body
        "plan.started: round 1\n\n{not json",
        "plan.started: round 1\n\n[1, 2]",  # JSON, not an object
        "",
    ],
    ids=["no-body", "not-json", "not-an-object", "empty"],
)
def test_decode_refuses_what_is_not_an_event(text: str) -> None:
    with pytest.raises(MalformedEventError, match=r"^commit abc123 is not an agentrun event"):
        decode(text, "abc123")


def test_decode_refuses_an_unknown_type() -> None:
    with pytest.raises(MalformedEventError) as err:
        decode(message(valid_doc(type="plan.exploded")), "abc123")
    assert str(err.value) == "commit abc123 holds an unknown event type 'plan.exploded'"


def test_decode_refuses_a_missing_type() -> None:
    doc = valid_doc()
    del doc["type"]
    with pytest.raises(MalformedEventError, match="commit abc123 holds an unknown event type None"):
        decode(message(doc), "abc123")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (valid_doc(payload={"round": "two"}), "round"),
        (valid_doc(payload={"round": 1, "colour": "red"}), "colour"),
        (valid_doc(type="build.created", payload={"base_ref": "main"}), "goal"),
        (valid_doc(payload="round one"), "payload"),
        (valid_doc(actor={"kind": "robot"}), "actor"),
        (valid_doc(seq="third"), "seq"),
        (valid_doc(ts="yesterday"), "ts"),
    ],
    ids=["wrong-type", "unknown-field", "missing-field", "not-an-object", "actor", "seq", "ts"],
)
def test_decode_refuses_a_malformed_event_naming_the_commit_and_field(
    doc: dict[str, Any], field: str
) -> None:
    with pytest.raises(MalformedEventError) as err:
        decode(message(doc), "abc123")
    text = str(err.value)
    assert text.startswith(f"commit abc123 holds a malformed {doc['type']} event: ")
    assert field in text
    assert "\n" not in text


def test_decode_refuses_a_payload_that_names_another_type() -> None:
    """The type is said once, at the top (``encode``); the payload may not contradict it."""
    doc = valid_doc(payload={"type": "build.failed", "reason": "x"})
    with pytest.raises(MalformedEventError) as err:
        decode(message(doc, "plan.started: round 1"), "abc123")
    assert str(err.value).startswith("commit abc123 holds a malformed plan.started event: ")


def test_decode_refuses_a_newer_schema() -> None:
    with pytest.raises(MalformedEventError) as err:
        decode(message(valid_doc(v=SCHEMA_VERSION + 1)), "abc123")
    text = str(err.value)
    assert "commit abc123" in text
    assert f"v{SCHEMA_VERSION + 1}" in text
    assert text.endswith("upgrade agentrun")


@pytest.mark.parametrize("version", [0, True, "2", None])
def test_decode_refuses_a_version_that_is_no_count(version: object) -> None:
    with pytest.raises(MalformedEventError) as err:
        decode(message(valid_doc(v=version)), "abc123")
    assert str(err.value) == f"commit abc123 has no valid schema version ({version!r})"


def test_decode_reads_the_current_schema() -> None:
    back = decode(message(valid_doc()), "abc123")
    assert back.v == SCHEMA_VERSION
    assert back.payload == PlanStarted(round=1)
    assert back.ts == datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)


# --- check_payload ----------------------------------------------------------


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p.type for p in PAYLOADS])
def test_check_payload_accepts_every_valid_payload(payload: Any) -> None:
    check_payload(payload)


class Stranger(BaseModel):
    type: str = "build.exploded"


@pytest.mark.parametrize(
    "payload",
    [
        Stranger(),
        {"type": "plan.started", "round": 1},  # a plain dict, not a payload model
        "plan.started",
        None,
    ],
    ids=["unknown-model", "dict", "str", "none"],
)
def test_check_payload_refuses_an_unknown_object(payload: Any) -> None:
    with pytest.raises(InvalidEventError, match=r"^unknown event type: "):
        check_payload(payload)


def test_check_payload_refuses_an_invalid_payload() -> None:
    bad = PlanStarted.model_construct(round="two")  # type: ignore[arg-type]  # as a bug could
    # pydantic warns while it dumps the bad value
    with pytest.warns(UserWarning), pytest.raises(InvalidEventError) as err:
        check_payload(bad)
    assert str(err.value).startswith("invalid plan.started payload: ")
    assert "round" in str(err.value)


def test_a_v1_build_created_reads_as_not_allowing_empty() -> None:
    doc = valid_doc(
        v=1,
        type="build.created",
        payload={"goal": "g", "base_ref": "main", "base_sha": "a" * 40, "branch": "agentrun/g"},
    )
    created = decode(message(doc), "abc123").payload
    assert isinstance(created, BuildCreated)
    assert created.allow_empty is False


def test_a_task_event_keeps_its_task_and_a_build_event_writes_none() -> None:
    """The envelope's ``task`` is written only when set: a log without tasks reads, and
    is written, as before tasks existed."""
    tasked = event(PlanReviewStarted(round=1)).model_copy(update={"task": "parser"})
    assert decode(encode(tasked), "abc123").task == "parser"
    plain = encode(event(PlanReviewStarted(round=1)))
    assert '"task"' not in plain
    assert decode(plain, "abc123").task is None
