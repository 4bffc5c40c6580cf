"""The gitlab forge's ``checks``: the real python-gitlab client reading pipelines, jobs,
commit statuses and traces from the fake GitLab, which checks every request against
GitLab's API description (``support/gitlab/api-v4-ci.json``)."""

from __future__ import annotations

import pygit2
import pytest
from support.gitlab_api import PROJECT, PROJECT_ID, GitLabAPI
from test_gitlab_forge import api, forge, local  # noqa: F401  (the fixtures)

from agentrun.forge.base import Check
from agentrun.forge.gitlab import GitLabForge
from agentrun.forge.gitlab_checks import LOG_TAIL, trace_text

BRANCH = "agentrun/fix-login"


def _sha(local: pygit2.Repository) -> str:  # noqa: F811
    return str(local.head.target)


def _by_name(found: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in found}


def test_a_passing_and_a_failing_job_with_its_reason_and_trace_tail(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
) -> None:
    sha = _sha(local)
    pipeline = api.ci.add_pipeline(sha, BRANCH, "failed")
    api.ci.add_job(pipeline, "lint", "success")
    log = "\x1b[0Ksection_start:1700000000:step_script\r\x1b[0K" + "ok\n" * 2000
    log += "\x1b[31;1mFAILED tests/test_login.py::test_logout\x1b[0;m\nERROR: Job failed: exit 1\n"
    failing = api.ci.add_job(pipeline, "test", "failed", failure_reason="script_failure", trace=log)

    found = _by_name(forge.checks(sha))

    assert sorted(found) == ["lint", "test"]
    assert found["lint"] == Check(
        "lint", "success", "success", url=f"{api.url}/{PROJECT}/-/jobs/{failing - 1}"
    )
    test = found["test"]
    assert (test.state, test.conclusion, test.summary) == ("failure", "failed", "script failure")
    assert test.log_tail.endswith(
        "FAILED tests/test_login.py::test_logout\nERROR: Job failed: exit 1\n"
    )
    assert len(test.log_tail) == LOG_TAIL and "\x1b" not in test.log_tail
    assert test.url == f"{api.url}/{PROJECT}/-/jobs/{failing}"
    # The trace is asked for by the project's numeric id, as GitLab's description says.
    [trace] = api.find("GET", r"/api/v4/projects/.+/jobs/\d+/trace")
    assert trace.path == f"/api/v4/projects/{PROJECT_ID}/jobs/{failing}/trace"
    [listed] = api.find("GET", f"/api/v4/projects/{PROJECT}/pipelines")
    assert {k: v for k, v in listed.query.items() if k != "per_page"} == {
        "sha": [sha],
        "order_by": ["id"],
        "sort": ["desc"],
    }


def test_an_erased_trace_leaves_the_failure_without_a_tail(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
) -> None:
    sha = _sha(local)
    job = api.ci.add_job(api.ci.add_pipeline(sha, BRANCH, "failed"), "test", "failed")
    del api.ci.traces[job]  # GitLab answers 404 for it

    [found] = forge.checks(sha)

    assert (found.state, found.summary, found.log_tail) == ("failure", "", "")
    assert [r.status for r in api.find("GET", r"/api/v4/projects/.+/jobs/\d+/trace")] == [404]


def test_the_newest_run_of_a_name_wins_across_retries_and_pipelines(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
) -> None:
    sha = _sha(local)
    first = api.ci.add_pipeline(sha, BRANCH, "failed")
    flaky = api.ci.add_job(first, "test", "failed", failure_reason="script_failure")
    api.ci.add_job(first, "build", "failed", failure_reason="runner_system_failure")
    api.ci.retry(flaky, "success")  # retried in its pipeline: the new run passes
    second = api.ci.add_pipeline(sha, BRANCH, "success", source="web")
    api.ci.add_job(second, "build", "success")  # the same commit, built again

    found = _by_name(forge.checks(sha))

    assert {n: c.state for n, c in found.items()} == {"build": "success", "test": "success"}
    assert api.find("GET", r"/api/v4/projects/.+/jobs/\d+/trace") == []  # nothing failed


