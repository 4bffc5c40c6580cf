"""Reconcile (DESIGN §5): the base moved and conflicts, so the build merges it and checks again.

Real repositories: a scripted agent, the local forge, a person committing on main while
the build is parked on a question.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
from runner.helpers import configure, git, payloads, types

from agentrun.commands.build import create_build, resume_build, run_build
from agentrun.commands.control import answer
from agentrun.runner.loop import Outcome

GOAL = "Say hello differently"
VERIFY = """
[[verify]]
name = "review"
agent = "verify"
"""


def park_before_ready(
    repo_path: Path, repo: pygit2.Repository, reconcile: dict[str, object]
) -> str:
    """A build whose verify step asks a question; main then gains a conflicting commit."""
    (repo_path / "hello.txt").write_text("hello\n")
    git(repo_path, "add", "hello.txt")
    git(repo_path, "commit", "-q", "-m", "add hello")
    steps = [
        {"phase": "implement", "write": {"hello.txt": "hello from the build\n"}},
        {"phase": "verify:review", "attempt": 1, "verb": "escalate", "text": "Ship it?"},
        {"phase": "reconcile", **reconcile},
    ]
    configure(repo_path, steps, extra=VERIFY)
    created = create_build(repo, GOAL)
    outcome = run_build(repo, created.slug)
    assert outcome.waiting == "parked"
    (repo_path / "hello.txt").write_text("hello from main\n")
    git(repo_path, "commit", "-q", "-am", "main changes the greeting")
    answer(repo, created.slug, "yes")
    return created.slug


def test_a_conflicting_base_is_merged_by_the_reconcile_agent_then_verified_again(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    merged = {"write": {"hello.txt": "hello from main and the build\n"}, "text": "kept both"}
    slug = park_before_ready(repo_path, repo, merged)
    main = git(repo_path, "rev-parse", "main")

    outcome = resume_build(repo, slug)

    assert isinstance(outcome, Outcome)
    assert outcome.state.state_name == "complete"
    moved = payloads(repo, slug, "base.moved")
    assert [(m.base_sha, m.conflicts) for m in moved] == [(main, ("hello.txt",))]
    done = payloads(repo, slug, "reconcile.completed")
    assert [(d.base_sha, d.round) for d in done] == [(main, 1)]
    head = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Commit)
    merge = repo.get(done[0].head)
    assert isinstance(merge, pygit2.Commit)
    assert [str(p) for p in merge.parent_ids][1] == main
    assert head.tree["hello.txt"].data == b"hello from main and the build\n"
    kinds = types(repo, slug)
    # verify ran again after the merge, and only then was the proposal marked ready
    after = kinds[kinds.index("reconcile.completed") :]
    assert after.index("verify.completed") < after.index("proposal.ready")
    assert outcome.state.base_sha == main


def test_conflict_markers_left_behind_refuse_the_merge(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug = park_before_ready(repo_path, repo, {"text": "did nothing"})

    outcome = resume_build(repo, slug)

    assert isinstance(outcome, Outcome)
    assert outcome.waiting == "parked"
    failed = payloads(repo, slug, "phase.failed")
    assert {f.phase for f in failed} == {"reconcile"}
    assert all("conflict markers" in f.error for f in failed)
    assert "reconcile.completed" not in types(repo, slug)
    raised = payloads(repo, slug, "escalation.raised")
    assert raised[-1].phase == "reconcile"
    assert "proposal.ready" not in types(repo, slug)


def test_a_base_that_moved_cleanly_needs_no_reconcile(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    (repo_path / "other.txt").write_text("x\n")
    git(repo_path, "add", "other.txt")
    git(repo_path, "commit", "-q", "-m", "other")
    steps = [
        {"phase": "implement", "write": {"feature.txt": "new\n"}},
        {"phase": "verify:review", "attempt": 1, "verb": "escalate", "text": "Ship it?"},
    ]
    configure(repo_path, steps, extra=VERIFY)
    slug = create_build(repo, GOAL).slug
    assert run_build(repo, slug).waiting == "parked"
    (repo_path / "other.txt").write_text("y\n")
    git(repo_path, "commit", "-q", "-am", "main moves elsewhere")
    answer(repo, slug, "yes")

    outcome = resume_build(repo, slug)

    assert isinstance(outcome, Outcome)
    assert outcome.state.state_name == "complete"
    assert "base.moved" not in types(repo, slug)
    assert "reconcile.started" not in types(repo, slug)
