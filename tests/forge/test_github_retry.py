"""The github forge on GitHub's bad days: rate limits and server errors, injected by the
recording proxy in front of Prism (``support.faults``); every request, the failed ones
too, is still checked against GitHub's description.

Whether a wait was given up "in time" is read from the requests the proxy saw (no second
one came), never from a clock.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo
from support.faults import (
    Fault,
    actions_may_not_open,
    bad_gateway,
    hang_up,
    secondary_rate_limit,
)
from support.prism import GitHubAPI

from agentrun.errors import AgentrunError, ForgeError
from agentrun.forge.base import open_forge
from agentrun.forge.github import GitHubForge
from agentrun.forge.github_http import (
    MAX_WAIT_SECONDS,
    SECONDS_BETWEEN_WRITES,
    WRITE_SECONDS,
    RetryWaitError,
)

REPO = "/repos/octocat/Hello-World"
COMMENTS = f"{REPO}/issues/3/comments"


@pytest.fixture
def repo(tmp_path: Path) -> pygit2.Repository:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    path = make_repo(tmp_path / "work")
    git(path, "remote", "add", "origin", f"file://{origin}")
    return pygit2.Repository(str(path))


def github(repo: pygit2.Repository, seconds_left: float | None = None) -> GitHubForge:
    """The forge as a job with ``seconds_left`` opens it (``None``: no time limit)."""
    stop_at = None if seconds_left is None else time.monotonic() + seconds_left
    opened = open_forge(repo, "github", stop_at)
    assert isinstance(opened, GitHubForge)
    return opened


def statuses(api: GitHubAPI, method: str, path: str) -> list[int]:
    return [r.status for r in api.find(method, path)]


def primary_rate_limit(reset_in: timedelta) -> Fault:
    """GitHub's answer once the hour's requests are spent: 403, reset at a Unix time."""
    reset = int((datetime.now(UTC) + reset_in).timestamp())
    return Fault(
        403,
        {
            "message": "API rate limit exceeded for installation ID 1.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        },
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
    )


# --- retried, then it succeeds ----------------------------------------------------------------


def test_a_secondary_rate_limit_is_waited_out_then_retried(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.fail("POST", COMMENTS, secondary_rate_limit(retry_after=1))
    posted = github(repo, seconds_left=60).comment(3, "hello")
    assert posted.id == 1
    assert statuses(github_env, "POST", COMMENTS) == [403, 201]
    assert [r.body for r in github_env.find("POST", COMMENTS)] == [{"body": "hello"}] * 2
    github_env.assert_accepted()  # both attempts were valid requests


def test_a_bad_gateway_is_retried(github_env: GitHubAPI, repo: pygit2.Repository) -> None:
    github_env.fail("GET", f"{REPO}/pulls/1347", bad_gateway())
    assert github(repo).get(1347).number == 1347
    assert statuses(github_env, "GET", f"{REPO}/pulls/1347") == [502, 200]
    github_env.assert_accepted()


def test_a_bad_gateway_on_a_post_is_not_retried(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    """GitHub may have posted the comment before the gateway failed: not posted twice."""
    github_env.fail("POST", COMMENTS, bad_gateway())
    with pytest.raises(ForgeError, match=r"^github: could not comment on #3: 502 Server Error$"):
        github(repo).comment(3, "hello")
    assert statuses(github_env, "POST", COMMENTS) == [502]


def test_a_broken_read_is_not_retried(github_env: GitHubAPI, repo: pygit2.Repository) -> None:
    """GitHub may have done what was asked before the connection broke: not asked twice."""
    github_env.fail("PATCH", f"{REPO}/pulls/1347", hang_up())
    with pytest.raises(ForgeError, match=r"could not update the description of #1347: cannot"):
        github(repo).update_body(1347, "new body")
    assert len(github_env.find("PATCH", f"{REPO}/pulls/1347")) == 1


def test_a_rate_limit_that_holds_is_given_up_after_the_retries(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.fail("POST", COMMENTS, secondary_rate_limit(retry_after=1), times=10)
    with pytest.raises(ForgeError) as caught:
        github(repo).comment(3, "hello")
    message = str(caught.value)
    assert message.startswith("github: could not comment on #3: 403 You have exceeded a sec")
    assert message.endswith("; GitHub's rate limit held through the retries: run again later")
    assert statuses(github_env, "POST", COMMENTS) == [403] * 4  # the first and three retries


# --- a wait the job has no time for -------------------------------------------------------


def test_a_retry_that_would_outlive_the_job_is_given_up_at_once(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.fail("POST", COMMENTS, secondary_rate_limit(retry_after=3600))
    forge = github(repo, seconds_left=120)
    with pytest.raises(RetryWaitError) as caught:
        forge.comment(3, "hello")
    assert isinstance(caught.value, AgentrunError)  # one line, exit 1
    assert str(caught.value) == (
        "github: could not comment on #3: GitHub asks to retry after 403 in 3600 s, "
        "longer than the 120 s the job has left; not waiting (run again later)"
    )
    assert statuses(github_env, "POST", COMMENTS) == [403]  # no retry was sent
    assert forge.comment(3, "later").id == 1  # the forge still works once GitHub does
    github_env.assert_accepted()


def test_a_primary_reset_past_the_job_is_given_up_at_once(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.fail("GET", f"{REPO}/issues/3", primary_rate_limit(timedelta(minutes=30)))
    with pytest.raises(RetryWaitError, match=r"retry after 403 in 1[78]\d\d s, longer than the 5"):
        github(repo, seconds_left=59).issue(3)
    assert statuses(github_env, "GET", f"{REPO}/issues/3") == [403]


def test_without_a_time_limit_a_wait_is_still_bounded(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.fail("GET", f"{REPO}/issues/3", primary_rate_limit(timedelta(hours=1)))
    with pytest.raises(RetryWaitError) as caught:
        github(repo).issue(3)
    assert f"longer than the {MAX_WAIT_SECONDS:.0f} s agentrun waits at most" in str(caught.value)
    assert statuses(github_env, "GET", f"{REPO}/issues/3") == [403]


def test_a_job_out_of_time_still_retries_what_needs_no_wait(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.fail("GET", f"{REPO}/pulls/1347", bad_gateway())
    assert github(repo, seconds_left=-1).get(1347).number == 1347  # the first retry is at once
    assert statuses(github_env, "GET", f"{REPO}/pulls/1347") == [502, 200]


# --- the write throttle -------------------------------------------------------------------------


def test_writes_are_a_second_apart_as_github_asks(
    github_env: GitHubAPI, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lower bound on the gap, which a slow machine only widens: not a speed test."""
    monkeypatch.delenv(WRITE_SECONDS)
    forge = github(repo)
    forge.comment(3, "one")
    forge.comment(3, "two")
    first, second = github_env.find("POST", COMMENTS)
    assert second.at - first.at >= SECONDS_BETWEEN_WRITES * 0.9  # PyGithub rounds its clock


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_write_interval_is_one_line(
    github_env: GitHubAPI, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(WRITE_SECONDS, value)
    with pytest.raises(ForgeError) as caught:
        github(repo)
    assert str(caught.value) == (
        f"{WRITE_SECONDS}={value!r}: expected a number of seconds, 0 or more"
    )
    assert github_env.requests == []


# --- the repository's setting for Actions -------------------------------------------------------


def test_a_refused_pull_request_names_the_repository_setting(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.fail("POST", f"{REPO}/pulls", actions_may_not_open())
    with pytest.raises(ForgeError) as caught:
        github(repo).open_draft("Fix it", "body", "agentrun/fix", "main", "fix")
    message = str(caught.value)
    assert message.startswith(
        "github: could not open a draft pull request of agentrun/fix into main: 403 GitHub "
        "Actions is not permitted to create or approve pull requests."
    )
    assert message.endswith(
        "; allow it in the repository's Settings → Actions → General → Workflow permissions: "
        '"Allow GitHub Actions to create and approve pull requests"'
    )
    assert "\n" not in message
    assert statuses(github_env, "POST", f"{REPO}/pulls") == [403]  # not a rate limit: no retry
    github_env.assert_accepted()


# --- comments since the cursor -------------------------------------------------------------------


def test_comments_are_read_since_the_cursors_comment_and_edits_are_not_replayed(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    written = "2026-11-30T10:00:00Z"
    github_env.respond(
        "GET", f"{REPO}/issues/comments/700", lambda ex: {**ex, "id": 700, "created_at": written}
    )

    def listed(example: list[dict[str, object]]) -> list[dict[str, object]]:
        edited = "2026-12-01T09:00:00Z"
        old_edited = {**example[0], "id": 650, "body": "edited", "updated_at": edited}
        new = {**example[0], "id": 701, "body": "/agentrun answer e1 yes"}
        return [old_edited, new]

    for number in (3, 1347):
        github_env.respond("GET", f"{REPO}/issues/{number}/comments", listed)
    forge = github(repo)

    assert [(c.id, c.body) for c in forge.comments_since(3, 700)] == [
        (701, "/agentrun answer e1 yes")
    ]
    assert [c.id for c in forge.comments_since(1347, 700)] == [701]

    reads = github_env.find("GET", f"{REPO}/issues/(3|1347)/comments")
    assert [r.query.get("since") for r in reads] == [["2026-11-30T09:59:00Z"]] * 2
    assert len(github_env.find("GET", f"{REPO}/issues/comments/700")) == 1  # asked once
    github_env.assert_accepted()


def test_without_a_cursor_or_its_comment_every_comment_is_read(
    github_env: GitHubAPI, repo: pygit2.Repository
) -> None:
    github_env.answer_with("GET", f"{REPO}/issues/comments/700", 404)  # deleted since
    forge = github(repo)
    assert [c.id for c in forge.comments_since(3, 0)] == [1]
    assert forge.comments_since(3, 700) == []  # the example's comment 1 is older
    reads = github_env.find("GET", COMMENTS)
    assert [r.query.get("since") for r in reads] == [None, None]
    github_env.assert_accepted()


# --- through `git agentrun action --time-limit` ------------------------------------------------


def test_an_actions_time_limit_bounds_the_forges_waits(
    github_api: GitHubAPI, tmp_path: Path
) -> None:
    """The job's --time-limit reaches the forge: a wait past it is given up, said in the
    build's log, and the job goes on (the status comment is the next job's to write)."""
    from action.github_flow import Site, labeled, must, remote_events

    github_api.clear()
    site = Site(tmp_path, github_api)
    site.configure([])
    github_api.fail("GET", ".*", secondary_rate_limit(retry_after=3600))
    job = site.job(
        "issues", labeled(7, "Fix the greeting", "", "maintainer"), args=("--time-limit", "5")
    )
    must(job.run())  # within the job's 90 s: the hour was not waited for

    assert len([r for r in github_api.requests if r.injected]) == 1
    notes = [
        e.payload.text
        for e in remote_events(site, "issue-7-fix-the-greeting")
        if e.type == "observation.recorded"
    ]
    assert any(
        "GitHub asks to retry after 403 in 3600 s, longer than the" in note
        and "s the job has left; not waiting (run again later)" in note
        for note in notes
    ), notes
