"""The github forge against Prism serving GitHub's own API description.

Prism validates every request against the description and answers with its fixed
examples (repository octocat/Hello-World, pull request and issue #1347, comment id 1).
So each test asserts what was sent, that GitHub's description accepted it, and how the
examples were read back.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo
from support.faults import graphql_error
from support.prism import TOKEN, GitHubAPI

from agentrun.errors import ForgeError
from agentrun.forge.base import STEER, Access, HostedForge, open_forge
from agentrun.forge.github import (
    STATUS_MARKER,
    GitHubForge,
    repository_from,
)

REPO = "/repos/octocat/Hello-World"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"


@pytest.fixture
def api(github_env: GitHubAPI) -> GitHubAPI:
    return github_env


@pytest.fixture
def local(tmp_path: Path) -> tuple[pygit2.Repository, Path]:
    """A repository whose origin is a bare repository on file://."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    path = make_repo(tmp_path / "work")
    git(path, "remote", "add", "origin", f"file://{origin}")
    git(path, "push", "-q", "origin", "main")
    return pygit2.Repository(str(path)), origin


@pytest.fixture
def forge(api: GitHubAPI, local: tuple[pygit2.Repository, Path]) -> GitHubForge:
    opened = open_forge(local[0], "github")
    assert isinstance(opened, GitHubForge)
    return opened


# --- configuration ----------------------------------------------------------------------


def test_registered_and_hosted(forge: GitHubForge) -> None:
    assert forge.name == "github"
    assert isinstance(forge, HostedForge)
    assert forge.full_name == "octocat/Hello-World"


def test_a_missing_token_names_the_variable(
    api: GitHubAPI, local: tuple[pygit2.Repository, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    with pytest.raises(ForgeError, match="set GITHUB_TOKEN"):
        open_forge(local[0], "github")
    assert api.requests == []


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("https://github.com/octo/site.git", "octo/site"),
        ("https://github.com/octo/site", "octo/site"),
        ("git@github.com:octo/my.site.git", "octo/my.site"),
        ("ssh://git@github.com/octo/site.git", "octo/site"),
    ],
)
def test_the_repository_comes_from_origin(origin: str, expected: str) -> None:
    assert repository_from({}, origin) == expected


def test_the_repository_variable_wins_and_is_checked() -> None:
    assert repository_from({"GITHUB_REPOSITORY": "a/b"}, "https://github.com/c/d") == "a/b"
    with pytest.raises(ForgeError, match="GITHUB_REPOSITORY='nope': expected owner/name"):
        repository_from({"GITHUB_REPOSITORY": "nope"}, None)
    with pytest.raises(ForgeError, match="set GITHUB_REPOSITORY=owner/name"):
        repository_from({}, "file:///srv/git/project.git")


# --- pushing ------------------------------------------------------------------------------


def test_push_branch_fast_forwards_and_never_forces(
    forge: GitHubForge, local: tuple[pygit2.Repository, Path], api: GitHubAPI
) -> None:
    repo, origin = local
    work = Path(repo.workdir)
    git(work, "switch", "-q", "-c", "agentrun/demo")
    (work / "a.txt").write_text("a\n")
    git(work, "add", "a.txt")
    git(work, "commit", "-q", "-m", "a")
    first = git(work, "rev-parse", "HEAD")
    forge.push_branch("agentrun/demo", first)
    assert git(origin, "rev-parse", "refs/heads/agentrun/demo") == first

    (work / "b.txt").write_text("b\n")
    git(work, "add", "b.txt")
    git(work, "commit", "-q", "-m", "b")
    second = git(work, "rev-parse", "HEAD")
    forge.push_branch("agentrun/demo", second)
    assert git(origin, "rev-parse", "refs/heads/agentrun/demo") == second

    # Someone else's commit on the remote branch: a diverged head is refused, not forced.
    git(work, "reset", "-q", "--hard", first)
    (work / "c.txt").write_text("c\n")
    git(work, "add", "c.txt")
    git(work, "commit", "-q", "-m", "c")
    diverged = git(work, "rev-parse", "HEAD")
    with pytest.raises(ForgeError, match="never force-pushes"):
        forge.push_branch("agentrun/demo", diverged)
    assert git(origin, "rev-parse", "refs/heads/agentrun/demo") == second
    assert api.requests == []  # pushing is git's business, not the API's


