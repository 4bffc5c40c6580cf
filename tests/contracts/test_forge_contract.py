"""The behaviour every forge shares (DESIGN §8), run against each implementation.

A factory builds a ``ForgeCase``: the forge under test plus the local repository whose
branches it publishes. The local forge, and the gitlab forge against the fake GitLab of
``support.gitlab_api`` (every request checked against GitLab's API description); github
adds a factory when its Prism server can keep state.

Where a hosted forge differs by nature, the case says how: it credits every comment to
the token's owner (``credits``), and its status comment carries the marker line it is
found again by (``marker``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo
from support.gitlab_api import BOT, GitLabAPI

from agentrun.errors import ForgeError
from agentrun.forge.base import Forge
from agentrun.forge.local import LocalForge


@dataclass
class ForgeCase:
    forge: Forge
    repo: pygit2.Repository
    credits: str | None = None  # who every comment is by, whatever author is asked for
    marker: str = ""  # the status comment's first line, before the status itself

    def author(self, asked: str) -> str:
        return self.credits or asked

    def status(self, text: str) -> str:
        return f"{self.marker}\n{text}" if self.marker else text

    def commit(self, branch: str, name: str, text: str) -> str:
        """A new commit on ``branch`` (created from main) in the local repository."""
        ref = self.repo.references.get(f"refs/heads/{branch}")
        target = ref.target if ref is not None else self.repo.references["refs/heads/main"].target
        parent = self.repo[target].peel(pygit2.Commit)
        builder = self.repo.TreeBuilder(parent.tree)
        builder.insert(name, self.repo.create_blob(text), pygit2.GIT_FILEMODE_BLOB)
        sig = pygit2.Signature("Test Author", "author@example.com")
        oid = self.repo.create_commit(
            None, sig, sig, f"change {name}", builder.write(), [parent.id]
        )
        self.repo.references.create(f"refs/heads/{branch}", oid, force=True)
        return str(oid)

    def publish(self, branch: str, name: str = "feature.txt", text: str = "new\n") -> str:
        sha = self.commit(branch, name, text)
        self.forge.push_branch(branch, sha)
        return sha


def _local(tmp_path: Path, stack: ExitStack, monkeypatch: pytest.MonkeyPatch) -> ForgeCase:
    repo = pygit2.Repository(str(make_repo(tmp_path / "repo")))
    return ForgeCase(LocalForge(repo), repo)


def _gitlab(tmp_path: Path, stack: ExitStack, monkeypatch: pytest.MonkeyPatch) -> ForgeCase:
    from agentrun.forge.base import STATUS_MARKER
    from agentrun.forge.gitlab import GitLabForge

    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    path = make_repo(tmp_path / "repo")
    git(path, "remote", "add", "origin", f"file://{origin}")
    git(path, "push", "-q", "origin", "main")
    api = GitLabAPI(origin)
    stack.callback(api.close)
    stack.callback(api.assert_accepted)  # runs first: every request was GitLab's kind
    for key, value in api.env().items():
        monkeypatch.setenv(key, value)
    repo = pygit2.Repository(str(path))
    return ForgeCase(GitLabForge(repo), repo, credits=BOT, marker=STATUS_MARKER)


Factory = Callable[[Path, ExitStack, pytest.MonkeyPatch], ForgeCase]
FACTORIES: dict[str, Factory] = {"local": _local, "gitlab": _gitlab}


@pytest.fixture(params=sorted(FACTORIES))
def case(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ForgeCase]:
    with ExitStack() as stack:
        yield FACTORIES[request.param](tmp_path, stack, monkeypatch)


def test_open_draft_returns_an_open_draft(case: ForgeCase) -> None:
    sha = case.publish("agentrun/fix-login")
    info = case.forge.open_draft("Fix login", "the body", "agentrun/fix-login", "main", "fix-login")
    assert info.number > 0
    assert (info.title, info.body, info.head, info.base) == (
        "Fix login",
        "the body",
        "agentrun/fix-login",
        "main",
    )
    assert info.state == "open"
    assert info.draft is True
    assert info.build == "fix-login"
    assert info.head_sha == sha
    assert info.url
    assert info.comments == ()


def test_get_returns_what_was_opened(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    opened = case.forge.open_draft("A", "body", "agentrun/a", "main", None)
    assert case.forge.get(opened.number) == opened


def test_get_of_an_unknown_number_is_a_forge_error(case: ForgeCase) -> None:
    with pytest.raises(ForgeError):
        case.forge.get(4242)


def test_numbers_are_distinct_and_list_is_newest_first(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    case.publish("agentrun/b")
    first = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    second = case.forge.open_draft("B", "", "agentrun/b", "main", None)
    assert second.number > first.number
    assert [p.number for p in case.forge.list()] == [second.number, first.number]


def test_a_second_open_proposal_for_one_head_is_refused(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    case.forge.open_draft("A", "", "agentrun/a", "main", None)
    with pytest.raises(ForgeError):
        case.forge.open_draft("A again", "", "agentrun/a", "main", None)


def test_find_open_finds_the_proposal_of_a_head(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    case.publish("agentrun/b")
    a = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    case.forge.open_draft("B", "", "agentrun/b", "main", None)
    found = case.forge.find_open("agentrun/a")
    assert found is not None
    assert found.number == a.number
    assert case.forge.find_open("agentrun/nothing") is None


def test_push_branch_moves_the_proposal_head(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    info = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    newer = case.publish("agentrun/a", "second.txt", "more\n")
    assert case.forge.get(info.number).head_sha == newer


def test_push_branch_twice_at_one_sha_is_idempotent(case: ForgeCase) -> None:
    sha = case.publish("agentrun/a")
    info = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    case.forge.push_branch("agentrun/a", sha)
    case.forge.push_branch("agentrun/a", sha)
    assert case.forge.get(info.number).head_sha == sha


def test_update_body_replaces_the_description(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    info = case.forge.open_draft("A", "old", "agentrun/a", "main", None)
    case.forge.update_body(info.number, "new body")
    assert case.forge.get(info.number).body == "new body"


def test_status_comment_is_created_once_then_edited_in_place(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    info = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    first = case.forge.upsert_status_comment(info.number, "status: planning")
    second = case.forge.upsert_status_comment(info.number, "status: implementing")
    assert second.id == first.id
    assert second.body == case.status("status: implementing")
    assert second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    comments = case.forge.get(info.number).comments
    assert [c.body for c in comments] == [case.status("status: implementing")]


def test_comments_count_up_and_comments_since_returns_the_newer_ones(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    info = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    first = case.forge.comment(info.number, "one", author="alice")
    second = case.forge.comment(info.number, "two", author="bob")
    third = case.forge.comment(info.number, "three")
    assert first.id < second.id < third.id
    assert (first.author, first.body) == (case.author("alice"), "one")
    assert [c.body for c in case.forge.comments_since(info.number, 0)] == ["one", "two", "three"]
    assert case.forge.comments_since(info.number, first.id) == [second, third]
    assert case.forge.comments_since(info.number, third.id) == []


def test_status_comment_does_not_disturb_other_comments(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    info = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    status = case.forge.upsert_status_comment(info.number, "s1")
    human = case.forge.comment(info.number, "please fix", author="alice")
    case.forge.upsert_status_comment(info.number, "s2")
    by_id = {c.id: c for c in case.forge.get(info.number).comments}
    assert by_id[status.id].body == case.status("s2")
    assert by_id[human.id].body == "please fix"
    assert len(by_id) == 2


def test_mark_ready_takes_the_proposal_out_of_draft(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    info = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    case.forge.mark_ready(info.number)
    assert case.forge.get(info.number).draft is False
    case.forge.mark_ready(info.number)  # idempotent
    assert case.forge.get(info.number).draft is False


def test_mark_draft_puts_a_ready_proposal_back_into_draft(case: ForgeCase) -> None:
    case.publish("agentrun/a")
    info = case.forge.open_draft("A", "", "agentrun/a", "main", None)
    case.forge.mark_ready(info.number)
    case.forge.mark_draft(info.number)
    assert case.forge.get(info.number).draft is True
    case.forge.mark_draft(info.number)  # idempotent
    assert case.forge.get(info.number).draft is True


@pytest.mark.parametrize(
    "call",
    [
        lambda f: f.update_body(4242, "x"),
        lambda f: f.upsert_status_comment(4242, "x"),
        lambda f: f.comment(4242, "x"),
        lambda f: f.comments_since(4242, 0),
        lambda f: f.mark_ready(4242),
        lambda f: f.mark_draft(4242),
    ],
    ids=[
        "update_body",
        "upsert_status_comment",
        "comment",
        "comments_since",
        "mark_ready",
        "mark_draft",
    ],
)
def test_unknown_numbers_are_forge_errors(case: ForgeCase, call: Callable[[Forge], object]) -> None:
    with pytest.raises(ForgeError):
        call(case.forge)
