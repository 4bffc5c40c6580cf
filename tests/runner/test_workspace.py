"""The build's worktree: resetting to the log's head loses no commit it did not know."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
from runner.helpers import configure, git

from agentrun.commands.build import create_build, resume_build, run_build
from agentrun.commands.control import answer
from agentrun.gitrepo import worktrees_dir
from agentrun.kernel.state import BuildState
from agentrun.runner.workspace import DISCARDED

ESCALATE = {"phase": "implement", "round": 1, "attempt": 1, "verb": "escalate", "text": "which?"}


def test_a_commit_the_log_does_not_know_is_kept_when_the_phase_restarts(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [ESCALATE])
    created = create_build(repo, "add a file")
    parked = run_build(repo, created.slug).state
    assert parked.state_name == "parked"
    branch = f"agentrun/{created.slug}"
    # Someone commits on the build branch while it is parked.
    tree = git(repo_path, "rev-parse", f"{branch}^{{tree}}")
    theirs = git(repo_path, "commit-tree", tree, "-p", branch, "-m", "a person's commit")
    git(repo_path, "update-ref", f"refs/heads/{branch}", theirs)

    answer(repo, created.slug, "the first one")
    done = resume_build(repo, created.slug)

    assert not isinstance(done, type(parked)) and done.state.state_name == "complete"
    kept = repo.references.get(f"{DISCARDED}{created.slug}")
    assert kept is not None and str(kept.target) == theirs
    assert not repo.descendant_of(str(repo.references[f"refs/heads/{branch}"].target), theirs)


def test_a_branch_behind_the_log_is_not_kept(repo_path: Path, repo: pygit2.Repository) -> None:
    configure(repo_path, [])
    created = create_build(repo, "add a file")
    assert run_build(repo, created.slug).state.state_name == "complete"
    assert repo.references.get(f"{DISCARDED}{created.slug}") is None


def _parked_with_a_worktree(repo_path: Path, repo: pygit2.Repository) -> tuple[str, Path]:
    """A build parked on a question in implement, answered: its worktree is there."""
    configure(repo_path, [{"phase": "implement", "attempt": 1, "verb": "escalate", "text": "?"}])
    slug = create_build(repo, "Break the worktree").slug
    assert run_build(repo, slug).state.state_name == "parked"
    path = worktrees_dir(repo) / slug
    assert (path / ".git").is_file()
    answer(repo, slug, "go on")
    return slug, path


def resumed_state(repo: pygit2.Repository, slug: str) -> str:
    result = resume_build(repo, slug)
    return (result if isinstance(result, BuildState) else result.state).state_name


def test_a_worktree_whose_git_file_was_overwritten_is_made_healthy_again(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    """Before, such a worktree failed runner setup twice and `retry` could not help."""
    slug, path = _parked_with_a_worktree(repo_path, repo)
    (path / ".git").write_text("gitdir: /nowhere/at/all\n")
    assert resumed_state(repo, slug) == "complete"
    assert "/nowhere/" not in (path / ".git").read_text()


def test_a_worktree_that_lost_its_git_file_or_became_a_file_is_made_again(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, path = _parked_with_a_worktree(repo_path, repo)
    shutil.rmtree(path)
    path.write_text("not a folder any more\n")
    assert resumed_state(repo, slug) == "complete"
    assert path.is_dir() and (path / ".git").is_file()
