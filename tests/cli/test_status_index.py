"""``status`` reads the summary index (store/summary.py) and stays the log's word: a log
moved behind the index's back, a deleted, corrupt, foreign or unwritable index, leases
taken and released, archived builds. Real repositories; the CLI in-process, and as a real
process where what it imports is the point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pygit2
import pytest
from click.testing import CliRunner
from conftest import git
from runner.helpers import cli_env, configure

from agentrun.cli.main import cli
from agentrun.commands import status
from agentrun.commands.build import create_build, run_build
from agentrun.events import (
    BuildCompleted,
    BuildCreated,
    EscalationRaised,
    HumanActor,
    PlanStarted,
)
from agentrun.kernel.draft import Draft
from agentrun.store import archive, lease, log, summary, transport
from agentrun.store.log import EventLog

QUESTION = "Which colour should the button be?"


@pytest.fixture
def here(repo_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(repo_path)
    return repo_path


def new_build(repo: pygit2.Repository, slug: str, *, done: bool = False) -> str:
    created = BuildCreated(goal=f"goal of {slug}", base_ref="main", base_sha="a" * 40, branch=slug)
    drafts = [Draft(created, HumanActor(login="ada")), Draft(PlanStarted(round=1))]
    if done:
        drafts.append(Draft(BuildCompleted()))
    return EventLog(repo).append(slug, drafts, None)[0].oid


def ask(repo: pygit2.Repository, slug: str) -> str:
    """An escalation appended straight to the log, as no status-aware writer would."""
    raised = EscalationRaised(
        id="e1", phase="plan", round=1, source="policy", cause="policy", question=QUESTION
    )
    found = EventLog(repo).tip(slug)
    return EventLog(repo).append(slug, [Draft(raised)], found)[0].oid


def three_builds(repo: pygit2.Repository) -> None:
    new_build(repo, "running-one")
    new_build(repo, "parked-one")
    ask(repo, "parked-one")
    new_build(repo, "old-one", done=True)
    archive.archive(repo, "old-one", "complete")


def status_out(*args: str) -> str:
    result = CliRunner().invoke(cli, ["status", *args], catch_exceptions=False)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    return result.stdout


def by_slug(out: str) -> dict[str, dict[str, Any]]:
    return {b["slug"]: b for b in json.loads(out)["builds"]}


def index_of(repo_path: Path) -> Path:
    return repo_path / ".git" / "agentrun" / summary.NAME


def test_the_index_gives_what_the_logs_give(here: Path, repo: pygit2.Repository) -> None:
    three_builds(repo)

    cold = status_out("--json")  # no index yet: every log read, the index written

    assert index_of(here).exists()
    assert status_out("--json") == cold
    document = json.loads(cold)
    assert json.dumps(document, indent=2, ensure_ascii=False) + "\n" == cold
    builds = by_slug(cold)
    assert list(builds) == ["old-one", "parked-one", "running-one"]  # newest first
    assert [b["state"] for b in builds.values()] == ["complete", "parked", "stopped"]
    assert [b["archived"] for b in builds.values()] == [True, False, False]
    assert builds["parked-one"]["escalation"] == {"id": "e1", "question": QUESTION, "phase": "plan"}
    assert document["unreadable"] == []
    table = status_out()
    index_of(here).unlink()
    assert status_out() == table
    assert status_out("--json") == cold


def test_a_log_moved_behind_the_index_is_read_again(here: Path, repo: pygit2.Repository) -> None:
    first = new_build(repo, "build")
    assert by_slug(status_out("--json"))["build"]["state"] == "stopped"

    ask(repo, "build")  # the index is not told
    moved = by_slug(status_out("--json"))["build"]
    assert (moved["state"], moved["escalation"]["id"]) == ("parked", "e1")

    git(here, "update-ref", "refs/agentrun/builds/build", first)  # rewound by hand
    back = by_slug(status_out("--json"))["build"]
    assert (back["state"], back["escalation"]) == ("stopped", None)
    assert status_out().splitlines()[1].split()[:2] == ["build", "stopped"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2 + 7],  # torn
        lambda data: b"\x00\xff garbage\n" + data.replace(b'"stopped"', b'"complete"'),
        lambda data: data.replace(b"\n[", b"\n[[", 3),
        lambda data: b"",
    ],
)
def test_a_damaged_index_shows_nothing_wrong(
    here: Path, repo: pygit2.Repository, damage: Any
) -> None:
    three_builds(repo)
    truth = status_out("--json")
    file = index_of(here)
    file.write_bytes(damage(file.read_bytes()))

    assert status_out("--json") == truth
    assert len(summary.load(str(file.parent)).builds) == 3  # and it is whole again


def test_a_record_of_another_release_or_edited_by_hand_is_not_used(
    here: Path, repo: pygit2.Repository
) -> None:
    tip = new_build(repo, "build")
    truth = status_out("--json")
    made = summary.entry(
        {
            "row": {**by_slug(truth)["build"], "state": "complete", "phase": "done"},
            "status": "complete",
            "approval": False,
            "cells": ["build", "done", "1", "-", "-", "0", "-"],
            "tasks": [],
        }
    )
    record = summary._build("build", tip, made)
    other = record.replace(summary.KEY, "0.0.1/1")  # another release: its crc is right
    head, _, text = other.partition("\n")
    crc = summary._crc(head, text[:-1])
    other = f"{head[: head.rfind(',')]},{crc}]\n{text}"
    for forged in (other, record.replace('"complete"', '"running"', 1)):
        index_of(here).write_text(forged)
        assert by_slug(status_out("--json"))["build"]["state"] == "stopped"
    index_of(here).write_text(record)  # whole, of this release, at the log's tip: used
    assert by_slug(status_out("--json"))["build"]["state"] == "complete"


def test_leases_are_read_live(here: Path, repo: pygit2.Repository) -> None:
    new_build(repo, "build")
    status_out()
    held = lease.acquire(repo, "build", "r-test")
    row = by_slug(status_out("--json"))["build"]
    assert (row["state"], row["runner"]) == ("running", held.info.holder + "@" + held.info.host)
    held.release()
    row = by_slug(status_out("--json"))["build"]
    assert (row["state"], row["runner"]) == ("stopped", None)


def test_the_append_path_keeps_the_index(here: Path, repo: pygit2.Repository) -> None:
    new_build(repo, "build")
    status_out()
    paused = CliRunner().invoke(cli, ["pause", "build"], catch_exceptions=False)
    assert paused.exit_code == 0, paused.output
    tip = str(repo.references["refs/agentrun/builds/build"].target)
    found = summary.load(str(index_of(here).parent)).entry("build", tip)
    assert found is not None and found["state"] == "paused"
    assert by_slug(status_out("--json"))["build"]["state"] == "paused"


def test_a_runner_keeps_the_index_as_it_appends(here: Path, repo: pygit2.Repository) -> None:
    configure(here, [{"phase": "implement", "write": {"app.py": "VALUE = 1\n"}}])
    slug = create_build(repo, "Add the app").slug
    assert run_build(repo, slug).state.state_name == "complete"
    tip = str(repo.references[f"refs/agentrun/builds/{slug}"].target)
    found = summary.load(str(index_of(here).parent)).entry(slug, tip)
    assert found is not None and found["state"] == "complete"
    assert imported(here) == []  # so status reads no log


def test_an_index_that_cannot_be_written_changes_nothing(
    here: Path, repo: pygit2.Repository
) -> None:
    three_builds(repo)
    truth = status_out("--json")
    file = index_of(here)
    file.unlink()
    file.mkdir()  # neither read nor written, as in a read-only .git
    assert status_out("--json") == truth
    ask(repo, "running-one")
    assert by_slug(status_out("--json"))["running-one"]["state"] == "parked"
    assert list(file.iterdir()) == []


def test_archiving_and_live_only(here: Path, repo: pygit2.Repository) -> None:
    three_builds(repo)
    status_out()
    tip = archive.archive(repo, "running-one", "complete")
    builds = by_slug(status_out("--json"))
    assert (builds["running-one"]["archived"], builds["running-one"]["state"]) == (True, "running")
    index = summary.load(str(index_of(here).parent))
    assert ("running-one", tip) in (
        index.archived_at(str(repo.references[archive.ARCHIVE_REF].target)) or []
    )
    ask(repo, "parked-one")
    assert list(by_slug(status_out("--json", "--live-only"))) == ["parked-one"]
    index = summary.load(str(index_of(here).parent))  # the archived set is kept
    assert index.archived_at(str(repo.references[archive.ARCHIVE_REF].target)) is not None


def test_an_unreadable_log_is_named_and_hides_no_other(here: Path, repo: pygit2.Repository) -> None:
    new_build(repo, "good")
    blob = repo.create_blob(b"not an event")
    repo.references.create("refs/agentrun/builds/broken", blob)
    for _ in range(2):  # the second time with an index that holds the good one
        result = CliRunner().invoke(cli, ["status", "--json"], catch_exceptions=False)
        assert result.exit_code == 1
        document = json.loads(result.stdout)
        assert [b["slug"] for b in document["builds"]] == ["good"]
        assert [u["slug"] for u in document["unreadable"]] == ["broken"]
        assert "cannot be read" in result.stderr


IMPORTS = """
import sys
from agentrun.cli.main import cli
try:
    cli.main(sys.argv[1:], prog_name="git agentrun")
except SystemExit:
    pass
heavy = ("pydantic", "pygit2", "psutil", "agentrun.events", "agentrun.kernel", "rich")
print(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy), file=sys.stderr)
"""


def imported(repo_path: Path, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS, "status", *args],
        cwd=repo_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stderr.splitlines()[-1].replace("'", '"'))
    return found


def test_a_fresh_index_is_read_without_the_models(here: Path, repo: pygit2.Repository) -> None:
    three_builds(repo)
    assert "pydantic" in imported(here)  # no index yet: the logs are read
    assert imported(here) == []
    assert imported(here, "--json") == []
    assert imported(here, "--live-only") == []


def test_the_refs_status_reads_are_the_stores() -> None:
    assert status.BUILDS == log.BUILDS
    assert status.ARCHIVE_REF == archive.ARCHIVE_REF
    assert status.LEASES == lease.LEASES
    assert status.TASK_LEASES == lease.TASK_LEASES
    assert status.TRACKED == transport.TRACKED
