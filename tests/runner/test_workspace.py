"""The build's worktree: resetting to the log's head loses no commit it did not know."""

from __future__ import annotations

from pathlib import Path

import pygit2
from runner.helpers import configure, git

from agentrun.commands.build import create_build, resume_build, run_build
from agentrun.commands.control import answer
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
