"""``git agentrun pulls`` on a real build's proposal, through real processes."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure, git, run_cli

from agentrun.commands.build import create_build, run_build
from agentrun.gitrepo import worktrees_dir

GOAL = "Add the app module"


def finished(repo_path: Path, repo: pygit2.Repository) -> tuple[str, int]:
    configure(
        repo_path,
        [{"phase": "implement", "write": {"app.txt": "x\n"}, "text": "adds app.txt"}],
    )
    outcome = run_build(repo, create_build(repo, GOAL).slug)
    assert outcome.state.state_name == "complete"
    assert outcome.state.proposal is not None
    return outcome.state.slug, outcome.state.proposal.number


def test_checkout_show_diff_and_squash_merge(repo_path: Path, repo: pygit2.Repository) -> None:
    slug, number = finished(repo_path, repo)
    assert (worktrees_dir(repo) / slug).exists()  # the build's worktree holds its branch

    checkout = run_cli(repo_path, "pulls", "checkout", str(number))
    assert checkout.returncode == 0, checkout.stderr
    assert checkout.stdout == f"switched to pulls/{number}\n"
    assert git(repo_path, "rev-parse", "HEAD") == git(repo_path, "rev-parse", f"agentrun/{slug}")
    assert (repo_path / "app.txt").read_text() == "x\n"
    git(repo_path, "checkout", "-q", "main")

    stat = run_cli(repo_path, "pulls", "show", str(number), "--stat")
    assert stat.returncode == 0, stat.stderr
    assert stat.stdout.splitlines()[0].split() == ["app.txt", "|", "1", "+"]
    diff = run_cli(repo_path, "pulls", "show", str(number), "--diff")
    assert "diff --git a/app.txt b/app.txt" in diff.stdout
    assert "+x" in diff.stdout.splitlines()

    base = git(repo_path, "rev-parse", "main")
    merged = run_cli(repo_path, "pulls", "merge", str(number))
    assert merged.returncode == 0, merged.stderr
    assert git(repo_path, "rev-list", "--count", f"{base}..main") == "1"
    message = git(repo_path, "log", "-1", "--format=%B", "main")
    assert message.splitlines()[0] == git(repo_path, "log", "-1", "--format=%s", "main")
    assert message.endswith(f"\n\nAgentrun-Build: {slug}")
    assert "adds app.txt" in message
    subject = message.splitlines()[0]
    assert message.count(subject) == 1  # a one-line goal is the subject, not said again

    gc = run_cli(repo_path, "gc")
    assert f"removed branch agentrun/{slug}" in gc.stdout, gc.stdout
    assert git(repo_path, "branch", "--list", f"agentrun/{slug}") == ""


def test_no_squash_keeps_the_builds_commits_and_gc_removes_the_branch(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, number = finished(repo_path, repo)
    head = git(repo_path, "rev-parse", f"agentrun/{slug}")

    merged = run_cli(repo_path, "pulls", "merge", "--no-squash", str(number))

    assert merged.returncode == 0, merged.stderr
    assert git(repo_path, "rev-parse", "main") == head  # a fast-forward
    assert f"removed branch agentrun/{slug}" in run_cli(repo_path, "gc").stdout


@pytest.mark.parametrize("flag", ["--diff", "--stat"])
def test_show_diff_of_an_unknown_proposal_is_one_line(repo_path: Path, flag: str) -> None:
    done = run_cli(repo_path, "pulls", "show", "9", flag)
    assert done.returncode == 1
    assert done.stderr == "agentrun: no proposal #9: `git agentrun pulls` lists them\n"
