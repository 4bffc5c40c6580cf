"""``git agentrun sync [REMOTE]``: exact exit codes and output."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner, Result
from conftest import git, make_repo

from agentrun.cli.main import cli
from agentrun.events import BuildCreated
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

SLUG = "b-1"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    seed = make_repo(tmp_path / "seed")
    git(tmp_path, "clone", "-q", "--bare", str(seed), "remote.git")
    git(tmp_path, "clone", "-q", (tmp_path / "remote.git").as_uri(), "a")
    monkeypatch.chdir(tmp_path / "a")
    return tmp_path / "a"


def test_sync_with_nothing_to_do_says_up_to_date(clone: Path) -> None:
    done = invoke("sync")
    assert (done.exit_code, done.output) == (0, "up to date with origin\n")


def test_sync_pushes_a_build_then_is_up_to_date(clone: Path) -> None:
    repo = pygit2.Repository(str(clone))
    created = BuildCreated(
        goal="g", base_ref="main", base_sha=str(repo.head.target), branch=f"agentrun/{SLUG}"
    )
    EventLog(repo).append(SLUG, [Draft(created)], None)
    done = invoke("sync", "origin")
    assert (done.exit_code, done.output) == (0, f"build {SLUG}: pushed 1 event\n")
    done = invoke("sync")
    assert (done.exit_code, done.output) == (0, f"build {SLUG}: up to date\n")


def test_sync_with_an_unknown_remote_exits_1(clone: Path) -> None:
    done = CliRunner().invoke(cli, ["sync", "nowhere"], catch_exceptions=False)
    assert done.exit_code == 1
    assert done.output == (
        "agentrun: no remote named 'nowhere' (remotes here: origin); "
        "add it with `git remote add nowhere URL`\n"
    )