def test_external_statuses_count_and_agentruns_own_do_not(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
) -> None:
    sha = _sha(local)
    pipeline = api.ci.add_pipeline(sha, BRANCH, "success")
    api.ci.add_job(pipeline, "test", "success")
    forge.set_commit_status(sha, "agentrun/tests", "failure", "agentrun's own verify", None)
    forge.set_commit_status(sha, "ci/jenkins", "pending", "queued", None)
    forge.set_commit_status(sha, "ci/jenkins", "failure", "3 tests failed", "https://ci/9")

    found = _by_name(forge.checks(sha))

    assert sorted(found) == ["ci/jenkins", "test"]  # the job is not read twice
    jenkins = found["ci/jenkins"]
    assert (jenkins.state, jenkins.summary, jenkins.url) == (
        "failure",
        "3 tests failed",
        "https://ci/9",
    )
    assert jenkins.log_tail == ""  # an external status has no trace on GitLab
    [statuses] = api.find("GET", f"/api/v4/projects/{PROJECT}/repository/commits/{sha}/statuses")
    assert statuses.endpoint.endswith("/statuses")


@pytest.mark.parametrize(
    ("status", "allow_failure", "pipeline", "state", "conclusion"),
    [
        ("created", False, "running", "pending", "created"),
        ("pending", False, "running", "pending", "pending"),
        ("running", False, "running", "pending", "running"),
        ("waiting_for_resource", False, "running", "pending", "waiting_for_resource"),
        ("preparing", False, "running", "pending", "preparing"),
        ("scheduled", False, "running", "pending", "scheduled"),
        ("manual", False, "manual", "pending", "manual"),  # blocks: someone must run it
        ("manual", True, "success", "success", "manual (not run, allowed to fail)"),
        ("failed", True, "success", "success", "failed (allowed to fail)"),
        ("canceled", False, "canceled", "failure", "canceled"),
        ("skipped", False, "success", "success", "skipped"),  # a when: on_failure job
        ("skipped", False, "failed", "failure", "skipped"),  # after a failed stage
        ("skipped", False, "running", "pending", "skipped"),
    ],
)
def test_what_each_gitlab_status_means_for_the_gate(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
    status: str,
    allow_failure: bool,
    pipeline: str,
    state: str,
    conclusion: str,
) -> None:
    sha = _sha(local)
    api.ci.add_job(
        api.ci.add_pipeline(sha, BRANCH, pipeline), "job", status, allow_failure=allow_failure
    )

    [found] = forge.checks(sha)

    assert (found.state, found.conclusion) == (state, conclusion)


def test_the_job_running_agentrun_is_not_a_check_it_waits_for(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sha = _sha(local)
    branch = api.ci.add_pipeline(sha, BRANCH, "running")
    api.ci.add_job(branch, "test", "success")
    api.ci.add_job(branch, "agentrun-checks", "running", stage=".post")
    # Its twin in the merge request's pipeline of the same commit, waiting its turn.
    request = api.ci.add_pipeline(sha, "refs/merge-requests/1/head", "running")
    api.ci.add_job(request, "agentrun-checks", "pending", stage=".post")
    monkeypatch.setenv("CI_JOB_NAME", "agentrun-checks")

    assert [c.name for c in forge.checks(sha)] == ["test"]


def test_a_commit_without_pipelines_has_no_checks_and_every_page_is_read(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
) -> None:
    sha = _sha(local)
    assert forge.checks(sha) == []
    api.page_size = 2
    pipeline = api.ci.add_pipeline(sha, BRANCH, "success")
    for n in range(5):
        api.ci.add_job(pipeline, f"job-{n}", "success")
    assert [c.name for c in forge.checks(sha)] == [f"job-{n}" for n in range(5)]
    pages = api.find("GET", rf"/api/v4/projects/.+/pipelines/{pipeline}/jobs")
    assert [r.query.get("page", ["1"])[0] for r in pages] == ["1", "2", "3"]


def test_a_trace_loses_colours_and_section_markers() -> None:
    raw = b"section_start:1:prepare\r\x1b[0K\x1b[32;1mPreparing\x1b[0;m\r\n"
    raw += b"section_end:1:prepare\r\x1b[0Kdone\n"
    assert trace_text(raw) == "Preparing\ndone\n"
