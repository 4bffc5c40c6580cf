"""A build's config snapshot is read by every later release (DESIGN §13)."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from agentrun.config import parse_config
from agentrun.errors import MalformedEventError
from agentrun.events import BuildCreated, HumanActor
from agentrun.kernel.draft import Draft
from agentrun.snapshot import SNAPSHOT_VERSION, read, snapshot
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

CONFIG = """
[roles]
default = ["mine"]

[runtimes.mine]
kind = "command"
command = ["python3", "agent.py"]

[policy]
max_review_rounds = 5

[[verify]]
name = "tests"
command = "pytest -q"
"""


def test_a_snapshot_reads_back_as_its_config() -> None:
    config = parse_config(CONFIG, "test")
    data = snapshot(config)
    assert data["snapshot"] == SNAPSHOT_VERSION
    assert read(data) == config


def test_an_old_snapshot_with_keys_this_release_dropped_still_replays(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    """Keys a later release dropped or renamed, and values it refuses, do not stop replay."""
    data = snapshot(parse_config(CONFIG, "test"))
    data["telemetry"] = {"enabled": True}  # a section that no longer exists
    data["policy"] = {**data["policy"], "old_knob": 1, "max_phase_attempts": "many"}
    data["verify"] = [{**data["verify"][0], "shell": "bash"}]
    data["runtimes"]["gone"] = {"kind": "a-kind-that-was-removed", "command": ["x"]}
    created = BuildCreated(
        goal="old", base_ref="main", base_sha=str(repo.head.target), branch="b", config=data
    )
    EventLog(repo).append("old", [Draft(created, HumanActor(login="me"))], None)

    _, state = load_state(EventLog(repo), StateCache(repo), "old")

    assert state.config.policy.max_review_rounds == 5  # what it still knows is kept
    assert state.config.policy.max_phase_attempts == 2  # a refused value: its default
    assert [step.command for step in state.config.verify] == ["pytest -q"]
    assert set(state.config.runtimes) == {"mine"}
    assert state.config.roles["default"] == ("mine",)


def test_a_snapshot_newer_than_this_release_says_upgrade() -> None:
    with pytest.raises(MalformedEventError, match="upgrade agentrun"):
        read({"snapshot": SNAPSHOT_VERSION + 1})


@pytest.mark.parametrize("version", [0, -1, True, "1", None, 1.0])
def test_a_snapshot_version_that_is_no_count_is_refused(version: object) -> None:
    with pytest.raises(MalformedEventError) as err:
        read({"snapshot": version}, "build b's config")
    assert str(err.value) == f"build b's config has no valid snapshot version ({version!r})"


def test_a_snapshot_without_a_version_is_of_the_first() -> None:
    """Release 0.1.0 wrote no version: its snapshots are version 1."""
    config = parse_config(CONFIG, "test")
    assert read(config.model_dump(mode="json")) == config