# --- proposals ------------------------------------------------------------------------------


def test_open_draft_sends_a_draft(forge: GitHubForge, api: GitHubAPI) -> None:
    info = forge.open_draft("Fix the login", "Body text", "agentrun/fix", "main", "fix")
    [sent] = api.find("POST", f"{REPO}/pulls")
    assert sent.body == {
        "base": "main",
        "head": "agentrun/fix",
        "title": "Fix the login",
        "body": "Body text",
        "draft": True,
    }
    assert sent.headers["authorization"] == f"token {TOKEN}"
    assert (info.number, info.head, info.base) == (1347, "new-topic", "master")
    api.assert_accepted()


def test_find_open_asks_for_the_head_and_checks_it(forge: GitHubForge, api: GitHubAPI) -> None:
    assert forge.find_open("agentrun/fix") is None  # the example is another branch
    found = forge.find_open("new-topic")
    assert found is not None and found.number == 1347 and found.state == "open"
    assert [r.path for r in api.requests] == [f"{REPO}/pulls"] * 2  # no refetch per item
    first = api.find("GET", f"{REPO}/pulls")[0]
    assert first.query["state"] == ["open"]
    assert first.query["head"] == ["octocat:agentrun/fix"]
    api.assert_accepted()


def test_get_list_and_update_body(forge: GitHubForge, api: GitHubAPI) -> None:
    info = forge.get(1347)
    assert (info.title, info.url) == (
        "Amazing new feature",
        "https://github.com/octocat/Hello-World/pull/1347",
    )
    listed = forge.list()
    assert [p.number for p in listed] == [1347]
    assert len(api.requests) == 2
    forge.update_body(1347, "new body")
    [patch] = api.find("PATCH", f"{REPO}/pulls/1347")
    assert patch.body == {"body": "new body"}
    assert api.find("GET", f"{REPO}/pulls")[0].query["state"] == ["all"]
    api.assert_accepted()


def test_mark_ready_is_pygithubs_graphql_mutation(forge: GitHubForge, api: GitHubAPI) -> None:
    forge.mark_ready(1347)
    [read, query] = api.requests
    assert (read.method, read.path) == ("GET", f"{REPO}/pulls/1347")  # for its node id
    assert "markPullRequestReadyForReview(input: $input)" in query.body["query"]
    assert query.body["variables"] == {"input": {"pullRequestId": "MDExOlB1bGxSZXF1ZXN0MQ=="}}
    assert query.headers["authorization"] == f"token {TOKEN}"
    assert api.readied == ["MDExOlB1bGxSZXF1ZXN0MQ=="]
    api.assert_accepted()  # GitHub's GraphQL schema accepted the mutation


def test_mark_draft_is_pygithubs_graphql_mutation(forge: GitHubForge, api: GitHubAPI) -> None:
    forge.mark_draft(1347)
    [query] = api.graphql()
    assert "convertPullRequestToDraft(input: $input)" in query.body["query"]
    assert query.body["variables"] == {"input": {"pullRequestId": "MDExOlB1bGxSZXF1ZXN0MQ=="}}
    assert api.drafted == ["MDExOlB1bGxSZXF1ZXN0MQ=="]
    api.assert_accepted()  # GitHub's GraphQL schema accepted the mutation


def test_mark_ready_reuses_the_node_id_it_saw(forge: GitHubForge, api: GitHubAPI) -> None:
    forge.open_draft("t", "b", "agentrun/x", "main", None)
    forge.mark_ready(1347)
    assert [r.method for r in api.requests] == ["POST", "POST"]  # no GET for the node id


