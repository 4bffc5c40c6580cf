"""``git agentrun gc`` after a build with a task graph: its tasks' branches, leases,
worktrees, git dirs, logs and discarded refs go with the build's; other builds' stay,
and so does a branch that only looks like a task's."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pygit2
import pytest
from commands.test_gc import refs
from runner.helpers import configure, git, run_cli

from agentrun.commands.build import create_build, new_build, run_build
from agentrun.commands.pulls import close_pull, merge_pull
from agentrun.config import load_config
from agentrun.errors import UnknownBuildError
from agentrun.events import BuildFailed
from agentrun.gitrepo import agentrun_dir, now_utc, worktrees_dir
from agentrun.isolation import gitdir
from agentrun.kernel.draft import Draft
from agentrun.store.lease import acquire, lease_ref, task_key
from agentrun.store.log import EventLog

GRAPH = [
    {"id": "alpha", "goal": "write alpha.txt", "paths": ["alpha.txt"]},
    {"id": "beta", "goal": "write beta.txt"},
]
PLAN = "# Plan\n\n```agentrun-tasks\n" + json.dumps(GRAPH) + "\n```\n"
STEPS = [
    {"phase": "plan", "verb": "plan", "text": PLAN},
    {"phase": "implement", "task": "alpha", "write": {"alpha.txt": "alpha\n"}},
    {"phase": "implement", "task": "beta", "write": {"beta.txt": "beta\n"}},
]
TASKS = ("alpha", "beta")


def tasked(repo_path: Path, repo: pygit2.Repository, goal: str) -> tuple[str, int]:
    """A build of goal ``goal`` whose plan is a two-task graph, run to ``complete``."""
    if not (repo_path / ".agentrun.toml").exists():
        configure(repo_path, STEPS, extra='[[verify]]\nname = "files"\ncommand = "ls"\n')
    slug = create_build(repo, goal).slug
    outcome = run_build(repo, slug)
    assert outcome.state.state_name == "complete"
    assert set(outcome.state.tasks) == set(TASKS)
    assert outcome.state.proposal is not None
    return slug, outcome.state.proposal.number


def left_of(repo: pygit2.Repository, name: str) -> list[Path]:
    """What a build's or task's worktree leaves on disk: the worktree, its git dir."""
    found = [worktrees_dir(repo) / name, gitdir.path_of(repo, name)]
    return [path for path in found if path.exists()]


def stale_lease(repo: pygit2.Repository, key: str) -> None:
    acquire(repo, key, "a killed job", ttl=1, now=now_utc() - timedelta(hours=1))


def test_gc_removes_what_a_merged_task_build_left_and_nothing_of_another(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, number = tasked(repo_path, repo, "Write the files")
    other, _ = tasked(repo_path, repo, "Write more files")
    head = git(repo_path, "rev-parse", f"agentrun/{slug}--alpha")
    git(repo_path, "update-ref", f"refs/agentrun/discarded/{slug}--alpha", head)
    stale_lease(repo, task_key(slug, "beta"))
    acquire(repo, task_key(slug, "alpha"), "a live job")  # this process: alive, not expired
    stale_lease(repo, task_key(other, "beta"))  # a finished build's: goes too
    acquire(repo, task_key(other, "alpha"), "a live job")
    logs = agentrun_dir(repo) / "tasks"
    assert sorted(p.name for p in (logs / slug).iterdir()) == ["alpha.log", "beta.log"]
    assert all(left_of(repo, f"{slug}--{task}") for task in TASKS)
    merge_pull(repo, number)
    # Archiving took the stale lease of the build's tasks; the live job's stays.
    assert refs(repo_path, f"refs/agentrun/task-leases/{slug}/") == [
        lease_ref(task_key(slug, "alpha"))
    ]
    before = refs(repo_path, "refs/")

    dry = run_cli(repo_path, "gc", "--dry-run")

    assert dry.returncode == 0, dry.stderr
    assert f"would remove branch agentrun/{slug}--alpha" in dry.stdout
    assert f"would remove {lease_ref(task_key(other, 'beta'))}" in dry.stdout
    assert refs(repo_path, "refs/") == before and (logs / slug).exists()

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    for task in TASKS:
        name = f"{slug}--{task}"
        assert f"removed branch agentrun/{name}" in done.stdout
        assert f"removed worktree {worktrees_dir(repo) / name}" in done.stdout
        assert left_of(repo, name) == []
        assert not (worktrees_dir(repo) / f"{name}.setup.json").exists()
    assert f"removed refs/agentrun/discarded/{slug}--alpha" in done.stdout
    assert f"removed task logs {logs / slug}" in done.stdout
    assert not (logs / slug).exists()
    assert not (agentrun_dir(repo) / "slots" / "builds" / slug).exists()
    # Of the merged build, only the live job's lease is left.
    assert [r for r in refs(repo_path, "refs/") if slug in r] == [
        lease_ref(task_key(slug, "alpha"))
    ]
    # The other build (live, its proposal open) keeps everything but its stale lease.
    assert [r for r in refs(repo_path, "refs/heads/") if other in r] == [
        f"refs/heads/agentrun/{other}",
        f"refs/heads/agentrun/{other}--alpha",
        f"refs/heads/agentrun/{other}--beta",
    ]
    assert refs(repo_path, f"refs/agentrun/task-leases/{other}/") == [
        lease_ref(task_key(other, "alpha"))
    ]
    assert all(left_of(repo, f"{other}--{task}") for task in TASKS)
    assert sorted(p.name for p in (logs / other).iterdir()) == ["alpha.log", "beta.log"]
    again = run_cli(repo_path, "gc").stdout.splitlines()
    assert again == ["packed refs"]


def test_a_closed_proposal_keeps_the_task_work_found_nowhere_else(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, number = tasked(repo_path, repo, "Write the files")
    # Work on beta's branch that never landed: its commits are on no other branch.
    git(repo_path, "switch", "-q", "-c", "scratch")
    (repo_path / "late.txt").write_text("late\n")
    git(repo_path, "add", "late.txt")
    git(repo_path, "commit", "-q", "-m", "late work")
    late = git(repo_path, "rev-parse", "HEAD")
    git(repo_path, "switch", "-q", "main")
    git(repo_path, "branch", "-q", "-D", "scratch")
    git(repo_path, "update-ref", f"refs/heads/agentrun/{slug}--beta", late)
    close_pull(repo, number)

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    # alpha landed: the build branch, kept, holds its commits.
    assert f"removed branch agentrun/{slug}--alpha" in done.stdout
    assert f"kept branch agentrun/{slug}--beta: its commits are on no other" in done.stdout
    assert f"kept branch agentrun/{slug}:" in done.stdout
    assert refs(repo_path, "refs/heads/agentrun/") == [
        f"refs/heads/agentrun/{slug}",
        f"refs/heads/agentrun/{slug}--beta",
    ]
    assert left_of(repo, f"{slug}--beta") == []


def test_a_failed_task_build_gives_up_its_task_worktrees_and_keeps_its_logs(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, _ = tasked(repo_path, repo, "Write the files")
    log = EventLog(repo)
    log.append(slug, [Draft(BuildFailed(reason="the disk broke"))], log.tip(slug))
    stale_lease(repo, task_key(slug, "beta"))

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    for task in TASKS:
        # The build branch (kept: its commits are nowhere else) holds what they landed.
        assert f"removed branch agentrun/{slug}--{task}" in done.stdout
        assert left_of(repo, f"{slug}--{task}") == []
    assert f"kept branch agentrun/{slug}:" in done.stdout
    assert f"removed {lease_ref(task_key(slug, 'beta'))}" in done.stdout
    # `retry` may re-open it: the log and what its tasks said stay.
    assert refs(repo_path, "refs/heads/agentrun/") == [f"refs/heads/agentrun/{slug}"]
    assert (agentrun_dir(repo) / "tasks" / slug / "alpha.log").exists()
    assert EventLog(repo).slugs() == [slug]


def test_gc_removes_no_branch_that_only_looks_like_a_task_of_the_build(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, STEPS, extra='[[verify]]\nname = "files"\ncommand = "ls"\n')
    main = git(repo_path, "rev-parse", "main")
    config = load_config(repo_path)
    # A build whose slug is a task's name of another build cannot be made: slugs never
    # hold "--" (a log a remote brought with one is refused as unreadable). A second
    # build has a branch of its own named as if it were a task of it.
    with pytest.raises(UnknownBuildError, match="is not a build slug"):
        new_build(repo, "write-the-files--alpha", "mallory", "x", ("main", main), config)
    other = new_build(repo, "other", "mallory", "y", ("main", main), config)
    slug, number = tasked(repo_path, repo, "Write the files")
    planted = [f"refs/heads/agentrun/{other}--alpha", f"refs/heads/agentrun/{slug}--zeta"]
    for ref in planted:
        git(repo_path, "update-ref", ref, main)  # merged commits: gc could delete them
    merge_pull(repo, number)

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    assert f"removed branch agentrun/{slug}--beta" in done.stdout
    assert f"removed branch agentrun/{slug}--alpha" in done.stdout
    assert refs(repo_path, "refs/heads/agentrun/") == sorted(planted)
    assert left_of(repo, f"{slug}--beta") == []
    assert run_cli(repo_path, "status").returncode == 0


def test_sync_retires_an_archived_builds_stale_task_leases_on_the_remote(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo_path, "remote", "add", "origin", bare.as_uri())
    git(repo_path, "push", "-q", "origin", "main")
    slug, number = tasked(repo_path, repo, "Write the files")
    other, _ = tasked(repo_path, repo, "Write more files")
    # What task jobs against origin leave there: their branches, a killed job's lease,
    # a live job's lease, and a stale lease of a build still live.
    stale_lease(repo, task_key(slug, "beta"))
    acquire(repo, task_key(slug, "alpha"), "a live job")
    stale_lease(repo, task_key(other, "beta"))
    pushed = [
        f"refs/heads/agentrun/{slug}--alpha",
        f"refs/heads/agentrun/{slug}--beta",
        lease_ref(task_key(slug, "alpha")),
        lease_ref(task_key(slug, "beta")),
        lease_ref(task_key(other, "beta")),
    ]
    git(repo_path, "push", "-q", "origin", *(f"{ref}:{ref}" for ref in pushed))
    for ref in pushed[2:]:
        git(repo_path, "update-ref", "-d", ref)
    assert run_cli(repo_path, "sync", "origin").returncode == 0
    merge_pull(repo, number)

    done = run_cli(repo_path, "sync", "origin")

    assert done.returncode == 0, done.stderr
    there = git(bare, "for-each-ref", "--format=%(refname)").split()
    assert f"refs/agentrun/builds/{slug}" not in there
    assert lease_ref(task_key(slug, "beta")) not in there
    assert {*pushed} - {lease_ref(task_key(slug, "beta"))} <= {*there}
    assert f"refs/agentrun/builds/{other}" in there
    again = run_cli(repo_path, "sync", "origin")
    assert again.returncode == 0, again.stderr
    assert run_cli(repo_path, "gc").returncode == 0
    assert [r for r in refs(repo_path, "refs/heads/") if slug in r] == []
