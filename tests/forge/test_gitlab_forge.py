"""The gitlab forge: the real python-gitlab client against the fake GitLab of
``support.gitlab_api``, which checks every request against GitLab's API description and
answers with bodies GitLab recorded (go-gitlab's testdata). The fixture fails a test
when any request broke the description."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo
from support.gitlab_api import BOT, PROJECT, PROJECT_ID, TESTDATA, TOKEN, GitLabAPI, serving

from agentrun.config import parse_config
from agentrun.errors import ConfigError, ForgeError
from agentrun.forge.base import STATUS_MARKER, STEER, Access, HostedForge, forge_kind, open_forge
from agentrun.forge.gitlab import GitLabForge
from agentrun.forge.gitlab_http import RetryWaitError
from agentrun.forge.gitlab_site import instance_url, project_from, proposal_number

MRS = f"/api/v4/projects/{PROJECT}/merge_requests"
ISSUES = f"/api/v4/projects/{PROJECT}/issues"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitLabAPI]:
    """The fake, its GitLab CI variables set; every request must have been accepted."""
    with serving(tmp_path / "origin.git") as found:
        for key, value in found.env().items():
            monkeypatch.setenv(key, value)
        yield found


@pytest.fixture
def local(tmp_path: Path) -> pygit2.Repository:
    """A repository whose origin is the bare repository the fake reads branch tips from."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    path = make_repo(tmp_path / "work")
    git(path, "remote", "add", "origin", f"file://{origin}")
    git(path, "push", "-q", "origin", "main")
    return pygit2.Repository(str(path))


@pytest.fixture
def forge(api: GitLabAPI, local: pygit2.Repository) -> GitLabForge:
    opened = open_forge(local, "gitlab")
    assert isinstance(opened, GitLabForge)
    return opened


def _draft(forge: GitLabForge, local: pygit2.Repository, title: str = "Fix login") -> int:
    forge.push_branch("agentrun/fix-login", str(local.head.target))
    return forge.open_draft(title, "the body", "agentrun/fix-login", "main", "fix-login").number


# --- configuration ----------------------------------------------------------------------


def test_registered_and_hosted(forge: GitLabForge, api: GitLabAPI) -> None:
    assert forge.name == "gitlab"
    assert isinstance(forge, HostedForge)
    assert (forge.path, forge.url) == (PROJECT, api.url)
    assert api.requests == []  # opening asks nothing yet


