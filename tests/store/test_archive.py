"""Archiving finished builds: the log stays reachable after its ref is deleted (DESIGN §2)."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from conftest import git

from agentrun.errors import ConcurrentUpdateError
from agentrun.events import BuildCompleted, BuildCreated, HumanActor, ObservationRecorded
from agentrun.kernel.draft import Draft
from agentrun.store.archive import ARCHIVE_REF, archive, archived
from agentrun.store.lease import acquire, read_lease
from agentrun.store.log import EventLog


def finished_build(log: EventLog, slug: str, extra: int = 2) -> str:
    created = BuildCreated(goal=f"goal of {slug}", base_ref="main", base_sha="a" * 40, branch=slug)
    drafts = [Draft(created, HumanActor(login="ada"))]
    drafts += [Draft(ObservationRecorded(phase="implement", text=str(i))) for i in range(extra)]
    drafts.append(Draft(BuildCompleted()))
    tip, _ = log.append(slug, drafts, None)
    return tip.oid


def test_archive_moves_a_build(repo: pygit2.Repository, repo_path: Path) -> None:
    log = EventLog(repo)
    tip = finished_build(log, "done-build")
    events = log.read("done-build")

    assert archive(repo, "done-build", "complete") == tip
    assert repo.references.get("refs/agentrun/builds/done-build") is None
    assert log.slugs() == []
    assert archived(repo) == {"done-build": tip}
    assert log.read("done-build", tip) == events

    # The archive commit names the build and keeps its last event as a parent.
    parents = git(repo_path, "rev-list", "--parents", "-1", ARCHIVE_REF).split()[1:]
    assert tip in parents
    assert git(repo_path, "log", "-1", "--format=%s", ARCHIVE_REF) == "archive: done-build"


def test_archived_events_survive_gc(repo: pygit2.Repository, repo_path: Path) -> None:
    log = EventLog(repo)
    tip = finished_build(log, "done-build", extra=5)
    archive(repo, "done-build", "complete")
    git(repo_path, "reflog", "expire", "--expire=now", "--all")
    git(repo_path, "gc", "-q", "--prune=now")
    fresh = pygit2.Repository(str(repo_path))
    assert [s.event.seq for s in EventLog(fresh).read("done-build", tip)] == list(range(1, 8))
    assert tip in git(repo_path, "rev-list", ARCHIVE_REF).split()


def test_a_second_archive_of_the_same_build_is_refused(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    tip = finished_build(log, "done-build")
    archive(repo, "done-build", "complete")
    archive_tip = str(repo.references[ARCHIVE_REF].target)
    with pytest.raises(ConcurrentUpdateError, match="done-build"):
        archive(repo, "done-build", "complete")
    assert str(repo.references[ARCHIVE_REF].target) == archive_tip
    assert archived(repo) == {"done-build": tip}


def test_archiving_several_builds_keeps_all(repo: pygit2.Repository, repo_path: Path) -> None:
    log = EventLog(repo)
    tips = {slug: finished_build(log, slug, extra=n) for n, slug in enumerate(["a", "b", "c"])}
    live = finished_build(log, "still-running")
    for slug in tips:
        archive(repo, slug, "complete")
    assert archived(repo) == tips
    assert log.slugs() == ["still-running"]
    assert log.tip_oid("still-running") == live
    for slug, tip in tips.items():
        assert log.read(slug, tip)[0].event.payload.type == "build.created"
    # One archive commit per build, each a merge of the previous archive and the build tip.
    chain = git(repo_path, "log", "--first-parent", "--format=%s %P", ARCHIVE_REF).splitlines()
    named = [line.split() for line in chain if not line.startswith("archive: root")]
    assert [words[1] for words in named] == ["c", "b", "a"]
    assert [words[3] for words in named] == [tips["c"], tips["b"], tips["a"]]


def test_archive_drops_a_stale_lease(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    finished_build(log, "done-build")
    acquire(repo, "done-build", "runner-a", ttl=-3600)  # expired an hour ago
    archive(repo, "done-build", "complete")
    assert read_lease(repo, "done-build") is None


def test_archive_leaves_a_live_runner_its_lease(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    finished_build(log, "done-build")
    lease = acquire(repo, "done-build", "runner-a")
    archive(repo, "done-build", "complete")
    held = read_lease(repo, "done-build")
    assert held is not None and held[0] == lease.oid


def test_a_rebuilt_slug_can_be_archived_again(repo: pygit2.Repository) -> None:
    """A slug reused after an archive: the newest archive entry names the newest log."""
    log = EventLog(repo)
    finished_build(log, "reused")
    archive(repo, "reused", "complete")
    second = finished_build(log, "reused", extra=4)
    archive(repo, "reused", "failed")
    assert archived(repo) == {"reused": second}


def test_nothing_archived_yet(repo: pygit2.Repository) -> None:
    assert archived(repo) == {}
    with pytest.raises(ConcurrentUpdateError):
        archive(repo, "never-existed", "complete")
    assert repo.references.get(ARCHIVE_REF) is None