def test_a_graphql_refusal_is_one_forge_error_line(forge: GitHubForge, api: GitHubAPI) -> None:
    forge.get(1347)
    refusal = "Resource not accessible by integration"
    api.fail("POST", "/graphql", graphql_error(refusal))
    with pytest.raises(ForgeError) as caught:
        forge.mark_ready(1347)
    assert str(caught.value) == f"github: could not mark #1347 ready for review: 400 {refusal}"
    api.assert_accepted()  # the mutation itself was valid: GitHub refused to do it


# --- comments -----------------------------------------------------------------------------


def test_status_comment_is_posted_once_then_edited(forge: GitHubForge, api: GitHubAPI) -> None:
    marker = "<!-- agentrun:status fix-login -->"
    forge.upsert_status_comment(42, f"{marker}\nplanning")
    forge.upsert_status_comment(42, f"{marker}\nimplementing")
    sent = [(r.method, r.path, r.body) for r in api.requests]
    assert sent == [
        ("GET", f"{REPO}/issues/42/comments", None),  # looking for an earlier one
        ("POST", f"{REPO}/issues/42/comments", {"body": f"{marker}\nplanning"}),
        ("PATCH", f"{REPO}/issues/comments/1", {"body": f"{marker}\nimplementing"}),
    ]
    api.assert_accepted()


def test_status_comment_without_marker_gets_one(forge: GitHubForge, api: GitHubAPI) -> None:
    comment = forge.upsert_status_comment(7, "plain status")
    [post] = api.find("POST", f"{REPO}/issues/7/comments")
    assert post.body == {"body": f"{STATUS_MARKER}\nplain status"}
    assert comment.body == f"{STATUS_MARKER}\nplain status"


def test_comment_and_comments_since(forge: GitHubForge, api: GitHubAPI) -> None:
    posted = forge.comment(42, "**Question 1**: which way?")
    assert posted.id == 1 and posted.author == "octocat"
    [post] = api.find("POST", f"{REPO}/issues/42/comments")
    assert post.body == {"body": "**Question 1**: which way?"}
    assert [c.id for c in forge.comments_since(42, 0)] == [1]
    assert forge.comments_since(42, 1) == []
    per_page = api.find("GET", f"{REPO}/issues/42/comments")[0].query.get("per_page")
    assert per_page == ["100"]
    api.assert_accepted()


def test_comments_are_read_page_by_page(forge: GitHubForge, api: GitHubAPI) -> None:
    api.two_pages(f"{REPO}/issues/42/comments")
    assert [c.id for c in forge.comments_since(42, 0)] == [1, 1]  # one per page
    pages = [r.query.get("page") for r in api.find("GET", f"{REPO}/issues/42/comments")]
    assert pages == [None, ["2"]]
    api.assert_accepted()


def test_react(forge: GitHubForge, api: GitHubAPI) -> None:
    forge.react(99, "+1")
    [post] = api.find("POST", f"{REPO}/issues/comments/99/reactions")
    assert post.body == {"content": "+1"}
    api.assert_accepted()


# --- issues, people, labels, statuses, reviews ------------------------------------------------


def test_issue(forge: GitHubForge, api: GitHubAPI) -> None:
    found = forge.issue(1347)
    assert (found.number, found.title, found.author, found.labels) == (
        1347,
        "Found a bug",
        "octocat",
        ("bug",),
    )
    assert found.is_proposal  # the example issue carries a pull_request link
    api.assert_accepted()


def test_access_reads_the_role_onto_the_scale_and_a_404_is_none(
    forge: GitHubForge, api: GitHubAPI
) -> None:
    assert forge.access("octocat") is Access.ADMIN
    api.answer_with("GET", f"{REPO}/collaborators/stranger/permission", 404)
    assert forge.access("stranger") is Access.NONE
    assert [r.path for r in api.requests] == [
        f"{REPO}/collaborators/octocat/permission",
        f"{REPO}/collaborators/stranger/permission",
    ]
    api.assert_accepted()