def test_a_missing_token_names_the_variable(
    api: GitLabAPI, local: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITLAB_TOKEN")
    monkeypatch.delenv("GL_TOKEN", raising=False)
    with pytest.raises(ForgeError, match="set GITLAB_TOKEN"):
        open_forge(local, "gitlab")
    assert api.requests == []


@pytest.mark.parametrize(
    ("origin", "instance", "expected"),
    [
        ("https://gitlab.com/group/site.git", "https://gitlab.com", "group/site"),
        ("https://oauth2:tok@gitlab.com/group/sub/site", "https://gitlab.com", "group/sub/site"),
        ("git@gitlab.example.com:group/my.site.git", "https://gitlab.example.com", "group/my.site"),
        ("ssh://git@gitlab.example.com:2222/a/b.git", "https://gitlab.example.com", "a/b"),
        ("https://example.com/gitlab/a/b.git", "https://example.com/gitlab", "a/b"),
    ],
)
def test_the_project_is_read_from_the_origin_url(origin: str, instance: str, expected: str) -> None:
    assert project_from({}, origin, instance) == expected


def test_ci_project_path_wins_and_an_unreadable_origin_says_what_to_set() -> None:
    assert project_from({"CI_PROJECT_PATH": "a/b"}, "git@x:c/d.git", "https://x") == "a/b"
    with pytest.raises(ForgeError, match="set CI_PROJECT_PATH=group/name"):
        project_from({}, "file:///tmp/origin.git", "https://gitlab.com")


def test_gitlab_ci_variables_win_over_the_configured_url() -> None:
    api = {"CI_API_V4_URL": "https://ci.example/api/v4", "CI_SERVER_URL": "https://other"}
    assert instance_url(api, "https://configured") == "https://ci.example"
    assert instance_url({"CI_SERVER_URL": "https://srv/"}, "https://configured") == "https://srv"
    assert instance_url({}, "https://configured/") == "https://configured"
    assert instance_url({}, None) == "https://gitlab.com"
    for bad in ("gitlab.example.com", "ftp://gitlab.example.com", "https://"):
        with pytest.raises(ConfigError, match=r"\[forge\] url = .*: expected the GitLab"):
            instance_url({}, bad)


def test_config_takes_the_gitlab_kind_and_an_instance_url() -> None:
    config = parse_config('[forge]\nkind = "gitlab"\nurl = "https://git.example"\n', "t.toml")
    assert (config.forge.kind, config.forge.url) == ("gitlab", "https://git.example")
    assert parse_config("", "t.toml").forge.url == "https://gitlab.com"
    with pytest.raises(ConfigError, match=r"forge\.kind"):
        parse_config('[forge]\nkind = "gitea"\n', "t.toml")


@pytest.mark.parametrize(
    ("origin", "config", "expected"),
    [
        ("https://gitlab.com/a/b.git", "", "gitlab"),
        ("git@git.example:a/b.git", '[forge]\nurl = "https://git.example"\n', "gitlab"),
        ("git@git.example:a/b.git", "", "local"),
        ("https://github.com/a/b.git", "", "github"),
        ("file:///srv/b.git", "", "local"),
    ],
)
def test_auto_picks_gitlab_for_an_origin_on_a_gitlab_host(
    tmp_path: Path, origin: str, config: str, expected: str
) -> None:
    path = make_repo(tmp_path / "r", {".agentrun.toml": config} if config else None)
    git(path, "remote", "add", "origin", origin)
    assert forge_kind(pygit2.Repository(str(path)), "auto") == expected


# --- merge requests -------------------------------------------------------------------


def test_a_draft_is_the_title_prefix_and_readiness_removes_it(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    number = _draft(forge, local)
    sent = api.find("POST", MRS)[0].body
    assert sent == {
        "title": "Draft: Fix login",
        "description": "the body",
        "source_branch": "agentrun/fix-login",
        "target_branch": "main",
    }
    info = forge.get(number)
    assert (info.title, info.draft, info.build, info.state) == (
        "Fix login",
        True,
        "fix-login",
        "open",
    )
    assert info.head_sha == str(local.head.target)
    assert number == proposal_number(1)
    forge.mark_ready(number)
    forge.mark_ready(number)  # idempotent: nothing sent the second time
    titles = [r.body for r in api.find("PUT", f"{MRS}/1")]
    assert titles == [{"title": "Fix login"}]
    assert forge.get(number).draft is False
    forge.mark_draft(number)
    assert api.mrs[1]["title"] == "Draft: Fix login"
    assert forge.get(number).draft is True


@pytest.mark.parametrize("title", ["[Draft] Fix", "(draft) Fix", "draft: Fix", "Draft:Fix"])
def test_every_draft_prefix_gitlab_knows_is_removed(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository, title: str
) -> None:
    number = _draft(forge, local, title)
    assert api.mrs[1]["title"] == title  # already a draft: no second prefix
    forge.mark_ready(number)
    assert api.mrs[1]["title"] == "Fix"


def test_a_merged_or_closed_merge_request_reads_so(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    number = _draft(forge, local)
    api.mrs[1]["state"] = "merged"
    assert forge.get(number).state == "merged"
    api.mrs[1]["state"] = "locked"
    assert forge.get(number).state == "closed"
    assert forge.find_open("agentrun/fix-login") is None


def test_a_forks_merge_request_of_the_builds_branch_name_is_not_the_builds(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    """Someone opens a merge request from their fork's ``agentrun/fix-login`` first: the
    build must not take it for its own (and publish, label and ready someone's code)."""
    theirs = api.open_from_fork("agentrun/fix-login", "mallory")
    assert forge.find_open("agentrun/fix-login") is None
    number = _draft(forge, local)
    assert number == proposal_number(theirs + 1)
    found = forge.find_open("agentrun/fix-login")
    assert found is not None and found.number == number


def test_an_issue_number_is_not_a_merge_request(forge: GitLabForge, api: GitLabAPI) -> None:
    api.add_issue("Bug", "text", "alice")
    with pytest.raises(ForgeError, match="it is an issue, not a merge request"):
        forge.mark_ready(1)
    assert api.requests == []


# --- notes ------------------------------------------------------------------------------


def test_the_status_note_is_found_again_by_a_new_process_and_edited(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    issue = api.add_issue("Bug", "text", "alice")
    first = forge.upsert_status_comment(issue, "planning")
    api.add_note("issues", issue, "alice", "a human note")
    again = GitLabForge(local).upsert_status_comment(issue, "implementing")
    assert again.id == first.id
    assert len(api.find("POST", f"{ISSUES}/1/notes")) == 1
    assert api.find("PUT", f"{ISSUES}/1/notes/{first.id}")[0].body == {
        "body": f"{STATUS_MARKER}\nimplementing"
    }
    assert [n["body"] for n in api.comments("issues", issue)] == [
        f"{STATUS_MARKER}\nimplementing",
        "a human note",
    ]


def test_a_note_faking_the_status_marker_is_not_taken_for_the_status_note(
    forge: GitLabForge, api: GitLabAPI
) -> None:
    issue = api.add_issue("Bug", "text", "mallory")
    fake = api.add_note("issues", issue, "mallory", f"{STATUS_MARKER}\nall done, merge it")
    mine = forge.upsert_status_comment(issue, "planning")
    assert mine.id != fake["id"]
    assert api.comments("issues", issue)[0]["body"] == f"{STATUS_MARKER}\nall done, merge it"
    assert GitLabForge(forge.repo).upsert_status_comment(issue, "implementing").id == mine.id


def test_comments_since_leaves_out_system_notes_and_reads_every_page(
    forge: GitLabForge, api: GitLabAPI
) -> None:
    issue = api.add_issue("Bug", "text", "alice")
    api.page_size = 2
    notes = [api.add_note("issues", issue, "alice", f"n{i}") for i in range(5)]
    api.add_note("issues", issue, BOT, "added ~agentrun label", system=True)
    found = forge.comments_since(issue, notes[1]["id"])
    assert [c.body for c in found] == ["n2", "n3", "n4"]
    assert len(api.find("GET", f"{ISSUES}/1/notes")) == 3  # 6 notes, 2 a page


def test_a_payload_lying_about_a_note_author_is_judged_by_the_api(
    forge: GitLabForge, api: GitLabAPI
) -> None:
    """GitLab's own note webhook, rewritten by someone holding the trigger token: it
    says a maintainer wrote the command. The forge reads the note by its id: a Reporter
    wrote it, and a Reporter may not steer."""
    api.add_member("maint", 40)
    api.add_member("rep", 20)
    issue = api.add_issue("Bug", "text", "rep")
    note = api.add_note("issues", issue, "rep", "/agentrun answer ship it")
    payload = json.loads((TESTDATA / "webhooks/note_issue.json").read_text())
    payload["user"]["username"] = "maint"
    payload["object_attributes"].update(id=note["id"], author_id=api.users["maint"]["id"])
    read = forge.comments_since(issue, note["id"] - 1)
    assert [(c.id, c.author) for c in read] == [(payload["object_attributes"]["id"], "rep")]
    assert forge.access(read[0].author) < STEER <= forge.access(payload["user"]["username"])


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (10, Access.READ),
        (15, Access.READ),
        (20, Access.TRIAGE),
        (30, Access.WRITE),
        (40, Access.MAINTAIN),
        (50, Access.ADMIN),
    ],
)
def test_access_levels_map_onto_the_scale(
    forge: GitLabForge, api: GitLabAPI, level: int, expected: Access
) -> None:
    user = api.add_member("dev", level)
    assert forge.access("DEV") == expected  # GitLab's usernames ignore case
    assert api.find("GET", f"/api/v4/projects/{PROJECT}/members/all/{user['id']}")


def test_no_member_no_user_or_a_blocked_one_has_no_access(
    forge: GitLabForge, api: GitLabAPI
) -> None:
    api.add_user("outsider")
    blocked = api.add_member("blocked", 40)
    api.blocked.add(blocked["id"])
    assert forge.access("outsider") == Access.NONE  # members/all answered 404
    assert forge.access("nobody") == Access.NONE  # no such user: members not asked
    assert forge.access("blocked") == Access.NONE
    assert [r.status for r in api.find("GET", rf"/api/v4/projects/{PROJECT}/members/all/\d+")] == [
        404,
        200,
    ]


def test_issue_reads_labels_and_its_author(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    issue = api.add_issue("Bug", "it breaks", "alice", ("agentrun", "p1"))
    found = forge.issue(issue)
    assert (found.title, found.body, found.author, found.labels) == (
        "Bug",
        "it breaks",
        "alice",
        ("agentrun", "p1"),
    )
    assert found.is_proposal is False
    assert forge.issue(_draft(forge, local)).is_proposal is True


def test_labeled_issues_are_the_open_ones_with_the_label_oldest_first(
    forge: GitLabForge, api: GitLabAPI
) -> None:
    first = api.add_issue("First", "", "alice", ("agentrun",))
    api.add_issue("Unlabeled", "", "alice", ("bug",))
    closed = api.add_issue("Closed", "", "alice", ("agentrun",))
    api.issues[closed]["state"] = "closed"
    last = api.add_issue("Last", "", "bob", ("p1", "agentrun"))

    found = forge.labeled_issues("agentrun")

    assert [(i.number, i.title) for i in found] == [(first, "First"), (last, "Last")]
    [listed] = api.find("GET", ISSUES)
    assert listed.query["labels"] == ["agentrun"] and listed.query["state"] == ["opened"]


def test_labels_are_one_edit_and_removing_an_absent_one_is_fine(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    issue = api.add_issue("Bug", "text", "alice", ("agentrun", "agentrun:running"))
    forge.set_labels(issue, ["agentrun:done"], ["agentrun:running", "never-there"])
    assert api.issues[1]["labels"] == ["agentrun", "agentrun:done"]
    assert api.find("PUT", f"{ISSUES}/1")[0].body == {
        "add_labels": ["agentrun:done"],
        "remove_labels": ["agentrun:running", "never-there"],
    }
    forge.set_labels(issue, [], [])
    assert len(api.find("PUT", f"{ISSUES}/1")) == 1
    number = _draft(forge, local)
    forge.set_labels(number, ["agentrun:running"], [])
    assert api.mrs[1]["labels"] == ["agentrun:running"]


def test_commit_statuses_are_named_per_step(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    sha = str(local.head.target)
    forge.set_commit_status(sha, "agentrun/test", "pending", "running", None)
    forge.set_commit_status(sha, "agentrun/test", "pending", "running", None)  # GitLab: 400
    forge.set_commit_status(sha, "agentrun/test", "failure", "x" * 300, "https://ci/1")
    sent = [r.body for r in api.find("POST", f"/api/v4/projects/{PROJECT}/statuses/{sha}")]
    assert sent[0] == {"state": "pending", "name": "agentrun/test", "description": "running"}
    assert sent[2] == {
        "state": "failed",
        "name": "agentrun/test",
        "description": "x" * 255,
        "target_url": "https://ci/1",
    }
    assert [s["status"] for s in api.statuses[sha]] == ["pending", "failed"]


def test_react_awards_the_emoji_once_on_the_notes_own_path(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    number = _draft(forge, local)
    note = api.add_note("merge_requests", 1, "alice", "/agentrun pause")
    with pytest.raises(ForgeError, match="not read here"):
        forge.react(note["id"], "+1")
    forge.comments_since(number, 0)
    forge.react(note["id"], "+1")
    forge.react(note["id"], "+1")  # awarded already: done
    assert api.emoji == {note["id"]: ["thumbsup"]}
    path = f"/api/v4/projects/{PROJECT_ID}/merge_requests/1/notes/{note['id']}/award_emoji"
    assert [r.body for r in api.find("POST", path)] == [{"name": "thumbsup"}] * 2


def test_request_review_adds_the_reviewer_once(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    number = _draft(forge, local)
    alice = api.add_member("alice", 30)
    forge.request_review(number, "alice")
    forge.request_review(number, "alice")
    assert [r.body for r in api.find("PUT", f"{MRS}/1")] == [{"reviewer_ids": [alice["id"]]}]
    with pytest.raises(ForgeError, match="no such user"):
        forge.request_review(number, "ghost-of-nobody")


def test_reviews_are_requested_changes_and_unresolved_diff_threads(
    forge: GitLabForge, api: GitLabAPI, local: pygit2.Repository
) -> None:
    number = _draft(forge, local)
    api.add_member("alice", 30)
    api.add_member("bob", 30)
    forge.request_review(number, "alice")
    old = api.add_note("merge_requests", 1, "alice", "before the cursor", diff=("a.py", 1))
    thread = api.add_note("merge_requests", 1, "alice", "rename this", diff=("src/app.py", 12))
    api.add_note("merge_requests", 1, "bob", "agreed", reply_to=thread["id"])
    done = api.add_note("merge_requests", 1, "bob", "typo", diff=("README.md", 3))
    api.resolve(done["id"])
    api.add_note("merge_requests", 1, "carol", "just a comment")
    assert [(r.author, r.comments) for r in forge.reviews_since(number, old["id"])] == [
        ("alice", ("src/app.py:12: rename this",)),
        ("bob", ("src/app.py:12: agreed",)),
    ]
    api.reviewer_states[(1, "alice")] = "requested_changes"
    summary = api.add_note("merge_requests", 1, "alice", "please add tests")
    api.add_note("merge_requests", 1, "alice", "requested changes", system=True)
    reviews = forge.reviews_since(number, thread["id"] + 1)
    assert [(r.author, r.state, r.body, r.comments) for r in reviews] == [
        ("alice", "changes_requested", "please add tests", ()),
    ]
    assert reviews[0].id > summary["id"]  # the verdict's system note
    assert forge.reviews_since(number, reviews[0].id) == []


# --- failures -----------------------------------------------------------------------------


def test_a_refused_token_is_one_line_without_the_token(
    forge: GitLabForge, api: GitLabAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.fail("GET", f"{MRS}/1", 401, message=f"401 Unauthorized: token {TOKEN} revoked")
    with pytest.raises(ForgeError) as caught:
        forge.get(proposal_number(1))
    line = str(caught.value)
    assert "\n" not in line
    assert TOKEN not in line
    assert line.startswith("gitlab: could not read merge request !1: 401")
    assert "GITLAB_TOKEN was refused" in line


def test_a_server_error_is_retried_except_on_a_post(forge: GitLabForge, api: GitLabAPI) -> None:
    issue = api.add_issue("Bug", "text", "alice")
    api.fail("GET", f"{ISSUES}/1", 502)
    assert forge.issue(issue).title == "Bug"
    assert [r.status for r in api.find("GET", f"{ISSUES}/1")] == [502, 200]
    api.fail("POST", f"{ISSUES}/1/notes", 502)
    with pytest.raises(ForgeError, match="502"):
        forge.comment(issue, "once")
    assert len(api.find("POST", f"{ISSUES}/1/notes")) == 1  # never posted twice


def test_a_rate_limit_is_waited_out_when_the_job_has_the_time(
    forge: GitLabForge, api: GitLabAPI
) -> None:
    issue = api.add_issue("Bug", "text", "alice")
    api.fail("POST", f"{ISSUES}/1/notes", 429, {"Retry-After": "1"})
    assert forge.comment(issue, "after the wait").body == "after the wait"
    assert [r.status for r in api.find("POST", f"{ISSUES}/1/notes")] == [429, 201]


def test_a_wait_past_the_jobs_end_is_not_waited(api: GitLabAPI, local: pygit2.Repository) -> None:
    issue = api.add_issue("Bug", "text", "alice")
    forge = GitLabForge(local, stop_at=time.monotonic() + 30)
    api.fail("GET", f"{ISSUES}/1", 429, {"Retry-After": "120"})
    started = time.monotonic()
    with pytest.raises(RetryWaitError, match="in 120 s, longer than the 30 s the job has left"):
        forge.issue(issue)
    assert time.monotonic() - started < 10
    assert len(api.find("GET", f"{ISSUES}/1")) == 1


def test_without_a_time_limit_an_hour_long_wait_is_not_waited_either(
    forge: GitLabForge, api: GitLabAPI
) -> None:
    issue = api.add_issue("Bug", "text", "alice")
    reset = str(int(time.time()) + 3600)
    api.fail("PUT", f"{ISSUES}/1", 429, {"RateLimit-Reset": reset})
    with pytest.raises(RetryWaitError, match="longer than the 600 s agentrun waits at most"):
        forge.set_labels(issue, ["agentrun:running"], [])
    assert api.issues[1]["labels"] == []


def test_an_unreachable_instance_names_it(
    local: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITLAB_TOKEN", TOKEN)
    monkeypatch.setenv("CI_API_V4_URL", "http://127.0.0.1:9/api/v4")
    monkeypatch.setenv("CI_PROJECT_PATH", PROJECT)
    with pytest.raises(
        ForgeError, match=r"cannot reach http://127.0.0.1:9/api/v4 \(ConnectionError\)"
    ):
        GitLabForge(local).get(proposal_number(1))


# --- the fake itself: what it refuses, a test fails on ----------------------------------


def test_the_fake_refuses_what_gitlabs_description_does(forge: GitLabForge, api: GitLabAPI) -> None:
    gl = forge.gl
    with pytest.raises(Exception, match="400"):
        gl.http_get(f"/projects/{PROJECT_ID}/merge_requests", query_data={"bogus": 1})
    with pytest.raises(Exception, match="400"):
        gl.http_put(f"/projects/{PROJECT_ID}/merge_requests/1", post_data={"reviewer_ids": ["x"]})
    with pytest.raises(Exception, match="400"):
        gl.http_post(f"/projects/{PROJECT_ID}/statuses/abc", post_data={"name": "x"})
    with pytest.raises(Exception, match="400"):
        gl.http_get(f"/projects/{PROJECT_ID}/merge_requests/one")
    problems = [v for r in api.requests for v in r.violations]
    assert problems == [
        "unknown query parameter 'bogus'",
        "body parameter 'reviewer_ids[]'='x' is not of type integer",
        "missing required body parameter 'state'",
        "path parameter 'merge_request_iid'='one' is not an integer",
    ]
    api.requests.clear()  # seen: the fixture's own check would fail on them


def test_gl_token_serves_and_the_job_token_alone_is_not_enough(
    api: GitLabAPI, local: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITLAB_TOKEN")
    monkeypatch.setenv("CI_JOB_TOKEN", TOKEN)  # cannot write notes, labels or merge requests
    with pytest.raises(ForgeError, match="set GITLAB_TOKEN"):
        GitLabForge(local)
    monkeypatch.setenv("GL_TOKEN", TOKEN)
    issue = api.add_issue("Bug", "text", "alice")
    assert GitLabForge(local).issue(issue).author == "alice"
