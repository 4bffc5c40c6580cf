"""``git agentrun reconcile SLUG``: a complete build whose base moved merges it, verifies
again and is ready again; refusals are one line and change nothing."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure, git, payloads, run_cli, types

from agentrun.commands.build import create_build, run_build
from agentrun.commands.pulls import merge_pull
from agentrun.commands.reconcile import request_reconcile
from agentrun.errors import AgentrunError, ForgeError
from agentrun.forge.local import LocalForge
from agentrun.store.log import EventLog

GOAL = "Say hello differently"
VERIFY = '\n[[verify]]\nname = "greeting"\ncommand = "grep -q build hello.txt"\n'


def complete(repo_path: Path, repo: pygit2.Repository, reconcile: dict[str, object]) -> str:
    (repo_path / "hello.txt").write_text("hello\n")
    (repo_path / "other.txt").write_text("other\n")
    git(repo_path, "add", "hello.txt", "other.txt")
    git(repo_path, "commit", "-q", "-m", "add hello")
    steps = [
        {"phase": "implement", "write": {"hello.txt": "hello from the build\n"}},
        {"phase": "reconcile", **reconcile},
    ]
    configure(repo_path, steps, extra=VERIFY)
    outcome = run_build(repo, create_build(repo, GOAL).slug)
    assert outcome.state.state_name == "complete"
    return outcome.state.slug


def number_of(repo: pygit2.Repository, slug: str) -> int:
    return int(payloads(repo, slug, "proposal.opened")[0].number)


def test_a_conflicting_base_is_reconciled_then_verified_and_ready_again(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    merged = {"write": {"hello.txt": "hello from main and the build\n"}, "text": "kept both"}
    slug = complete(repo_path, repo, merged)
    number = number_of(repo, slug)
    (repo_path / "hello.txt").write_text("hello from main\n")
    git(repo_path, "commit", "-q", "-am", "main changes the greeting")
    main = git(repo_path, "rev-parse", "main")
    with pytest.raises(ForgeError, match=f"`git agentrun reconcile {slug}` merges it for you"):
        merge_pull(repo, number)

    done = run_cli(repo_path, "reconcile", slug)

    assert done.returncode == 0, done.stderr
    assert f"build {slug}: reconcile requested, merging the base at {main[:10]}" in done.stdout
    assert f"build {slug}: complete" in done.stdout
    kinds = types(repo, slug)
    after = kinds[kinds.index("build.reconcile-requested") :]
    assert after.index("reconcile.completed") < after.index("verify.completed")
    assert after.index("verify.completed") < after.index("proposal.ready")
    assert after[-1] == "build.completed"
    assert payloads(repo, slug, "build.reconcile-requested")[0].base_sha == main
    (completed,) = payloads(repo, slug, "reconcile.completed")
    merge = repo.get(completed.head)
    assert isinstance(merge, pygit2.Commit)
    assert [str(p) for p in merge.parent_ids][1] == main
    assert LocalForge(repo).get(number).draft is False
    # Now it merges.
    merge_pull(repo, number)
    assert git(repo_path, "show", "main:hello.txt") == "hello from main and the build"


def test_a_clean_base_is_merged_without_an_agent(repo_path: Path, repo: pygit2.Repository) -> None:
    # The scripted reconcile agent would write a file: it must not be asked at all.
    slug = complete(repo_path, repo, {"write": {"agent-was-here.txt": "x\n"}})
    (repo_path / "other.txt").write_text("other, changed on main\n")
    git(repo_path, "commit", "-q", "-am", "main changes another file")
    main = git(repo_path, "rev-parse", "main")

    done = run_cli(repo_path, "reconcile", slug[:8])  # a unique prefix will do

    assert done.returncode == 0, done.stderr
    (completed,) = payloads(repo, slug, "reconcile.completed")
    assert completed.base_sha == main
    merge = repo.get(completed.head)
    assert isinstance(merge, pygit2.Commit)
    assert [str(p) for p in merge.parent_ids][1] == main
    tree = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Commit).tree
    assert "agent-was-here.txt" not in tree
    kinds = types(repo, slug)
    assert "session.started" not in kinds[kinds.index("build.reconcile-requested") :]
    assert kinds[-1] == "build.completed"


def test_the_proposal_is_a_draft_while_the_build_reconciles(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug = complete(repo_path, repo, {})
    number = number_of(repo, slug)
    (repo_path / "other.txt").write_text("moved\n")
    git(repo_path, "commit", "-q", "-am", "main moves")

    requested = request_reconcile(repo, slug)

    assert requested.note is None
    assert LocalForge(repo).get(number).draft is True
    assert requested.state.status == "running"
    assert requested.state.proposal is not None and not requested.state.proposal.ready


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("unmoved", "already holds main at"),
        ("running", "is still parked: it merges a moved base itself"),
        ("aborted", "is aborted; nothing to reconcile"),
    ],
)
def test_reconcile_refusals_are_one_line_and_record_nothing(
    repo_path: Path, repo: pygit2.Repository, setup: str, message: str
) -> None:
    if setup == "unmoved":
        slug = complete(repo_path, repo, {})
    else:
        configure(repo_path, [{"phase": "implement"}])  # changes nothing: the build parks
        slug = create_build(repo, GOAL).slug
        run_build(repo, slug)
        if setup == "aborted":
            assert run_cli(repo_path, "abort", slug).returncode == 0
    before = EventLog(repo).tip_oid(slug)

    done = run_cli(repo_path, "reconcile", slug)

    assert done.returncode == 1
    assert done.stderr.startswith(f"agentrun: build {slug} ")
    assert message in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert EventLog(repo).tip_oid(slug) == before


def test_reconcile_of_a_build_whose_proposal_was_closed(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug = complete(repo_path, repo, {})
    LocalForge(repo).close(number_of(repo, slug))
    from agentrun.commands.pulls import finish_build

    finish_build(repo, slug, number_of(repo, slug), False, "me")
    done = run_cli(repo_path, "reconcile", slug)
    assert done.returncode == 1
    assert "is archived" in done.stderr
    with pytest.raises(AgentrunError):
        request_reconcile(repo, slug)
