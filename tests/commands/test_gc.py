"""``git agentrun gc``: what archived builds left behind goes; unmerged work stays."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
from conftest import make_repo
from runner.helpers import configure, git, run_cli

from agentrun.commands.build import create_build, run_build
from agentrun.commands.pulls import close_pull, merge_pull
from agentrun.events import BuildFailed
from agentrun.gitrepo import worktrees_dir
from agentrun.kernel.draft import Draft
from agentrun.store.lease import lease_ref
from agentrun.store.log import EventLog

GOAL = "Add the app module"


def finished(repo_path: Path, repo: pygit2.Repository, goal: str = GOAL) -> tuple[str, int]:
    if not (repo_path / ".agentrun.toml").exists():
        steps = [{"phase": "implement", "write": {"app.txt": "x\n"}}]
        configure(repo_path, steps, extra='[setup]\ncommand = "true"\n')
    slug = create_build(repo, goal).slug
    outcome = run_build(repo, slug)
    assert outcome.state.state_name == "complete"
    assert outcome.state.proposal is not None
    return slug, outcome.state.proposal.number


def refs(repo_path: Path, prefix: str) -> list[str]:
    return git(repo_path, "for-each-ref", "--format=%(refname)", prefix).split()


def test_gc_removes_the_worktree_and_the_merged_branch(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, number = finished(repo_path, repo)
    merge_pull(repo, number)
    worktree = worktrees_dir(repo) / slug
    setup_marker = worktree.parent / f"{slug}.setup.json"
    assert worktree.exists() and setup_marker.exists()

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    assert f"removed worktree {worktree}" in done.stdout
    assert f"removed branch agentrun/{slug}" in done.stdout
    assert done.stdout.splitlines()[-1] == "packed refs"
    assert not worktree.exists() and not setup_marker.exists()
    assert list(worktree.parent.iterdir()) == []
    assert refs(repo_path, "refs/heads/agentrun/") == []
    assert git(repo_path, "worktree", "list").count("\n") == 0  # only the main one
    # The archive still shows the build.
    assert slug in run_cli(repo_path, "status").stdout
    assert run_cli(repo_path, "gc").stdout.splitlines() == ["packed refs"]


def test_gc_keeps_the_branch_of_a_proposal_closed_unmerged(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, number = finished(repo_path, repo)
    close_pull(repo, number)

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    assert f"kept branch agentrun/{slug}: its commits are on no other branch" in done.stdout
    assert refs(repo_path, "refs/heads/agentrun/") == [f"refs/heads/agentrun/{slug}"]
    assert not (worktrees_dir(repo) / slug).exists()


def test_gc_leaves_live_builds_alone_and_a_dry_run_changes_nothing(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, number = finished(repo_path, repo)
    live, _ = finished(repo_path, repo, "Add the other module")
    merge_pull(repo, number)
    stale = git(repo_path, "rev-parse", "HEAD")
    git(repo_path, "update-ref", f"refs/agentrun/discarded/{slug}", stale)
    before = refs(repo_path, "refs/")

    dry = run_cli(repo_path, "gc", "--dry-run")

    assert dry.returncode == 0, dry.stderr
    assert f"would remove branch agentrun/{slug}" in dry.stdout
    assert f"would remove refs/agentrun/discarded/{slug}" in dry.stdout
    assert live not in dry.stdout
    assert refs(repo_path, "refs/") == before
    done = run_cli(repo_path, "gc")
    assert f"removed refs/agentrun/discarded/{slug}" in done.stdout
    assert (worktrees_dir(repo) / live).exists()
    assert f"refs/heads/agentrun/{live}" in refs(repo_path, "refs/heads/")
    assert lease_ref(live) not in refs(repo_path, "refs/agentrun/")


def parked(repo_path: Path, repo: pygit2.Repository, goal: str) -> str:
    """A build that ran implement (so it has a worktree) and parked: it changed nothing."""
    if not (repo_path / ".agentrun.toml").exists():
        configure(repo_path, [{"phase": "implement"}])
    slug = create_build(repo, goal).slug
    assert run_build(repo, slug).state.state_name == "parked"
    assert (worktrees_dir(repo) / slug).exists()
    return slug


def test_gc_tidies_aborted_and_failed_builds_keeping_unmerged_branches(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    aborted = parked(repo_path, repo, "Aborted build")
    failed = parked(repo_path, repo, "Failed build")
    running = parked(repo_path, repo, "Parked build")
    assert run_cli(repo_path, "abort", aborted).returncode == 0
    log = EventLog(repo)
    log.append(failed, [Draft(BuildFailed(reason="the disk broke"))], log.tip(failed))
    # The failed build's branch is on another branch too: merged, so it may go.
    git(repo_path, "branch", "keep-failed", f"agentrun/{failed}")

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    for slug in (aborted, failed):
        assert f"removed worktree {worktrees_dir(repo) / slug}" in done.stdout
        assert not (worktrees_dir(repo) / slug).exists()
    assert f"removed branch agentrun/{failed}" in done.stdout
    assert f"kept branch agentrun/{aborted}: its commits are on no other branch" in done.stdout
    assert refs(repo_path, "refs/heads/agentrun/") == [
        f"refs/heads/agentrun/{aborted}",
        f"refs/heads/agentrun/{running}",
    ]
    assert (worktrees_dir(repo) / running).exists()  # a parked build is not finished
    # Both logs stay: `retry` may re-open the failed one, and its runner makes a new worktree.
    assert set(EventLog(repo).slugs()) == {aborted, failed, running}


def test_a_repository_made_again_at_the_same_path_gets_fresh_worktrees(tmp_path: Path) -> None:
    path = tmp_path / "project"
    first = pygit2.Repository(str(make_repo(path)))
    configure(path, [{"phase": "implement", "write": {"app.txt": "x\n"}}])
    slug = create_build(first, GOAL).slug
    assert run_build(first, slug).state.state_name == "complete"
    stale = worktrees_dir(first) / slug
    assert stale.exists()

    shutil.rmtree(path)
    again = pygit2.Repository(str(make_repo(path)))
    configure(path, [{"phase": "implement", "write": {"app.txt": "y\n"}}])
    assert create_build(again, GOAL).slug == slug

    outcome = run_build(again, slug)

    assert outcome.state.state_name == "complete", outcome.state.reason
    assert worktrees_dir(again) != stale.parent
    assert (worktrees_dir(again) / slug / "app.txt").read_text() == "y\n"
