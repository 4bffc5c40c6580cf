"""Runners of one build in one clone (the build's and its tasks') fetch into the same
tracking refs: a fetch that finds one locked by another process tries again."""

from __future__ import annotations

import threading
from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo

from agentrun.store.transport import Remote, SyncError


def clone_with_a_tracked_ref(tmp_path: Path) -> tuple[pygit2.Repository, Path]:
    seed = make_repo(tmp_path / "seed")
    git(seed, "update-ref", "refs/agentrun/builds/x", "HEAD")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    git(bare, "update-ref", "refs/agentrun/builds/x", "HEAD")
    git(tmp_path, "clone", "-q", bare.as_uri(), "here")
    here = tmp_path / "here"
    lock = here / ".git/refs/agentrun-remotes/origin/builds/x.lock"
    lock.parent.mkdir(parents=True)
    return pygit2.Repository(str(here)), lock


def test_a_fetch_waits_out_a_tracking_ref_another_process_holds(tmp_path: Path) -> None:
    repo, lock = clone_with_a_tracked_ref(tmp_path)
    lock.write_text("")  # what git leaves while another fetch updates the ref
    released = threading.Timer(0.3, lock.unlink)
    released.start()
    Remote(repo, "origin").fetch()
    released.join()
    assert Remote(repo, "origin").seen("builds/x") == str(repo.revparse_single("HEAD").id)


def test_a_lock_that_stays_is_one_line(tmp_path: Path) -> None:
    repo, lock = clone_with_a_tracked_ref(tmp_path)
    lock.write_text("")
    with pytest.raises(SyncError) as caught:
        Remote(repo, "origin").fetch()
    said = str(caught.value)
    assert "a ref of this clone stayed locked" in said and str(lock) in said
    assert "\n" not in said
