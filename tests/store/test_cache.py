"""The reduced-state cache under ``.git/agentrun/cache/`` (DESIGN §2): disposable, incremental."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
from conftest import git

from agentrun.events import (
    BuildCreated,
    CodeReviewStarted,
    CodeReviewVerdict,
    HumanActor,
    ImplementCompleted,
    ImplementStarted,
    ObservationRecorded,
    SessionEnded,
    SessionStarted,
)
from agentrun.kernel.decide import decide
from agentrun.kernel.draft import Draft
from agentrun.kernel.evolve import evolve, replay
from agentrun.kernel.state import BuildState, initial_state
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog, Tip

SLUG = "long-build"


def created(goal: str = "a long build") -> Draft:
    payload = BuildCreated(goal=goal, base_ref="main", base_sha="a" * 40, branch=f"agentrun/{SLUG}")
    return Draft(payload, HumanActor(login="ada"))


def started(session: str, phase: str, n: int) -> SessionStarted:
    return SessionStarted(session=session, role=phase, runtime="x", phase=phase, round=n)


def round_of(n: int) -> list[Draft]:
    """One implement/code-review round with its sessions and some observations."""
    impl, review = f"s{n}-impl", f"s{n}-review"
    drafts = [
        Draft(ImplementStarted(round=n)),
        Draft(started(impl, "implement", n)),
        Draft(SessionEnded(session=impl, outcome="ok", head=f"{n:040x}")),
        Draft(ImplementCompleted(round=n, head=f"{n:040x}", changed_paths=("a.py",))),
        Draft(CodeReviewStarted(round=n)),
        Draft(started(review, "code-review", n)),
        Draft(CodeReviewVerdict(session=review, round=n, verdict="revise", findings=(f"f{n}",))),
        Draft(SessionEnded(session=review, outcome="ok")),
    ]
    drafts += [Draft(ObservationRecorded(phase="implement", text=f"{n}.{i}")) for i in range(4)]
    return drafts


def grow(log: EventLog, tip: Tip | None, rounds: range) -> Tip:
    drafts = [d for n in rounds for d in round_of(n)]
    if tip is None:
        drafts.insert(0, created())
    new, _ = log.append(SLUG, drafts, tip)
    return new


def full_replay(log: EventLog, slug: str = SLUG, tip: str | None = None) -> BuildState:
    return replay(slug, [s.event for s in log.read(slug, tip)])


def cache_file(repo_path: Path, slug: str = SLUG) -> Path:
    return repo_path / ".git" / "agentrun" / "cache" / f"{slug}.json"


def poison(path: Path, goal: str) -> None:
    """Mark the cached state so a test can tell whether it was used."""
    raw = json.loads(path.read_text())
    raw["state"]["goal"] = goal
    path.write_text(json.dumps(raw))


def test_the_cache_lives_under_dot_git(repo: pygit2.Repository, repo_path: Path) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    tip = grow(log, None, range(1, 4))
    got_tip, state = load_state(log, cache, SLUG)
    assert got_tip == tip.oid
    path = cache_file(repo_path)
    assert cache.root == repo_path / ".git" / "agentrun" / "cache"
    assert path.is_file()
    raw = json.loads(path.read_text())
    assert raw["tip"] == tip.oid
    assert BuildState.model_validate(raw["state"]) == state
    assert [p.name for p in cache.root.iterdir()] == [f"{SLUG}.json"]  # no temp files left
    # Not in the worktree: nothing for `git status` to see.
    assert git(repo_path, "status", "--porcelain") == ""


def test_load_state_equals_a_full_replay(repo: pygit2.Repository) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    tip = grow(log, None, range(1, 51))
    _, state = load_state(log, cache, SLUG)
    assert state == full_replay(log)
    assert state.seq == tip.seq == 601
    assert state.impl_round == 51
    assert state.sessions == 100
    assert len(state.observations) == 200


def test_load_state_applies_only_the_new_events(repo: pygit2.Repository, repo_path: Path) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    tip = grow(log, None, range(1, 51))
    load_state(log, cache, SLUG)
    poison(cache_file(repo_path), "from the cache")

    # Unchanged tip: the cached state as it is.
    assert load_state(log, cache, SLUG)[1].goal == "from the cache"

    # New events: folded onto the cached state, not replayed from the start.
    tip = grow(log, tip, range(51, 61))
    got_tip, state = load_state(log, cache, SLUG)
    assert got_tip == tip.oid
    assert state.goal == "from the cache"
    honest = full_replay(log)
    assert state.model_copy(update={"goal": honest.goal}) == honest
    assert json.loads(cache_file(repo_path).read_text())["tip"] == tip.oid


def test_incremental_and_full_replay_agree_step_by_step(repo: pygit2.Repository) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    tip = grow(log, None, range(1, 2))
    for n in range(2, 12):
        tip = grow(log, tip, range(n, n + 1))
        _, state = load_state(log, cache, SLUG)
        assert state == full_replay(log)
        assert decide(state) == decide(full_replay(log))
    fold = initial_state(SLUG)
    for stored in log.read(SLUG):
        fold = evolve(fold, stored.event)
    assert load_state(log, cache, SLUG)[1] == fold


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00\xff garbage",
        b"{not json",
        b"[]",
        b'{"tip": "abc"}',
        b'{"state": {}}',
        b'{"tip": "abc", "state": {"slug": 5}}',
        b'{"tip": "abc", "state": {"slug": "x", "unknown_field": 1}}',
    ],
    ids=["empty", "binary", "bad-json", "list", "no-state", "no-tip", "bad-state", "extra-field"],
)
def test_a_corrupt_cache_is_ignored(
    repo: pygit2.Repository, repo_path: Path, content: bytes
) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    tip = grow(log, None, range(1, 6))
    load_state(log, cache, SLUG)
    cache_file(repo_path).write_bytes(content)

    got_tip, state = load_state(log, cache, SLUG)
    assert got_tip == tip.oid
    assert state == full_replay(log)
    # And rewritten whole.
    assert json.loads(cache_file(repo_path).read_text())["tip"] == tip.oid


def test_a_cache_from_a_rewritten_log_is_ignored(repo: pygit2.Repository, repo_path: Path) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    grow(log, None, range(1, 11))
    load_state(log, cache, SLUG)
    poison(cache_file(repo_path), "from the old log")

    # The log is rewritten: same slug, a different history (as after a re-parent).
    repo.references.delete(f"refs/agentrun/builds/{SLUG}")
    new, _ = log.append(SLUG, [created("the new goal"), *round_of(1)], None)
    got_tip, state = load_state(log, cache, SLUG)
    assert got_tip == new.oid
    assert state.goal == "the new goal"
    assert state == full_replay(log)


def test_a_cache_whose_tip_was_pruned_is_ignored(repo: pygit2.Repository, repo_path: Path) -> None:
    """The log was rewritten and `git gc` pruned the old chain the cache still names."""
    log, cache = EventLog(repo), StateCache(repo)
    grow(log, None, range(1, 4))
    old_tip, _ = load_state(log, cache, SLUG)
    repo.references.delete(f"refs/agentrun/builds/{SLUG}")
    new, _ = log.append(SLUG, [created("the new goal"), *round_of(1)], None)
    git(repo_path, "reflog", "expire", "--expire=now", "--all")
    git(repo_path, "gc", "-q", "--prune=now")
    fresh = pygit2.Repository(str(repo_path))
    assert old_tip not in fresh
    assert json.loads(cache_file(repo_path).read_text())["tip"] == old_tip

    got_tip, state = load_state(EventLog(fresh), StateCache(fresh), SLUG)
    assert got_tip == new.oid
    assert state.goal == "the new goal"
    assert state == full_replay(EventLog(fresh))


def test_a_state_at_an_older_tip(repo: pygit2.Repository) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    old = grow(log, None, range(1, 3))
    grow(log, old, range(3, 6))
    load_state(log, cache, SLUG)  # the cache now holds the newest tip
    got_tip, state = load_state(log, cache, SLUG, old.oid)
    assert got_tip == old.oid
    assert state == full_replay(log, tip=old.oid)
    assert state.seq == old.seq


def test_builds_have_their_own_cache_files(repo: pygit2.Repository, repo_path: Path) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    grow(log, None, range(1, 3))
    other = created("another build")
    log.append("other-build", [other], None)
    assert load_state(log, cache, SLUG)[1].goal == "a long build"
    assert load_state(log, cache, "other-build")[1].goal == "another build"
    assert cache_file(repo_path).is_file()
    assert cache_file(repo_path, "other-build").is_file()


def test_a_deleted_cache_folder_is_rebuilt(repo: pygit2.Repository, repo_path: Path) -> None:
    log, cache = EventLog(repo), StateCache(repo)
    grow(log, None, range(1, 3))
    load_state(log, cache, SLUG)
    for path in cache.root.iterdir():
        path.unlink()
    cache.root.rmdir()
    assert load_state(log, cache, SLUG)[1] == full_replay(log)
    assert cache_file(repo_path).is_file()


def test_a_linked_worktree_shares_the_main_cache(repo: pygit2.Repository, repo_path: Path) -> None:
    log = EventLog(repo)
    grow(log, None, range(1, 3))
    worktree = repo_path.parent / "wt"
    git(repo_path, "worktree", "add", "-q", "-b", "side", str(worktree))
    through_worktree = pygit2.Repository(str(worktree))
    cache = StateCache(through_worktree)
    assert cache.root == repo_path / ".git" / "agentrun" / "cache"
    _, state = load_state(EventLog(through_worktree), cache, SLUG)
    assert state == full_replay(log)
    assert cache_file(repo_path).is_file()
