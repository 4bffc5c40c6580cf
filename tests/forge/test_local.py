"""The local forge: storage under refs/agentrun/pulls, races, merge and close."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pygit2
import pytest
from conftest import git

from agentrun.errors import ForgeError
from agentrun.forge.base import open_forge
from agentrun.forge.local import LocalForge


def commit_on(
    repo: pygit2.Repository, branch: str, files: dict[str, str], start: str = "main"
) -> str:
    """A commit on ``branch`` (created from ``start``) without touching the working tree."""
    ref = repo.references.get(f"refs/heads/{branch}") or repo.references[f"refs/heads/{start}"]
    parent = repo[ref.target].peel(pygit2.Commit)
    builder = repo.TreeBuilder(parent.tree)
    for name, text in files.items():
        builder.insert(name, repo.create_blob(text), pygit2.GIT_FILEMODE_BLOB)
    sig = pygit2.Signature("Test Author", "author@example.com")
    message = f"change {', '.join(files)}"
    oid = repo.create_commit(None, sig, sig, message, builder.write(), [parent.id])
    repo.references.create(f"refs/heads/{branch}", oid, force=True)
    return str(oid)


def commit_in_workdir(path: Path, files: dict[str, str]) -> str:
    """A commit on the checked-out branch, made the way a user makes one."""
    for name, text in files.items():
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", f"user change {', '.join(files)}")
    return git(path, "rev-parse", "HEAD")


def tip(repo: pygit2.Repository, branch: str) -> str:
    return str(repo.references[f"refs/heads/{branch}"].target)


@pytest.fixture
def forge(repo: pygit2.Repository) -> LocalForge:
    return LocalForge(repo)


def open_one(
    forge: LocalForge, head: str = "agentrun/a", files: dict[str, str] | None = None
) -> int:
    commit_on(forge.repo, head, files or {"feature.txt": "feature\n"})
    return forge.open_draft("Add feature", "body", head, "main", None).number


# --- storage ---------------------------------------------------------------


def test_registers_itself_as_local(repo: pygit2.Repository) -> None:
    assert isinstance(open_forge(repo, "local"), LocalForge)
    assert LocalForge.name == "local"


def test_proposal_is_a_chain_of_commits_holding_proposal_json(forge: LocalForge) -> None:
    number = open_one(forge)
    forge.update_body(number, "new body")
    ref = forge.repo.references[f"refs/agentrun/pulls/{number}"]
    commit = forge.repo[ref.target].peel(pygit2.Commit)
    assert [entry.name for entry in commit.tree] == ["proposal.json"]
    data = json.loads(forge.repo[commit.tree["proposal.json"].id].peel(pygit2.Blob).data)
    assert data["number"] == number
    assert data["body"] == "new body"
    assert data["head"] == "agentrun/a"
    assert data["state"] == "open"
    assert data["head_sha"] == tip(forge.repo, "agentrun/a")
    assert set(data) >= {"title", "base", "draft", "build", "created_at", "updated_at"}
    assert set(data) >= {"status_comment_id", "comments"}
    parent = commit.parents[0]
    assert (
        json.loads(forge.repo[parent.tree["proposal.json"].id].peel(pygit2.Blob).data)["body"]
        == "body"
    )
    assert parent.parents == []


def test_url_and_number_start_at_one(forge: LocalForge) -> None:
    number = open_one(forge)
    assert number == 1
    assert forge.get(1).url == "agentrun:pulls/1"


def test_get_of_a_missing_number_says_how_to_list(forge: LocalForge) -> None:
    with pytest.raises(ForgeError, match=r"no proposal #7: `git agentrun pulls` lists them"):
        forge.get(7)


def test_a_broken_proposal_ref_is_a_forge_error(forge: LocalForge) -> None:
    main = forge.repo.references["refs/heads/main"].target
    forge.repo.references.create("refs/agentrun/pulls/3", main)
    with pytest.raises(ForgeError, match="does not hold a proposal"):
        forge.get(3)


# --- opening and pushing ---------------------------------------------------------


def test_open_draft_refuses_missing_branches_and_head_equal_base(forge: LocalForge) -> None:
    with pytest.raises(ForgeError, match="no branch 'agentrun/none'"):
        forge.open_draft("t", "b", "agentrun/none", "main", None)
    commit_on(forge.repo, "agentrun/a", {"f": "x"})
    with pytest.raises(ForgeError, match="no branch 'nowhere'"):
        forge.open_draft("t", "b", "agentrun/a", "nowhere", None)
    with pytest.raises(ForgeError, match="two branches"):
        forge.open_draft("t", "b", "main", "main", None)
    assert forge.list() == []


def test_push_branch_checks_the_branch_is_at_the_sha(forge: LocalForge) -> None:
    sha = commit_on(forge.repo, "agentrun/a", {"f": "x"})
    with pytest.raises(ForgeError, match="no branch 'agentrun/b'"):
        forge.push_branch("agentrun/b", sha)
    with pytest.raises(ForgeError, match="is at"):
        forge.push_branch("agentrun/a", tip(forge.repo, "main"))
    forge.push_branch("agentrun/a", sha)


def test_push_branch_records_the_head_only_on_open_proposals(forge: LocalForge) -> None:
    first = open_one(forge)
    old = forge.get(first).head_sha
    forge.close(first)
    second = forge.open_draft("again", "", "agentrun/a", "main", None).number
    newer = commit_on(forge.repo, "agentrun/a", {"g": "y"})
    forge.push_branch("agentrun/a", newer)
    assert forge.get(first).head_sha == old
    assert forge.get(second).head_sha == newer


def test_find_open_returns_the_newest_open_and_skips_closed(forge: LocalForge) -> None:
    first = open_one(forge)
    assert forge.find_open("agentrun/a") == forge.get(first)
    forge.close(first)
    assert forge.find_open("agentrun/a") is None
    second = forge.open_draft("again", "", "agentrun/a", "main", None).number
    found = forge.find_open("agentrun/a")
    assert found is not None
    assert found.number == second


def test_status_comment_edit_changes_updated_at_but_keeps_id(forge: LocalForge) -> None:
    number = open_one(forge)
    first = forge.upsert_status_comment(number, "one")
    time.sleep(0.002)
    second = forge.upsert_status_comment(number, "two")
    assert (second.id, second.author, second.created_at) == (first.id, "agentrun", first.created_at)
    assert second.updated_at > first.updated_at
    stored = json.loads(
        forge.repo[
            forge.repo[forge.repo.references["refs/agentrun/pulls/1"].target]
            .peel(pygit2.Commit)
            .tree["proposal.json"]
            .id
        ]
        .peel(pygit2.Blob)
        .data
    )
    assert stored["status_comment_id"] == first.id


def test_unchanged_status_comment_writes_nothing(forge: LocalForge) -> None:
    number = open_one(forge)
    forge.upsert_status_comment(number, "same")
    before = forge.repo.references[f"refs/agentrun/pulls/{number}"].target
    forge.upsert_status_comment(number, "same")
    assert forge.repo.references[f"refs/agentrun/pulls/{number}"].target == before


def test_comment_ids_start_at_one_per_proposal(forge: LocalForge) -> None:
    a = open_one(forge, "agentrun/a")
    b = open_one(forge, "agentrun/b")
    assert forge.comment(a, "x").id == 1
    assert forge.comment(a, "y").id == 2
    assert forge.comment(b, "z").id == 1


def test_mark_ready_refuses_a_closed_proposal(forge: LocalForge) -> None:
    number = open_one(forge)
    forge.close(number)
    with pytest.raises(ForgeError, match="is closed"):
        forge.mark_ready(number)


# --- races -------------------------------------------------------------------

RACER = textwrap.dedent(
    """
    import pathlib, sys, time
    import pygit2
    from agentrun.forge.local import LocalForge

    repo_path, go, ready, action, *args = sys.argv[1:]
    forge = LocalForge(pygit2.Repository(repo_path))
    pathlib.Path(ready).touch()
    while not pathlib.Path(go).exists():
        time.sleep(0.001)
    for arg in args:
        if action == "open":
            print(forge.open_draft("t", "b", arg, "main", None).number)
        else:
            print(forge.comment(1, arg).id)
    """
)


def race(tmp_path: Path, repo_path: Path, action: str, per_process: list[list[str]]) -> list[int]:
    """Run one racer per argument list, released together; the numbers they printed."""
    go = tmp_path / "go"
    procs = []
    for i, args in enumerate(per_process):
        ready = tmp_path / f"ready-{i}"
        cmd = [sys.executable, "-c", RACER, str(repo_path), str(go), str(ready), action, *args]
        procs.append((ready, subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 60
    while not all(ready.exists() for ready, _ in procs):
        assert time.monotonic() < deadline, "racers did not start"
        time.sleep(0.01)
    go.touch()
    found: list[int] = []
    for _, proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        found.extend(int(line) for line in out.split())
    return found


def test_concurrent_openers_get_distinct_numbers(
    forge: LocalForge, tmp_path: Path, repo_path: Path
) -> None:
    heads = [f"agentrun/h{i}" for i in range(32)]
    for head in heads:
        commit_on(forge.repo, head, {"f": head})
    found = race(tmp_path, repo_path, "open", [heads[i::4] for i in range(4)])
    assert sorted(found) == list(range(1, 33))
    assert sorted(p.head for p in forge.list()) == sorted(heads)


def test_concurrent_commenters_lose_nothing(
    forge: LocalForge, tmp_path: Path, repo_path: Path
) -> None:
    open_one(forge)
    bodies = [[f"p{p}-c{c}" for c in range(8)] for p in range(3)]
    ids = race(tmp_path, repo_path, "comment", bodies)
    assert sorted(ids) == list(range(1, 25))
    stored = forge.comments_since(1, 0)
    assert sorted(c.body for c in stored) == sorted(b for group in bodies for b in group)


# --- merge -------------------------------------------------------------------


def test_merge_fast_forwards_a_base_that_is_not_checked_out(
    forge: LocalForge, repo_path: Path
) -> None:
    git(repo_path, "branch", "release")
    head_sha = commit_on(forge.repo, "agentrun/a", {"feature.txt": "x\n"}, start="release")
    number = forge.open_draft("A", "", "agentrun/a", "release", None).number
    assert forge.merge(number) == head_sha
    assert tip(forge.repo, "release") == head_sha
    assert forge.get(number).state == "merged"
    assert not (repo_path / "feature.txt").exists()  # main's working tree is not release's


def test_merge_updates_the_checked_out_working_tree(forge: LocalForge, repo_path: Path) -> None:
    number = open_one(forge, files={"feature.txt": "feature\n"})
    head_sha = tip(forge.repo, "agentrun/a")
    assert forge.merge(number) == head_sha
    assert tip(forge.repo, "main") == head_sha
    assert (repo_path / "feature.txt").read_text() == "feature\n"
    assert git(repo_path, "status", "--porcelain") == ""
    assert git(repo_path, "symbolic-ref", "HEAD") == "refs/heads/main"


def test_merge_makes_a_merge_commit_when_the_base_moved(forge: LocalForge, repo_path: Path) -> None:
    head_sha = commit_on(forge.repo, "agentrun/a", {"feature.txt": "feature\n"})
    number = forge.open_draft("Add feature", "", "agentrun/a", "main", None).number
    base_sha = commit_in_workdir(repo_path, {"other.txt": "other\n"})
    new = forge.merge(number)
    merge = forge.repo[new].peel(pygit2.Commit)
    assert [str(p) for p in merge.parent_ids] == [base_sha, head_sha]
    assert merge.message.startswith("Merge proposal #1 from agentrun/a")
    assert {e.name for e in merge.tree} == {"README.md", "feature.txt", "other.txt"}
    assert tip(forge.repo, "main") == new
    assert (repo_path / "feature.txt").read_text() == "feature\n"
    assert git(repo_path, "status", "--porcelain") == ""


def test_merge_conflict_is_refused_and_changes_nothing(forge: LocalForge, repo_path: Path) -> None:
    number = open_one(forge, files={"README.md": "theirs\n"})
    base_sha = commit_in_workdir(repo_path, {"README.md": "ours\n"})
    with pytest.raises(ForgeError, match=r"conflicts with main in README\.md"):
        forge.merge(number)
    assert tip(forge.repo, "main") == base_sha
    assert forge.get(number).state == "open"
    assert (repo_path / "README.md").read_text() == "ours\n"
    assert git(repo_path, "status", "--porcelain") == ""


@pytest.mark.parametrize("staged", [False, True])
def test_merge_refuses_a_dirty_checked_out_base(
    forge: LocalForge, repo_path: Path, staged: bool
) -> None:
    number = open_one(forge)
    base_sha = tip(forge.repo, "main")
    (repo_path / "README.md").write_text("work in progress\n")
    if staged:
        git(repo_path, "add", "README.md")
    with pytest.raises(ForgeError, match="uncommitted changes"):
        forge.merge(number)
    assert tip(forge.repo, "main") == base_sha
    assert forge.get(number).state == "open"
    assert (repo_path / "README.md").read_text() == "work in progress\n"
    assert not (repo_path / "feature.txt").exists()


def test_merge_refuses_when_an_untracked_file_is_in_the_way(
    forge: LocalForge, repo_path: Path
) -> None:
    number = open_one(forge, files={"feature.txt": "feature\n"})
    base_sha = tip(forge.repo, "main")
    (repo_path / "feature.txt").write_text("mine, untracked\n")
    with pytest.raises(ForgeError, match="untracked"):
        forge.merge(number)
    assert tip(forge.repo, "main") == base_sha
    assert forge.get(number).state == "open"
    assert (repo_path / "feature.txt").read_text() == "mine, untracked\n"


def test_merge_keeps_unrelated_untracked_files(forge: LocalForge, repo_path: Path) -> None:
    number = open_one(forge)
    (repo_path / "notes.txt").write_text("scratch\n")
    forge.merge(number)
    assert (repo_path / "notes.txt").read_text() == "scratch\n"
    assert (repo_path / "feature.txt").exists()


def test_merge_updates_a_linked_worktree_that_has_the_base(
    forge: LocalForge, repo_path: Path, tmp_path: Path
) -> None:
    git(repo_path, "branch", "release")
    linked = tmp_path / "release-tree"
    git(repo_path, "worktree", "add", "-q", str(linked), "release")
    head_sha = commit_on(forge.repo, "agentrun/a", {"feature.txt": "x\n"}, start="release")
    number = forge.open_draft("A", "", "agentrun/a", "release", None).number
    forge.merge(number)
    assert git(linked, "rev-parse", "HEAD") == head_sha
    assert (linked / "feature.txt").read_text() == "x\n"
    assert git(linked, "status", "--porcelain") == ""


def test_merge_of_a_head_already_in_the_base_keeps_the_base(
    forge: LocalForge, repo_path: Path
) -> None:
    number = open_one(forge)
    git(repo_path, "merge", "-q", "--ff-only", "agentrun/a")
    base_sha = commit_in_workdir(repo_path, {"later.txt": "later\n"})
    assert forge.merge(number) == base_sha
    assert forge.get(number).state == "merged"


def test_merge_refuses_when_the_head_branch_is_gone(forge: LocalForge, repo_path: Path) -> None:
    number = open_one(forge)
    git(repo_path, "branch", "-D", "agentrun/a")
    with pytest.raises(ForgeError, match="no longer exists"):
        forge.merge(number)
    assert forge.get(number).state == "open"


def test_commits_lists_base_to_head_oldest_first(forge: LocalForge) -> None:
    first = commit_on(forge.repo, "agentrun/a", {"one.txt": "1\n"})
    second = commit_on(forge.repo, "agentrun/a", {"two.txt": "2\n"})
    number = forge.open_draft("A", "", "agentrun/a", "main", None).number
    assert forge.commits(number) == [(first, "change one.txt"), (second, "change two.txt")]


# --- close and non-open proposals ----------------------------------------------------


def test_close_marks_closed_and_leaves_the_base_alone(forge: LocalForge) -> None:
    number = open_one(forge)
    base_sha = tip(forge.repo, "main")
    forge.close(number)
    assert forge.get(number).state == "closed"
    assert tip(forge.repo, "main") == base_sha


@pytest.mark.parametrize("first", ["merge", "close"])
@pytest.mark.parametrize("then", ["merge", "close"])
def test_only_open_proposals_merge_or_close(forge: LocalForge, first: str, then: str) -> None:
    number = open_one(forge)
    getattr(forge, first)(number)
    state = forge.get(number).state
    with pytest.raises(ForgeError, match=f"#{number} is {state}: only an open one"):
        getattr(forge, then)(number)
    assert forge.get(number).state == state


@pytest.mark.parametrize("action", ["merge", "close", "commits"])
def test_unknown_numbers_are_forge_errors(forge: LocalForge, action: str) -> None:
    with pytest.raises(ForgeError, match="no proposal #9"):
        getattr(forge, action)(9)