@pytest.mark.parametrize(
    ("role", "permission", "level"),
    [
        ("maintain", "write", Access.MAINTAIN),
        ("triage", "read", Access.TRIAGE),
        ("write", "write", Access.WRITE),
        # A custom role is named after itself; its base permission says what it may do.
        ("release-managers", "write", Access.WRITE),
        ("auditors", "read", Access.READ),
    ],
)
def test_every_github_role_lands_on_the_scale_steering_compares(
    forge: GitHubForge, api: GitHubAPI, role: str, permission: str, level: Access
) -> None:
    api.respond(
        "GET",
        f"{REPO}/collaborators/octocat/permission",
        lambda ex: {**ex, "permission": permission, "role_name": role},
    )
    found = forge.access("octocat")
    assert found is level
    assert (found >= STEER) == (level in (Access.WRITE, Access.MAINTAIN, Access.ADMIN))
    api.assert_accepted()


def test_set_labels_sends_an_object_and_ignores_absent_ones(
    forge: GitHubForge, api: GitHubAPI
) -> None:
    api.answer_with("DELETE", f"{REPO}/issues/5/labels/.*", 404)
    forge.set_labels(5, ["agentrun:running"], ["agentrun:parked", "agentrun:done"])
    [post] = api.find("POST", f"{REPO}/issues/5/labels")
    assert post.body == {"labels": ["agentrun:running"]}
    deleted = [r.path for r in api.find("DELETE", f"{REPO}/issues/5/labels/.*")]
    assert deleted == [
        f"{REPO}/issues/5/labels/agentrun%3Aparked",
        f"{REPO}/issues/5/labels/agentrun%3Adone",
    ]
    api.assert_accepted()


def test_commit_status(forge: GitHubForge, api: GitHubAPI) -> None:
    forge.set_commit_status(SHA, "agentrun/tests", "success", "x" * 200, "https://ci.example/1")
    [post] = api.find("POST", f"{REPO}/statuses/{SHA}")
    assert post.body == {
        "state": "success",
        "context": "agentrun/tests",
        "description": "x" * 140,
        "target_url": "https://ci.example/1",
    }
    api.assert_accepted()


def test_request_review(forge: GitHubForge, api: GitHubAPI) -> None:
    forge.request_review(1347, "hubot")
    [post] = api.find("POST", f"{REPO}/pulls/1347/requested_reviewers")
    assert post.body == {"reviewers": ["hubot"]}
    api.assert_accepted()


def test_reviews_since_carry_their_inline_comments(forge: GitHubForge, api: GitHubAPI) -> None:
    [review] = forge.reviews_since(1347, 0)
    assert (review.id, review.author, review.state) == (80, "octocat", "approved")
    assert review.body == "Here is the body for the review."
    assert review.comments == ("file1.txt:0: Great stuff!",)
    assert api.find("GET", f"{REPO}/pulls/1347/reviews/80/comments")
    assert forge.reviews_since(1347, 80) == []
    api.assert_accepted()


# --- errors ---------------------------------------------------------------------------------


def test_an_unknown_repository_is_a_clear_error(
    api: GitHubAPI, local: tuple[pygit2.Repository, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_REPOSITORY", "octocat/Missing")
    forge = open_forge(local[0], "github")
    api.answer_with("GET", "/repos/octocat/Missing/.*", 404)
    with pytest.raises(ForgeError) as caught:
        forge.find_open("agentrun/x")
    message = str(caught.value)
    assert message.startswith("github: could not list open pull requests of agentrun/x: 404")
    assert "octocat/Missing or the object does not exist, or GITHUB_TOKEN cannot see it" in message
    assert "\n" not in message


def test_a_refused_token_says_so(forge: GitHubForge, api: GitHubAPI) -> None:
    api.answer_with("POST", f"{REPO}/issues/3/comments", 403)
    with pytest.raises(ForgeError, match=r"comment on #3: 403 .*GITHUB_TOKEN lacks a permission"):
        forge.comment(3, "hello")


def test_an_unreachable_server_is_a_clear_error(
    api: GitHubAPI, local: tuple[pygit2.Repository, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")
    forge = open_forge(local[0], "github")
    with pytest.raises(ForgeError, match=r"could not read issue #1: cannot reach http://127"):
        forge.issue(1)
