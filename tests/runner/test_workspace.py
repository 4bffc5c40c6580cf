"""The build's worktree: resetting to the log's head loses no commit it did not know."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
from runner.helpers import configure, git

from agentrun.agent.context import SCRATCH
from agentrun.commands.build import create_build, resume_build, run_build
from agentrun.commands.control import answer
from agentrun.gitrepo import worktrees_dir
from agentrun.kernel.state import BuildState
from agentrun.runner.workspace import DISCARDED, Workspace

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


def _prepared(repo_path: Path, repo: pygit2.Repository) -> tuple[Workspace, Path, str]:
    """A workspace prepared at the repository's head, with a tracked folder and an
    ignore rule."""
    (repo_path / "src").mkdir()
    (repo_path / "src" / "app.py").write_text("VALUE = 1\n")
    (repo_path / ".gitignore").write_text("*.pyc\nbuild/\n")
    git(repo_path, "add", "-A")
    git(repo_path, "commit", "-q", "-m", "a module")
    head = str(repo.head.target)
    workspace = Workspace(repo, "ws", "agentrun/ws")
    return workspace, workspace.prepare(head), head


def _files(path: Path) -> list[str]:
    return sorted(
        str(p.relative_to(path)) + ("/" if p.is_dir() else "")
        for p in path.rglob("*")
        if p.name != ".git" and SCRATCH.as_posix() not in p.as_posix()
    )


def test_prepare_undoes_what_a_phase_left_as_reset_and_clean_would(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    workspace, path, head = _prepared(repo_path, repo)
    (path / "src" / "app.py").write_text("VALUE = 2\n")
    (path / "README.md").unlink()
    (path / "new.txt").write_text("left behind\n")
    (path / "empty" / "deeper").mkdir(parents=True)
    (path / "src" / "nested").mkdir()
    (path / "src" / "cache.pyc").write_text("ignored\n")
    (path / "build").mkdir()
    git(path, "add", "new.txt")

    workspace.prepare(head)

    assert (path / "src" / "app.py").read_text() == "VALUE = 1\n"
    assert _files(path) == [
        ".agentrun/",
        ".gitignore",
        "README.md",
        "build/",  # ignored: `git clean` without -x keeps it
        "src/",
        "src/app.py",
        "src/cache.pyc",
    ]
    assert git(path, "status", "--porcelain") == ""


def test_prepare_leaves_a_worktree_already_at_its_head_as_it_is(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    workspace, path, head = _prepared(repo_path, repo)
    (path / "src" / "cache.pyc").write_text("ignored\n")
    before = (path / "src" / "app.py").stat().st_mtime_ns

    workspace.prepare(head)

    assert (path / "src" / "app.py").stat().st_mtime_ns == before
    assert (path / "src" / "cache.pyc").exists()
    assert git(path, "status", "--porcelain") == ""


def test_prepare_on_another_head_checks_it_out(repo_path: Path, repo: pygit2.Repository) -> None:
    workspace, path, old = _prepared(repo_path, repo)
    (repo_path / "src" / "app.py").write_text("VALUE = 3\n")
    git(repo_path, "commit", "-q", "-am", "three")
    new = str(repo.head.target)

    workspace.prepare(new)

    assert (path / "src" / "app.py").read_text() == "VALUE = 3\n"
    assert git(path, "rev-parse", "HEAD") == new != old
    assert git(path, "status", "--porcelain") == ""


def test_prepare_removes_empty_folders_even_when_nothing_else_changed(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    """No file changed, so git status sees nothing; `git clean -d` removes them all the same."""
    workspace, path, head = _prepared(repo_path, repo)
    (path / "empty" / "deeper").mkdir(parents=True)
    (path / "src" / "nested").mkdir()
    (path / "only-ignored").mkdir()
    (path / "only-ignored" / "x.pyc").write_text("ignored\n")

    workspace.prepare(head)

    assert not (path / "empty").exists() and not (path / "src" / "nested").exists()
    assert (path / "only-ignored" / "x.pyc").exists()  # as `git clean -f -d` leaves it
