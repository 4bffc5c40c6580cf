"""``git agentrun pulls`` core functions: listing, checkout, and finishing builds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest
from conftest import git
from runner.helpers import run_cli

from agentrun.commands.control import request_resume
from agentrun.commands.pulls import (
    checkout_pull,
    close_pull,
    diff_pull,
    list_pulls,
    merge_pull,
    show_pull,
)
from agentrun.errors import ForgeError, UnknownBuildError
from agentrun.events import BuildCreated, HumanActor, ProposalClosed
from agentrun.forge.local import LocalForge
from agentrun.kernel.draft import Draft
from agentrun.store.archive import archived
from agentrun.store.lease import acquire
from agentrun.store.log import EventLog

SLUG = "fix-login"
BRANCH = f"agentrun/{SLUG}"


def commit_on(repo: pygit2.Repository, branch: str, files: dict[str, str]) -> str:
    """A commit on ``branch`` (created from main) without touching the working tree."""
    ref = repo.references.get(f"refs/heads/{branch}") or repo.references["refs/heads/main"]
    parent = repo[ref.target].peel(pygit2.Commit)
    builder = repo.TreeBuilder(parent.tree)
    for name, text in files.items():
        builder.insert(name, repo.create_blob(text), pygit2.GIT_FILEMODE_BLOB)
    sig = pygit2.Signature("Test Author", "author@example.com")
    message = f"change {', '.join(files)}"
    oid = repo.create_commit(None, sig, sig, message, builder.write(), [parent.id])
    repo.references.create(f"refs/heads/{branch}", oid, force=True)
    return str(oid)


def start_build(repo: pygit2.Repository, slug: str = SLUG) -> None:
    # The repository's own config pins who "the user" is: libgit2 reads the global
    # config from the HOME it saw first in this process, not the test's HOME.
    repo.config["user.email"] = "reviewer@example.com"
    base_sha = str(repo.references["refs/heads/main"].target)
    created = BuildCreated(goal="fix login", base_ref="main", base_sha=base_sha, branch=BRANCH)
    EventLog(repo).append(slug, [Draft(created)], None)


def open_pull(repo: pygit2.Repository, build: str | None = SLUG, ready: bool = True) -> int:
    """A proposal of the build branch; ready for review, as after a green build."""
    commit_on(repo, BRANCH, {"login.py": "fixed = True\n"})
    forge = LocalForge(repo)
    number = forge.open_draft("Fix login", "body", BRANCH, "main", build).number
    if ready:
        forge.mark_ready(number)
    return number


def assert_finished(repo: pygit2.Repository, number: int, merged: bool) -> None:
    """The build got a proposal.closed event from the user and was archived."""
    assert repo.references.get(f"refs/agentrun/builds/{SLUG}") is None
    entry = repo[repo.references["refs/agentrun/archive"].target].peel(pygit2.Commit)
    record = json.loads(entry.message.partition("\n\n")[2])
    assert (record["slug"], record["state"]) == (SLUG, "running")
    last = record["tip"]
    assert str(entry.parent_ids[-1]) == last
    event = EventLog(repo).event_at(last)
    assert event.type == "proposal.closed"
    assert event.payload == ProposalClosed(number=number, merged=merged)
    assert event.actor == HumanActor(login="reviewer@example.com")
    assert event.seq == 2


def test_list_and_show(repo: pygit2.Repository) -> None:
    assert list_pulls(repo) == []
    first = open_pull(repo, build=None)
    commit_on(repo, "agentrun/other", {"other.txt": "x\n"})
    second = LocalForge(repo).open_draft("Other", "", "agentrun/other", "main", None).number
    assert [p.number for p in list_pulls(repo)] == [second, first]
    info, commits = show_pull(repo, first)
    assert info.title == "Fix login"
    assert commits == [(str(repo.references[f"refs/heads/{BRANCH}"].target), "change login.py")]


def test_show_of_an_unknown_number(repo: pygit2.Repository) -> None:
    with pytest.raises(ForgeError, match="no proposal #5"):
        show_pull(repo, 5)


def test_checkout_puts_a_pulls_branch_at_the_head(repo: pygit2.Repository, repo_path: Path) -> None:
    number = open_pull(repo, build=None)
    head = git(repo_path, "rev-parse", BRANCH)
    assert checkout_pull(repo, number) == f"pulls/{number}"
    assert git(repo_path, "symbolic-ref", "HEAD") == f"refs/heads/pulls/{number}"
    assert git(repo_path, "rev-parse", "HEAD") == head
    assert (repo_path / "login.py").read_text() == "fixed = True\n"


def test_checkout_works_while_the_build_worktree_holds_the_branch(
    repo: pygit2.Repository, repo_path: Path, tmp_path: Path
) -> None:
    number = open_pull(repo, build=None)
    git(repo_path, "worktree", "add", "-q", str(tmp_path / "build-tree"), BRANCH)
    assert checkout_pull(repo, number) == f"pulls/{number}"
    assert git(repo_path, "rev-parse", "HEAD") == git(repo_path, "rev-parse", BRANCH)


def test_checkout_again_moves_on_to_the_new_head(repo: pygit2.Repository, repo_path: Path) -> None:
    number = open_pull(repo, build=None)
    checkout_pull(repo, number)
    git(repo_path, "checkout", "-q", "main")
    newer = commit_on(repo, BRANCH, {"login.py": "fixed = 2\n"})
    checkout_pull(repo, number)
    assert git(repo_path, "rev-parse", f"pulls/{number}") == newer
    assert (repo_path / "login.py").read_text() == "fixed = 2\n"


def test_checkout_refuses_to_drop_commits_made_on_the_pulls_branch(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    number = open_pull(repo, build=None)
    checkout_pull(repo, number)
    (repo_path / "mine.txt").write_text("my own work\n")
    git(repo_path, "add", "mine.txt")
    git(repo_path, "commit", "-q", "-m", "my own work")
    mine = git(repo_path, "rev-parse", "HEAD")
    commit_on(repo, BRANCH, {"login.py": "fixed = 2\n"})
    with pytest.raises(ForgeError, match=f"pulls/{number} has commits that proposal #{number}"):
        checkout_pull(repo, number)
    assert git(repo_path, "rev-parse", f"pulls/{number}") == mine


def test_checkout_refuses_uncommitted_changes(repo: pygit2.Repository, repo_path: Path) -> None:
    number = open_pull(repo, build=None)
    (repo_path / "README.md").write_text("editing\n")
    with pytest.raises(ForgeError, match=r"uncommitted changes to tracked files \(README\.md\)"):
        checkout_pull(repo, number)
    assert git(repo_path, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert (repo_path / "README.md").read_text() == "editing\n"


def test_checkout_refused_by_git_names_the_reason(repo: pygit2.Repository, repo_path: Path) -> None:
    number = open_pull(repo, build=None)
    (repo_path / "login.py").write_text("untracked, in the way\n")
    with pytest.raises(ForgeError, match=r"git checkout failed .*would be overwritten"):
        checkout_pull(repo, number)
    assert git(repo_path, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert (repo_path / "login.py").read_text() == "untracked, in the way\n"


def test_checkout_of_a_deleted_branch_uses_the_recorded_head(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    number = open_pull(repo, build=None)
    head = git(repo_path, "rev-parse", BRANCH)
    git(repo_path, "branch", "-D", BRANCH)
    checkout_pull(repo, number)
    assert git(repo_path, "rev-parse", "HEAD") == head


def test_show_diff_and_stat_against_the_base(repo: pygit2.Repository, repo_path: Path) -> None:
    number = open_pull(repo, build=None)
    # The base moving on does not show up in the proposal's change (base...head).
    (repo_path / "README.md").write_text("hello again\n")
    git(repo_path, "commit", "-q", "-am", "base moves")
    diff = diff_pull(repo, number)
    assert "+++ b/login.py\n" in diff and "+fixed = True\n" in diff
    assert "README.md" not in diff
    stat = diff_pull(repo, number, stat=True)
    assert stat.splitlines()[0].split() == ["login.py", "|", "1", "+"]
    assert stat.splitlines()[-1].strip() == "1 file changed, 1 insertion(+)"


def test_a_merged_proposal_whose_commits_were_pruned_shows_and_says_why_it_has_no_diff(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    number = open_pull(repo, build=None)
    merge_pull(repo, number)  # squashed: the build's own commit is on no branch now
    git(repo_path, "branch", "-D", BRANCH)
    git(repo_path, "reflog", "expire", "--all", "--expire=now")
    git(repo_path, "gc", "-q", "--prune=now")
    fresh = pygit2.Repository(str(repo_path))

    info, commits = show_pull(fresh, number)

    assert (info.state, commits) == ("merged", [])
    with pytest.raises(ForgeError, match=r"is no longer in this repository .*nothing to compare"):
        diff_pull(fresh, number)


def test_a_clone_reads_a_proposal_from_its_remote_tracking_branches(
    repo: pygit2.Repository, repo_path: Path, tmp_path: Path
) -> None:
    number = open_pull(repo, build=None)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo_path, "push", "-q", str(origin), "main", BRANCH, "refs/agentrun/*:refs/agentrun/*")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-checkout", str(origin), str(clone))
    git(clone, "fetch", "-q", "origin", "refs/agentrun/*:refs/agentrun/*")
    git(clone, "update-ref", "-d", "refs/heads/main")  # only origin/* branches here
    cloned = pygit2.Repository(str(clone))

    stat = diff_pull(cloned, number, stat=True)

    assert stat.splitlines()[0].split() == ["login.py", "|", "1", "+"]
    assert [subject for _, subject in show_pull(cloned, number)[1]] == ["change login.py"]


def test_merge_squashes_into_one_commit_named_for_the_proposal(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    start_build(repo)
    commit_on(repo, BRANCH, {"one.txt": "1\n"})
    number = open_pull(repo)  # a second commit on the branch
    base = git(repo_path, "rev-parse", "main")
    head = git(repo_path, "rev-parse", BRANCH)

    sha = merge_pull(repo, number)

    assert git(repo_path, "rev-parse", "main") == sha
    assert git(repo_path, "rev-parse", f"{sha}^@").split() == [base]  # one parent: the base
    assert git(repo_path, "rev-parse", f"{sha}^{{tree}}") == git(
        repo_path, "rev-parse", f"{head}^{{tree}}"
    )
    assert git(repo_path, "log", "-1", "--format=%B", sha) == (
        f"Fix login\n\nfix login\n\nAgentrun-Build: {SLUG}"
    )
    assert (repo_path / "login.py").read_text() == "fixed = True\n"  # the checkout moved
    assert_finished(repo, number, merged=True)
    # What was merged stays visible.
    assert "+fixed = True" in diff_pull(repo, number)


def test_merging_a_proposal_that_changes_nothing_makes_no_empty_commit(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    start_build(repo)
    base = git(repo_path, "rev-parse", "main")
    commit_on(repo, BRANCH, {"README.md": (repo_path / "README.md").read_text()})
    forge = LocalForge(repo)
    number = forge.open_draft("Nothing to do", "body", BRANCH, "main", SLUG).number
    forge.mark_ready(number)

    done = run_cli(repo_path, "pulls", "merge", str(number))

    assert done.returncode == 0, done.stderr
    assert f"merged #{number}: it changes nothing, so no commit was made" in done.stdout
    assert git(repo_path, "rev-parse", "main") == base
    assert_finished(repo, number, merged=True)


def test_a_squash_over_a_moved_base_holds_both_changes(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    start_build(repo)
    number = open_pull(repo)
    (repo_path / "other.txt").write_text("base work\n")
    git(repo_path, "add", "other.txt")
    git(repo_path, "commit", "-q", "-m", "base moves")
    base = git(repo_path, "rev-parse", "main")

    sha = merge_pull(repo, number)

    assert git(repo_path, "rev-parse", f"{sha}^@").split() == [base]
    assert git(repo_path, "show", f"{sha}:login.py") == "fixed = True"
    assert git(repo_path, "show", f"{sha}:other.txt") == "base work"


def test_merge_pull_records_the_merge_and_archives_the_build(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    start_build(repo)
    number = open_pull(repo)
    head = str(repo.references[f"refs/heads/{BRANCH}"].target)
    assert merge_pull(repo, number, squash=False) == head
    assert git(repo_path, "rev-parse", "main") == head
    assert LocalForge(repo).get(number).state == "merged"
    assert_finished(repo, number, merged=True)


def test_close_pull_records_the_close_and_archives_the_build(repo: pygit2.Repository) -> None:
    start_build(repo)
    number = open_pull(repo)
    base = str(repo.references["refs/heads/main"].target)
    close_pull(repo, number)
    assert str(repo.references["refs/heads/main"].target) == base
    assert LocalForge(repo).get(number).state == "closed"
    assert_finished(repo, number, merged=False)


def test_archived_lists_the_finished_build(repo: pygit2.Repository) -> None:
    start_build(repo)
    number = open_pull(repo)
    merge_pull(repo, number)
    assert SLUG in archived(repo)


def test_a_proposal_without_a_live_build_only_changes_the_proposal(
    repo: pygit2.Repository,
) -> None:
    first = open_pull(repo, build=None)
    close_pull(repo, first)
    second = open_pull(repo, build="never-logged")
    merge_pull(repo, second)
    assert LocalForge(repo).get(second).state == "merged"
    assert repo.references.get("refs/agentrun/archive") is None


def test_merge_pull_finishes_a_build_an_earlier_merge_left_live(
    repo: pygit2.Repository,
) -> None:
    start_build(repo)
    number = open_pull(repo)
    new_base = LocalForge(repo).merge(number)  # as if interrupted before the archive
    assert merge_pull(repo, number) == new_base
    assert_finished(repo, number, merged=True)


def test_close_pull_finishes_a_build_an_earlier_close_left_live(
    repo: pygit2.Repository,
) -> None:
    start_build(repo)
    number = open_pull(repo)
    LocalForge(repo).close(number)
    close_pull(repo, number)
    assert_finished(repo, number, merged=False)


@pytest.mark.parametrize("action", [merge_pull, close_pull])
def test_finished_proposals_are_refused_once_their_build_is_archived(
    repo: pygit2.Repository, action: object
) -> None:
    start_build(repo)
    number = open_pull(repo)
    merge_pull(repo, number)
    assert callable(action)
    with pytest.raises(ForgeError, match="is merged: only an open one"):
        action(repo, number)


def test_merge_pull_refused_on_conflict_leaves_the_build_live(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    start_build(repo)
    commit_on(repo, BRANCH, {"README.md": "theirs\n"})
    number = LocalForge(repo).open_draft("Fix", "", BRANCH, "main", SLUG).number
    LocalForge(repo).mark_ready(number)
    (repo_path / "README.md").write_text("ours\n")
    git(repo_path, "commit", "-q", "-am", "ours")
    with pytest.raises(ForgeError, match="conflicts"):
        merge_pull(repo, number)
    assert repo.references.get(f"refs/agentrun/builds/{SLUG}") is not None
    assert [s.event.type for s in EventLog(repo).read(SLUG)] == ["build.created"]


def test_a_draft_is_merged_only_with_force(repo: pygit2.Repository) -> None:
    start_build(repo)
    number = open_pull(repo, ready=False)
    base = str(repo.references["refs/heads/main"].target)
    with pytest.raises(ForgeError, match="still a draft"):
        merge_pull(repo, number)
    assert str(repo.references["refs/heads/main"].target) == base
    assert LocalForge(repo).get(number).state == "open"
    merge_pull(repo, number, force=True)
    assert_finished(repo, number, merged=True)


@pytest.mark.parametrize("finish", [merge_pull, close_pull])
def test_a_running_build_is_not_finished_under_its_runner(
    repo: pygit2.Repository, finish: Callable[[pygit2.Repository, int], object]
) -> None:
    start_build(repo)
    number = open_pull(repo)
    acquire(repo, SLUG, "runner-a")
    with pytest.raises(ForgeError, match=f"build {SLUG} of #{number} is running"):
        finish(repo, number)
    assert LocalForge(repo).get(number).state == "open"
    assert repo.references.get(f"refs/agentrun/builds/{SLUG}") is not None


def test_an_archived_build_says_so_when_steered(repo: pygit2.Repository) -> None:
    start_build(repo)
    merge_pull(repo, open_pull(repo))
    with pytest.raises(UnknownBuildError, match=f"build {SLUG} is archived"):
        request_resume(repo, SLUG)


def test_a_squash_message_carries_no_secret(repo: pygit2.Repository, repo_path: Path) -> None:
    from hook.hookrepo import GITHUB

    start_build(repo)
    commit_on(repo, BRANCH, {"login.py": "fixed = True\n"})
    forge = LocalForge(repo)
    number = forge.open_draft(f"Fix login with {GITHUB}", "body", BRANCH, "main", SLUG).number
    forge.mark_ready(number)
    sha = merge_pull(repo, number)
    message = git(repo_path, "log", "-1", "--format=%B", sha)
    assert GITHUB not in message
    assert message.startswith("Fix login with [redacted]\n")
