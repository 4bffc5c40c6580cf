"""The build log: one event per commit under ``refs/agentrun/builds/<slug>`` (DESIGN §2)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pygit2
import pytest
from conftest import git
from pydantic import BaseModel, ConfigDict

from agentrun.errors import (
    ConcurrentUpdateError,
    InvalidEventError,
    MalformedEventError,
    UnknownBuildError,
)
from agentrun.events import (
    SCHEMA_VERSION,
    AgentActor,
    BuildCreated,
    BuildPauseRequested,
    CodeReviewVerdict,
    HumanActor,
    KernelActor,
    ObservationRecorded,
    PlanSubmitted,
)
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog, Tip, build_ref, check_slug

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
SLUG = "issue-42-fix-login"
REF = f"refs/agentrun/builds/{SLUG}"


def created(goal: str = "fix the login redirect") -> BuildCreated:
    return BuildCreated(goal=goal, base_ref="main", base_sha="a" * 40, branch=f"agentrun/{SLUG}")


def note(text: str, phase: str = "implement") -> Draft:
    return Draft(ObservationRecorded(phase=phase, text=text))


def start(log: EventLog, slug: str = SLUG) -> Tip:
    tip, _ = log.append(slug, [Draft(created(), HumanActor(login="ada"))], None)
    return tip


def ref_target(repo: pygit2.Repository, name: str = REF) -> str | None:
    ref = repo.references.get(name)
    return None if ref is None else str(ref.target)


def all_objects(repo_path: Path) -> set[str]:
    out = git(repo_path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(out.split())


# --- appending and reading back --------------------------------------------


def test_append_and_read_back(repo: pygit2.Repository, repo_path: Path) -> None:
    log = EventLog(repo, writer="runner-1")
    tip = start(log)
    review = CodeReviewVerdict(
        session="s1", round=1, verdict="revise", findings=("divides by zero",)
    )
    tip, stored = log.append(
        SLUG,
        [note("first"), Draft(review, AgentActor(role="code-review", session="s1"))],
        tip,
    )

    events = log.read(SLUG)
    assert [s.event.type for s in events] == [
        "build.created",
        "observation.recorded",
        "code-review.verdict",
    ]
    assert events[0].event.payload == created()
    assert events[0].event.actor == HumanActor(login="ada")
    assert events[1].event.actor == KernelActor()
    assert events[2].event.payload == review
    assert events[2].event.actor == AgentActor(role="code-review", session="s1")
    assert {s.event.writer for s in events} == {"runner-1"}
    assert [s.oid for s in events[1:]] == [s.oid for s in stored]
    assert [s.event for s in events[1:]] == [s.event for s in stored]
    assert tip == Tip(stored[-1].oid, 3)
    assert log.tip(SLUG) == tip
    assert log.slugs() == [SLUG]

    # One event per commit, readable with the real git CLI.
    assert git(repo_path, "rev-list", "--count", REF) == "3"
    subjects = git(repo_path, "log", "--format=%s", REF).splitlines()
    assert subjects == [
        "code-review.verdict: revise (1 finding)",
        "observation.recorded: implement: first",
        "build.created: fix the login redirect (base main aaaaaaaaaa)",
    ]
    body = git(repo_path, "log", "-1", "--format=%b", REF)
    doc = json.loads(body)
    assert doc["type"] == "code-review.verdict"
    assert doc["seq"] == 3
    assert doc["v"] == SCHEMA_VERSION
    assert doc["payload"]["findings"] == ["divides by zero"]
    # A linear chain: every event commit has at most one parent.
    parents = git(repo_path, "rev-list", "--parents", REF).splitlines()
    assert [len(line.split()) - 1 for line in parents] == [1, 1, 0]


def test_the_timestamp_is_the_one_given_and_utc(repo: pygit2.Repository) -> None:
    when = datetime(2026, 11, 3, 12, 30, tzinfo=UTC)
    log = EventLog(repo)
    tip, stored = log.append(SLUG, [Draft(created())], None, now=when)
    assert stored[0].event.ts == when
    assert log.read(SLUG)[0].event.ts == when
    commit = repo[tip.oid]
    assert isinstance(commit, pygit2.Commit)
    assert commit.commit_time == int(when.timestamp())


def test_seq_is_contiguous_across_appends(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    tip = start(log)
    for batch in range(5):
        tip, _ = log.append(SLUG, [note(f"{batch}-{i}") for i in range(batch + 1)], tip)
    events = log.read(SLUG)
    assert [s.event.seq for s in events] == list(range(1, 17))
    assert tip.seq == 16


def test_a_batch_moves_the_ref_once(repo: pygit2.Repository, repo_path: Path) -> None:
    git(repo_path, "config", "core.logAllRefUpdates", "always")
    log = EventLog(repo)
    tip = start(log)
    before = tip.oid
    tip, stored = log.append(SLUG, [note(str(i)) for i in range(10)], tip)

    moves = [(str(e.oid_old), str(e.oid_new)) for e in repo.references[REF].log()]
    assert moves == [(before, tip.oid), ("0" * 40, before)]
    assert len(stored) == 10
    assert git(repo_path, "rev-list", "--count", REF) == "11"


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_a_batch_with_one_bad_event_appends_nothing(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    tip = start(log)
    bad = ObservationRecorded(phase="implement", text="x").model_copy(update={"text": 7})
    with pytest.raises(InvalidEventError):
        log.append(SLUG, [note("one"), note("two"), Draft(bad), note("four")], tip)
    assert ref_target(repo) == tip.oid
    assert len(log.read(SLUG)) == 1


def test_a_batch_with_a_bad_artifact_name_appends_nothing(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    tip = start(log)
    drafts = [note("one"), Draft(ObservationRecorded(phase="p", text="t"), artifacts={"../x": b""})]
    with pytest.raises(InvalidEventError, match="artifact"):
        log.append(SLUG, drafts, tip)
    assert ref_target(repo) == tip.oid


def test_nothing_to_append_is_refused(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    with pytest.raises(InvalidEventError):
        log.append(SLUG, [], None)
    assert ref_target(repo) is None


# --- artifacts ---------------------------------------------------------------


def test_artifacts_are_blobs_in_the_event_tree(repo: pygit2.Repository, repo_path: Path) -> None:
    log = EventLog(repo)
    tip = start(log)
    plan = "1. round up\n2. reject zero\n"
    submitted = PlanSubmitted(session="s1", plan="plan-r1.md")
    tip, stored = log.append(
        SLUG,
        [
            Draft(
                submitted,
                AgentActor(role="plan", session="s1"),
                {"plan-r1.md": plan.encode(), "transcript-s1.jsonl": b'{"a": 1}\n'},
            )
        ],
        tip,
    )
    oid = stored[0].oid
    assert git(repo_path, "ls-tree", "--name-only", oid) == "artifacts"
    names = git(repo_path, "ls-tree", "--name-only", f"{oid}:artifacts").splitlines()
    assert names == ["plan-r1.md", "transcript-s1.jsonl"]
    assert git(repo_path, "cat-file", "-t", f"{oid}:artifacts/plan-r1.md") == "blob"
    assert git(repo_path, "show", f"{oid}:artifacts/plan-r1.md") == plan.rstrip("\n")

    # Later events (without artifacts) still find it through the chain.
    tip, _ = log.append(SLUG, [note("later")], tip)
    assert log.artifact(tip.oid, "plan-r1.md") == plan.encode()
    assert log.text(tip.oid, "plan-r1.md") == plan
    assert log.text(tip.oid, "transcript-s1.jsonl") == '{"a": 1}\n'
    assert log.artifact(tip.oid, "missing.md") is None
    assert log.text(tip.oid, "missing.md") is None
    assert log.text(tip.oid, None) is None
    assert sorted(log.artifact_names(tip.oid)) == ["plan-r1.md", "transcript-s1.jsonl"]


def test_the_newest_artifact_of_a_name_wins(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    tip = start(log)
    tip, first = log.append(SLUG, [Draft(note("a").payload, artifacts={"r.txt": b"one"})], tip)
    tip, _ = log.append(SLUG, [Draft(note("b").payload, artifacts={"r.txt": b"two"})], tip)
    assert log.artifact(tip.oid, "r.txt") == b"two"
    # Reading at an older tip sees the older artifact.
    assert log.artifact(first[0].oid, "r.txt") == b"one"


def test_events_without_artifacts_use_the_empty_tree(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    log = EventLog(repo)
    tip = start(log)
    log.append(SLUG, [note(str(i)) for i in range(3)], tip)
    trees = set(git(repo_path, "log", "--format=%T", REF).splitlines())
    assert trees == {EMPTY_TREE}


def test_bad_artifact_names_are_refused(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    tip = start(log)
    for name in ("", "a/b", ".hidden", "x" * 200, "sp ace"):
        with pytest.raises(InvalidEventError):
            log.append(SLUG, [Draft(note("x").payload, artifacts={name: b"."})], tip)
    assert ref_target(repo) == tip.oid


# --- compare-and-swap ----------------------------------------------------------


def test_creating_an_existing_build_is_a_concurrent_update(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    tip = start(log)
    with pytest.raises(ConcurrentUpdateError):
        log.append(SLUG, [Draft(created("another goal"))], None)
    assert ref_target(repo) == tip.oid
    assert log.read(SLUG)[0].event.payload == created()


def test_a_stale_tip_is_refused_and_moves_nothing(repo: pygit2.Repository, repo_path: Path) -> None:
    git(repo_path, "config", "core.logAllRefUpdates", "always")
    first, second = EventLog(repo, "runner-a"), EventLog(repo, "runner-b")
    seen = start(first)
    ahead, _ = second.append(SLUG, [note("b wins")], seen)
    reflog = len(list(repo.references[REF].log()))

    with pytest.raises(ConcurrentUpdateError):
        first.append(SLUG, [note("a loses"), note("a loses again")], seen)
    assert ref_target(repo) == ahead.oid
    assert len(list(repo.references[REF].log())) == reflog
    assert [s.event.payload for s in first.read(SLUG)][1:] == [note("b wins").payload]

    # Re-reading the tip and re-appending works.
    tip, _ = first.append(SLUG, [note("a retries")], first.tip(SLUG))
    assert tip.seq == 3


def test_an_expected_tip_for_a_missing_build_is_refused(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    other = start(log, "other-build")
    with pytest.raises(ConcurrentUpdateError):
        log.append(SLUG, [note("x")], other)
    assert ref_target(repo) is None


def test_a_ref_locked_by_another_writer_is_a_concurrent_update(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    log = EventLog(repo)
    tip = start(log)
    lock = repo_path / ".git" / f"{REF}.lock"
    lock.write_text("held by another process\n")
    try:
        with pytest.raises(ConcurrentUpdateError):
            log.append(SLUG, [note("x")], tip)
    finally:
        lock.unlink()
    assert ref_target(repo) == tip.oid


def test_a_lock_on_a_new_build_ref_is_a_concurrent_update(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    lock = repo_path / ".git" / f"{REF}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("held by another process\n")
    try:
        with pytest.raises(ConcurrentUpdateError):
            EventLog(repo).append(SLUG, [Draft(created())], None)
    finally:
        lock.unlink()
    assert ref_target(repo) is None


# --- refusing bad events at append ------------------------------------------


def unchecked(cls: type[BaseModel], **fields: Any) -> BaseModel:
    """A payload built without validation, as a buggy caller might hand one in."""
    return cls.model_construct(**fields)


class Unknown(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: str = "build.exploded"
    reason: str = "?"

    def summary(self) -> str:
        return self.reason


@pytest.mark.parametrize(
    "payload",
    [
        Unknown(),
        Unknown(type="observation.recorded"),  # a known type name on a foreign model
        {"type": "observation.recorded", "phase": "p", "text": "t"},
        "observation.recorded",
        None,
        unchecked(ObservationRecorded, phase="p"),  # text missing
        ObservationRecorded(phase="p", text="t").model_copy(update={"phase": ["not", "a", "str"]}),
        unchecked(BuildCreated, goal="g", base_ref="m", base_sha="a", branch="b", source="x"),
    ],
    ids=[
        "unknown-type",
        "foreign-model",
        "dict",
        "str",
        "none",
        "missing-field",
        "wrong-type",
        "bad-literal",
    ],
)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_unknown_or_invalid_payloads_are_refused(
    repo: pygit2.Repository, repo_path: Path, payload: object
) -> None:
    log = EventLog(repo)
    tip = start(log)
    objects = all_objects(repo_path)
    with pytest.raises(InvalidEventError) as info:
        log.append(SLUG, [Draft(payload)], tip)
    assert str(info.value)  # one clear line
    assert ref_target(repo) == tip.oid
    # Refused before anything was written.
    assert all_objects(repo_path) == objects


def test_an_invalid_first_event_creates_no_build(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    with pytest.raises(InvalidEventError):
        log.append(SLUG, [Draft(Unknown())], None)
    assert ref_target(repo) is None
    assert log.slugs() == []


# --- reading malformed logs -----------------------------------------------------


def hand_made(repo_path: Path, message: str, parent: str | None = None) -> str:
    """An event commit written with the git CLI, as a person or another tool might."""
    args = ["commit-tree", EMPTY_TREE, "-m", message]
    if parent:
        args += ["-p", parent]
    return git(repo_path, *args)


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ("just a commit", "not an agentrun event"),
        ("observation.recorded: x\n\n{not json", "not an agentrun event"),
        ("observation.recorded: x\n\n[1, 2]", "not an agentrun event"),
        ('x: y\n\n{"v": 1, "seq": 2, "type": "build.exploded"}', "unknown event type"),
        (
            'observation.recorded: x\n\n{"v": 1, "seq": 2, "type": "observation.recorded", '
            '"ts": "2026-01-01T00:00:00Z", "actor": {"kind": "kernel"}, "writer": "w", '
            '"payload": {"phase": "p"}}',
            "malformed observation.recorded",
        ),
        (
            'observation.recorded: x\n\n{"v": 99, "seq": 2, "type": "observation.recorded", '
            '"ts": "2026-01-01T00:00:00Z", "actor": {"kind": "kernel"}, "writer": "w", '
            '"payload": {"phase": "p", "text": "t"}}',
            "upgrade agentrun",
        ),
        (
            'observation.recorded: x\n\n{"seq": 2, "type": "observation.recorded", '
            '"ts": "2026-01-01T00:00:00Z", "actor": {"kind": "kernel"}, "writer": "w", '
            '"payload": {"phase": "p", "text": "t"}}',
            "commit",
        ),
    ],
    ids=[
        "no-body",
        "bad-json",
        "not-object",
        "unknown-type",
        "bad-payload",
        "newer-schema",
        "no-schema",
    ],
)
def test_a_malformed_commit_is_named_when_read(
    repo: pygit2.Repository, repo_path: Path, message: str, why: str
) -> None:
    log = EventLog(repo)
    tip = start(log)
    tip, _ = log.append(SLUG, [note("fine")], tip)
    bad = hand_made(repo_path, message, tip.oid)
    git(repo_path, "update-ref", REF, bad, tip.oid)

    with pytest.raises(MalformedEventError, match=why) as info:
        log.read(SLUG)
    assert bad[:12] in str(info.value)
    with pytest.raises(MalformedEventError, match=bad[:12]):
        log.tip(SLUG)
    # The good part of the log still reads up to the last good event.
    assert len(log.read(SLUG, tip.oid)) == 2


def test_a_malformed_commit_in_the_middle_is_named(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    log = EventLog(repo)
    tip = start(log)
    bad = hand_made(repo_path, "hello\n\nworld", tip.oid)
    good_msg = git(repo_path, "log", "-1", "--format=%B", tip.oid)
    after = hand_made(repo_path, good_msg.replace('"seq": 1', '"seq": 3'), bad)
    git(repo_path, "update-ref", REF, after, tip.oid)
    with pytest.raises(MalformedEventError, match=bad[:12]):
        log.read(SLUG)


# --- slugs -------------------------------------------------------------------


@pytest.mark.parametrize(
    "slug",
    [
        "",
        "Upper",
        "has space",
        "-leading-dash",
        ".hidden",
        "a..b",
        "../escape",
        "a/b",
        "ends.lock",
        "ends.",
        "x" * 81,
        "tab\tin",
        "new\nline",
        "ü",
    ],
)
def test_bad_slugs_are_refused(repo: pygit2.Repository, slug: str) -> None:
    log = EventLog(repo)
    with pytest.raises(UnknownBuildError):
        check_slug(slug)
    with pytest.raises(UnknownBuildError):
        build_ref(slug)
    with pytest.raises(UnknownBuildError):
        log.append(slug, [Draft(created())], None)
    with pytest.raises(UnknownBuildError):
        log.tip_oid(slug)
    assert [r for r in repo.references if r.startswith("refs/agentrun/")] == []


@pytest.mark.parametrize("slug", ["b-3f9c2a", "issue-42-fix-login-redirect", "v1.2_x", "x" * 80])
def test_good_slugs_are_accepted(repo: pygit2.Repository, slug: str) -> None:
    log = EventLog(repo)
    start(log, slug)
    assert log.slugs() == [slug]
    assert repo.references.get(f"refs/agentrun/builds/{slug}") is not None


def test_reading_an_unknown_build_says_how_to_list_builds(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    assert log.tip(SLUG) is None
    with pytest.raises(UnknownBuildError, match="git agentrun status"):
        log.read(SLUG)


def test_a_build_log_is_invisible_to_branches_and_tags(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    start(EventLog(repo))
    assert git(repo_path, "branch", "--list") == "* main"
    assert git(repo_path, "tag", "--list") == ""
    assert subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", "refs/agentrun/"],
        cwd=repo_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split() == [REF]


def test_a_seq_that_does_not_follow_its_parent_is_named(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    """seq is the parent's + 1: a log with a gap was not appended by agentrun."""
    log = EventLog(repo)
    created = BuildCreated(goal="g", base_ref="main", base_sha="0" * 40, branch="agentrun/gap")
    tip, _ = log.append("gap", [Draft(created)], None)
    wrong = Tip(tip.oid, 4)  # pretend the parent was seq 4: the event says 5
    tip, stored = log.append("gap", [Draft(BuildPauseRequested())], wrong)
    with pytest.raises(
        MalformedEventError, match=f"commit {stored[0].oid[:12]} has seq 5 after seq 1"
    ):
        log.read("gap")
