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


Case = tuple[GitLabForge, GitLabAPI, str]  # the forge, the fake, the commit checked


@pytest.fixture
def case(
    forge: GitLabForge,  # noqa: F811
    api: GitLabAPI,  # noqa: F811
    local: pygit2.Repository,  # noqa: F811
) -> Case:
    return forge, api, str(local.head.target)


def _by_name(found: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in found}


def test_a_passing_and_a_failing_job_with_its_reason_and_trace_tail(
    case: Case,
) -> None:
    gl, fake, sha = case
    pipeline = fake.ci.add_pipeline(sha, BRANCH, "failed")
    fake.ci.add_job(pipeline, "lint", "success")
    log = "\x1b[0Ksection_start:1700000000:step_script\r\x1b[0K" + "ok\n" * 2000
    log += "\x1b[31;1mFAILED tests/test_login.py::test_logout\x1b[0;m\nERROR: Job failed: exit 1\n"
    failing = fake.ci.add_job(
        pipeline, "test", "failed", failure_reason="script_failure", trace=log
    )

    found = _by_name(gl.checks(sha))

    assert sorted(found) == ["lint", "test"]
    assert found["lint"] == Check(
        "lint", "success", "success", url=f"{fake.url}/{PROJECT}/-/jobs/{failing - 1}"
    )
    test = found["test"]
    assert (test.state, test.conclusion, test.summary) == ("failure", "failed", "script failure")
    assert test.log_tail.endswith(
        "FAILED tests/test_login.py::test_logout\nERROR: Job failed: exit 1\n"
    )
    assert len(test.log_tail) == LOG_TAIL and "\x1b" not in test.log_tail
    assert test.url == f"{fake.url}/{PROJECT}/-/jobs/{failing}"
    # The trace is asked for by the project's numeric id, as GitLab's description says.
    [trace] = fake.find("GET", r"/api/v4/projects/.+/jobs/\d+/trace")
    assert trace.path == f"/api/v4/projects/{PROJECT_ID}/jobs/{failing}/trace"
    [listed] = fake.find("GET", f"/api/v4/projects/{PROJECT}/pipelines")
    assert {k: v for k, v in listed.query.items() if k != "per_page"} == {
        "sha": [sha],
        "order_by": ["id"],
        "sort": ["desc"],
    }


def test_an_erased_trace_leaves_the_failure_without_a_tail(
    case: Case,
) -> None:
    gl, fake, sha = case
    job = fake.ci.add_job(fake.ci.add_pipeline(sha, BRANCH, "failed"), "test", "failed")
    del fake.ci.traces[job]  # GitLab answers 404 for it

    [found] = gl.checks(sha)

    assert (found.state, found.summary, found.log_tail) == ("failure", "", "")
    assert [r.status for r in fake.find("GET", r"/api/v4/projects/.+/jobs/\d+/trace")] == [404]


def test_the_newest_run_of_a_name_wins_across_retries_and_pipelines(
    case: Case,
) -> None:
    gl, fake, sha = case
    first = fake.ci.add_pipeline(sha, BRANCH, "failed")
    flaky = fake.ci.add_job(first, "test", "failed", failure_reason="script_failure")
    fake.ci.add_job(first, "build", "failed", failure_reason="runner_system_failure")
    fake.ci.retry(flaky, "success")  # retried in its pipeline: the new run passes
    second = fake.ci.add_pipeline(sha, BRANCH, "success", source="web")
    fake.ci.add_job(second, "build", "success")  # the same commit, built again

    found = _by_name(gl.checks(sha))

    assert {n: c.state for n, c in found.items()} == {"build": "success", "test": "success"}
    assert fake.find("GET", r"/api/v4/projects/.+/jobs/\d+/trace") == []  # nothing failed


def test_external_statuses_count_and_agentruns_own_do_not(
    case: Case,
) -> None:
    gl, fake, sha = case
    pipeline = fake.ci.add_pipeline(sha, BRANCH, "success")
    fake.ci.add_job(pipeline, "test", "success")
    gl.set_commit_status(sha, "agentrun/tests", "failure", "agentrun's own verify", None)
    gl.set_commit_status(sha, "ci/jenkins", "pending", "queued", None)
    gl.set_commit_status(sha, "ci/jenkins", "failure", "3 tests failed", "https://ci/9")

    found = _by_name(gl.checks(sha))

    assert sorted(found) == ["ci/jenkins", "test"]  # the job is not read twice
    jenkins = found["ci/jenkins"]
    assert (jenkins.state, jenkins.summary, jenkins.url) == (
        "failure",
        "3 tests failed",
        "https://ci/9",
    )
    assert jenkins.log_tail == ""  # an external status has no trace on GitLab
    [statuses] = fake.find("GET", f"/api/v4/projects/{PROJECT}/repository/commits/{sha}/statuses")
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
    case: Case,
    status: str,
    allow_failure: bool,
    pipeline: str,
    state: str,
    conclusion: str,
) -> None:
    gl, fake, sha = case
    fake.ci.add_job(
        fake.ci.add_pipeline(sha, BRANCH, pipeline), "job", status, allow_failure=allow_failure
    )

    [found] = gl.checks(sha)

    assert (found.state, found.conclusion) == (state, conclusion)


def test_the_job_running_agentrun_is_not_a_check_it_waits_for(
    case: Case,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gl, fake, sha = case
    branch = fake.ci.add_pipeline(sha, BRANCH, "running")
    fake.ci.add_job(branch, "test", "success")
    fake.ci.add_job(branch, "agentrun-checks", "running", stage=".post")
    # Its twin in the merge request's pipeline of the same commit, waiting its turn.
    request = fake.ci.add_pipeline(sha, "refs/merge-requests/1/head", "running")
    fake.ci.add_job(request, "agentrun-checks", "pending", stage=".post")
    monkeypatch.setenv("CI_JOB_NAME", "agentrun-checks")

    assert [c.name for c in gl.checks(sha)] == ["test"]


def test_a_commit_without_pipelines_has_no_checks_and_every_page_is_read(
    case: Case,
) -> None:
    gl, fake, sha = case
    assert gl.checks(sha) == []
    fake.page_size = 2
    pipeline = fake.ci.add_pipeline(sha, BRANCH, "success")
    for n in range(5):
        fake.ci.add_job(pipeline, f"job-{n}", "success")
    assert [c.name for c in gl.checks(sha)] == [f"job-{n}" for n in range(5)]
    pages = fake.find("GET", rf"/api/v4/projects/.+/pipelines/{pipeline}/jobs")
    assert [r.query.get("page", ["1"])[0] for r in pages] == ["1", "2", "3"]


def test_a_trace_loses_colours_and_section_markers() -> None:
    raw = b"section_start:1:prepare\r\x1b[0K\x1b[32;1mPreparing\x1b[0;m\r\n"
    raw += b"section_end:1:prepare\r\x1b[0Kdone\n"
    assert trace_text(raw) == "Preparing\ndone\n"
