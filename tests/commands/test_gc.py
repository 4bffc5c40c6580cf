"""``git agentrun gc``: what archived builds left behind goes; unmerged work stays."""

from __future__ import annotations

from pathlib import Path

import pygit2
from runner.helpers import configure, git, run_cli

from agentrun.commands.build import create_build, run_build
from agentrun.commands.pulls import close_pull, merge_pull
from agentrun.gitrepo import worktrees_dir
from agentrun.store.lease import lease_ref

GOAL = "Add the app module"


def finished(repo_path: Path, repo: pygit2.Repository, goal: str = GOAL) -> tuple[str, int]:
    if not (repo_path / ".agentrun.toml").exists():
        configure(repo_path, [{"phase": "implement", "write": {"app.txt": "x\n"}}])
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
    assert worktree.exists()

    done = run_cli(repo_path, "gc")

    assert done.returncode == 0, done.stderr
    assert f"removed worktree {worktree}" in done.stdout
    assert f"removed branch agentrun/{slug}" in done.stdout
    assert done.stdout.splitlines()[-1] == "packed refs"
    assert not worktree.exists()
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
