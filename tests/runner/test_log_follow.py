"""``git agentrun log --follow``: the timeline, then each new event, until the build ends."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
from runner.helpers import background, configure, only_slug, run_cli, types

from agentrun.commands.build import create_build, run_build
from agentrun.store.archive import archive

GOAL = "Add the app module"


def test_follow_streams_a_running_build_until_it_completes(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [{"phase": "implement", "sleep": 3, "write": {"app.py": "X = 1\n"}}])
    with background(repo_path, "run", GOAL) as runner:
        slug = only_slug(repo_path)
        with background(repo_path, "log", slug, "--follow") as follower:
            first = follower.readline()
            assert "build.created" in first
            assert "build.completed" not in types(repo, slug), "shown while it ran"
            code, rest = follower.wait(timeout=60)
        runner.wait()
    assert code == 0, rest
    lines = [first.rstrip("\n"), *rest.splitlines()]
    assert len(lines) == len(types(repo, slug))
    assert "build.completed" in lines[-1]


def test_follow_json_prints_one_envelope_per_line(repo_path: Path, repo: pygit2.Repository) -> None:
    configure(repo_path)
    slug = create_build(repo, GOAL).slug
    assert run_build(repo, slug).state.state_name == "complete"

    followed = run_cli(repo_path, "log", slug, "--follow", "--json")

    assert followed.returncode == 0, followed.stderr
    records = [json.loads(line) for line in followed.stdout.splitlines()]
    assert [r["type"] for r in records] == types(repo, slug)
    assert {r["schema"] for r in records} == {1}
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert all(r["slug"] == slug and len(r["commit"]) == 40 for r in records)


def test_follow_of_an_archived_build_prints_it_and_ends(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path)
    slug = create_build(repo, GOAL).slug
    run_build(repo, slug)
    archive(repo, slug, "complete")

    followed = run_cli(repo_path, "log", slug, "-f")

    assert followed.returncode == 0, followed.stderr
    assert "build.completed" in followed.stdout.splitlines()[-1]


def test_follow_of_an_unknown_build_is_refused(repo_path: Path, repo: pygit2.Repository) -> None:
    followed = run_cli(repo_path, "log", "no-such-build", "--follow")

    assert followed.returncode == 1
    assert "no build named 'no-such-build'" in followed.stderr
