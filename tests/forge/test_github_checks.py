"""The github forge's checks on a commit (the CI gate's read), against Prism serving
GitHub's own description: check runs and the combined status, as GitHub lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest
from conftest import git, make_repo
from support.prism import GitHubAPI

from agentrun.forge.base import Check, HostedForge, open_forge
from agentrun.forge.github import GitHubForge

REPO = "/repos/octocat/Hello-World"
SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
LOG = (
    "2026-12-01T10:00:00.0000000Z ##[group]Run pytest -q\n"
    "2026-12-01T10:00:01.0000000Z FAILED tests/test_login.py::test_redirect - assert 302\n"
    "2026-12-01T10:00:01.5000000Z ##[error]Process completed with exit code 1.\n"
)


@pytest.fixture
def forge(github_env: GitHubAPI, tmp_path: Path) -> GitHubForge:
    path = make_repo(tmp_path / "work")
    git(path, "remote", "add", "origin", f"file://{tmp_path}/origin.git")
    opened = open_forge(pygit2.Repository(str(path)), "github")
    assert isinstance(opened, GitHubForge) and isinstance(opened, HostedForge)
    return opened


def runs(api: GitHubAPI, items: list[dict[str, Any]]) -> None:
    """The check runs on the commit, each GitHub's example run with ``items``' fields."""

    def answer(ex: dict[str, Any]) -> dict[str, Any]:
        base = ex["check_runs"][0]
        listed = [{**base, **item} for item in items]
        return {"total_count": len(listed), "check_runs": listed}

    api.respond("GET", f"{REPO}/commits/{SHA}/check-runs", answer)


def statuses(api: GitHubAPI, items: list[dict[str, Any]]) -> None:
    def answer(ex: dict[str, Any]) -> dict[str, Any]:
        base = ex["statuses"][0]
        return {**ex, "statuses": [{**base, **item} for item in items]}

    api.respond("GET", f"{REPO}/commits/{SHA}/status", answer)


ACTIONS = {"slug": "github-actions", "id": 15368, "name": "GitHub Actions"}


def test_check_runs_and_statuses_newest_of_each_name_failures_with_their_log(
    forge: GitHubForge, github_env: GitHubAPI
) -> None:
    api = github_env
    api.job_log = LOG
    runs(
        api,
        [
            {"id": 11, "name": "lint", "status": "completed", "conclusion": "success"},
            {"id": 12, "name": "build", "status": "in_progress", "conclusion": None},
            {
                "id": 13,
                "name": "test",
                "status": "completed",
                "conclusion": "failure",
                "completed_at": "2026-12-01T10:00:02Z",
                "app": {**ACTIONS},
                "output": {
                    "title": "1 test failed",
                    "summary": "tests/test_login.py::test_redirect",
                    "text": None,
                    "annotations_count": 0,
                    "annotations_url": "https://example.com",
                },
                "html_url": "https://github.com/octocat/Hello-World/actions/runs/1/job/13",
            },
        ],
    )
    statuses(
        api,
        [
            # agentrun's own verify statuses are not the repository's CI.
            {"context": "agentrun/tests", "state": "success"},
            {"context": "ci/jenkins", "state": "error", "description": "Jenkins is down"},
            # A status named like a check run, older than it: the check run stands.
            {"context": "lint", "state": "failure", "updated_at": "2012-07-20T01:19:13Z"},
        ],
    )
    found = forge.checks(SHA)

    assert [(c.name, c.state, c.conclusion) for c in found] == [
        ("build", "pending", "in_progress"),
        ("ci/jenkins", "failure", "error"),
        ("lint", "success", "success"),
        ("test", "failure", "failure"),
    ]
    test = next(c for c in found if c.name == "test")
    assert test == Check(
        name="test",
        state="failure",
        conclusion="failure",
        summary="1 test failed\ntests/test_login.py::test_redirect",
        log_tail=(
            "##[group]Run pytest -q\n"
            "FAILED tests/test_login.py::test_redirect - assert 302\n"
            "##[error]Process completed with exit code 1.\n"
        ),
        url="https://github.com/octocat/Hello-World/actions/runs/1/job/13",
    )
    assert next(c for c in found if c.name == "ci/jenkins").summary == "Jenkins is down"
    (listed,) = api.find("GET", f"{REPO}/commits/{SHA}/check-runs")
    assert listed.query == {"per_page": ["100"], "filter": ["latest"]}
    assert len(api.find("GET", f"{REPO}/commits/{SHA}/status")) == 1
    # Only the failed Actions job's log is read; the signed URL gets no token.
    assert len(api.find("GET", f"{REPO}/actions/jobs/.*/logs")) == 1
    (signed,) = api.find("GET", "/_logs/.*")
    assert "authorization" not in signed.headers
    api.assert_accepted()


def test_a_log_github_will_not_give_leaves_the_summary(
    forge: GitHubForge, github_env: GitHubAPI
) -> None:
    api = github_env
    runs(
        api,
        [
            {
                "id": 21,
                "name": "test",
                "status": "completed",
                "conclusion": "timed_out",
                "app": {**ACTIONS},
            }
        ],
    )
    statuses(api, [])
    api.answer_with("GET", f"{REPO}/actions/jobs/21/logs", 410)  # expired
    (check,) = forge.checks(SHA)
    assert (check.state, check.conclusion, check.log_tail) == ("failure", "timed_out", "")
    assert check.summary.startswith("Mighty Readme report")  # the example run's output
    assert not api.find("GET", "/_logs/.*")
    api.assert_accepted()
