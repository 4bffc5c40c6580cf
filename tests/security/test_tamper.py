"""Without isolation an agent can write the repository's refs: the runner notices (item 3).

A real ``git agentrun run`` with a ``command`` agent that, during implement, forges a
kernel event, rewinds or deletes the build's log, deletes the build branch, or moves
the user's ``main``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure, run_cli, types
from security.hostile import hostile_agent

from agentrun.store.log import EventLog

GOAL = "add a feature"


def started_slug(stdout: str) -> str:
    found = re.search(r"^build (\S+) from ", stdout, re.MULTILINE)
    assert found, stdout
    return found.group(1)


def said(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("agentrun:")]


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("forge", r"a build\.completed event \(commit [0-9a-f]{10}\) appeared in its log"),
        ("rewind", r"its log was rewritten: the tip [0-9a-f]{10} does not descend from"),
        ("delete-log", r"its log refs/agentrun/builds/\S+ was deleted"),
        ("delete-branch", r"its branch agentrun/\S+ was deleted"),
    ],
)
def test_an_agent_that_rewrites_the_builds_refs_stops_it(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository, mode: str, why: str
) -> None:
    base, state = hostile_agent(tmp_path, mode)
    configure(repo_path, base=base)

    done = run_cli(repo_path, "run", GOAL, timeout=120)

    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = said(done.stderr)
    assert re.search(r"^agentrun: build \S+ stopped: " + why, line), line
    assert "nothing was appended on top" in line
    slug = started_slug(done.stdout)
    log = EventLog(pygit2.Repository(str(repo_path)))
    branch = f"refs/heads/agentrun/{slug}"
    if mode == "forge":
        assert log.tip_oid(slug) == (state / "forged").read_text()
    elif mode == "rewind":
        assert log.tip_oid(slug) == (state / "rewound").read_text()
    elif mode == "delete-log":
        assert log.tip_oid(slug) is None
    else:
        assert branch not in repo.references
        assert types(repo, slug)[-1] == "agent.done"


def test_a_task_s_agent_that_forges_the_build_s_end_stops_it(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    """In a task graph, the forged end carries the task's envelope, as if the task's own
    runner had written it: only the build's runner ends a build, so both runners stop."""
    base, state = hostile_agent(tmp_path, "forge-as-task")
    graph = json.dumps([{"id": "alpha", "goal": "add the feature"}])
    plan = {"phase": "plan", "verb": "plan", "text": f"# Plan\n\n```agentrun-tasks\n{graph}\n```\n"}
    configure(repo_path, [plan], base=base)

    done = run_cli(repo_path, "run", GOAL, timeout=120)

    assert done.returncode != 0, done.stdout + done.stderr
    slug = started_slug(done.stdout)
    log = EventLog(pygit2.Repository(str(repo_path)))
    assert log.tip_oid(slug) == (state / "forged").read_text()
    said_there = done.stderr + done.stdout
    assert re.search(r"a build\.completed event \(commit [0-9a-f]{10}\) appeared", said_there)
    listed = run_cli(repo_path, "status", "--json")
    assert '"state": "complete"' not in listed.stdout


def test_a_moved_user_branch_is_reported_and_the_build_goes_on(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    base, state = hostile_agent(tmp_path, "move-main")
    configure(repo_path, base=base)
    before = str(repo.references["refs/heads/main"].target)

    done = run_cli(repo_path, "run", GOAL, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    moved = (state / "moved").read_text()
    (line,) = said(done.stderr)
    assert line == (
        f"agentrun: build {started_slug(done.stdout)}: during implement@1, main "
        f"({before[:10]} -> {moved[:10]}) moved; agentrun never writes there: check that "
        "the change is yours"
    )
    slug = started_slug(done.stdout)
    assert types(repo, slug)[-1] == "build.completed"
    observed = [
        s.event.payload for s in EventLog(repo).read(slug) if s.event.type == "observation.recorded"
    ]
    assert [(o.phase, o.text) for o in observed] == [("implement@1", line.split(": ", 2)[2])]
