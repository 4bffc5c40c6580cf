"""Sync carries a build's task branches (``agentrun/<slug>--<id>``) with its log: each at
the head the log gives the task, whatever the local branch says meanwhile."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
from conftest import git, make_repo
from runner.helpers import configure, run_cli

from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

GRAPH = [{"id": "a", "goal": "write a.txt"}, {"id": "b", "goal": "write b.txt"}]
STEPS = [
    {"phase": "plan", "verb": "plan", "text": f"```agentrun-tasks\n{json.dumps(GRAPH)}\n```\n"},
    {"phase": "implement", "task": "a", "write": {"a.txt": "a\n"}},
    {"phase": "implement", "task": "b", "write": {"b.txt": "b\n"}},
]


def test_task_branches_go_to_the_remote_at_the_heads_the_log_gives(tmp_path: Path) -> None:
    seed = make_repo(tmp_path / "seed")
    configure(seed, STEPS)
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    git(tmp_path, "clone", "-q", bare.as_uri(), "a")
    here = tmp_path / "a"
    ran = run_cli(here, "run", "Write two files", timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    repo = pygit2.Repository(str(here))
    (slug,) = EventLog(repo).slugs()
    state = load_state(EventLog(repo), StateCache(repo), slug)[1]
    heads = {task: state.tasks[task].head for task in ("a", "b")}
    assert heads["a"] != heads["b"]
    # A session in flight, or a reset after a crash, moves the local branch: not pushed.
    git(here, "branch", "-f", f"agentrun/{slug}--a", "main")

    synced = run_cli(here, "sync", "origin")

    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "task branches pushed: a, b" in synced.stdout
    for task, head in heads.items():
        assert git(bare, "rev-parse", f"refs/heads/agentrun/{slug}--{task}") == head
        assert git(bare, "show", f"{head}:{task}.txt") == task
    again = run_cli(here, "sync", "origin")
    assert again.stdout.strip() == f"build {slug}: up to date"
