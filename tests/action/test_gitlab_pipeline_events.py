"""A pipeline that ended on a build's head continues that build, on GitLab CI: the job at
the end of the build branch's own pipeline, or a ``pipeline`` event's body (GitLab's
recorded Pipeline Hook) in TRIGGER_PAYLOAD. The build waits for its CI (``[forge]
require_checks``): the pipeline's end makes it look at its checks again, and it is ready
once they passed; any other commit or branch continues nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github_flow import Site, must, remote_slugs
from gitlab_flow import DEVELOPER, Pipeline, issue_event, webhook
from support.gitlab_api import GitLabAPI, serving

SLUG = "issue-1-fix-the-greeting"
BRANCH = f"agentrun/{SLUG}"
VERIFY = '[[verify]]\nname = "tests"\ncommand = "true"\n'
GATE = '[forge]\nrequire_checks = ["test"]\n'


@pytest.fixture
def api(tmp_path: Path) -> Iterator[GitLabAPI]:
    with serving(tmp_path / "origin.git") as found:
        yield found


@pytest.fixture
def built(tmp_path: Path, api: GitLabAPI) -> tuple[Site, str]:
    """A build made from a labeled issue, published and waiting for its CI's `test` job:
    the site and its branch's head."""
    site = Site(tmp_path, api)  # type: ignore[arg-type]  # the origin and checkouts only
    api.add_member("maintainer", DEVELOPER)
    site.configure([], VERIFY + GATE)
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    first = Pipeline(site.clone(), api, issue_event(issue, "maintainer"))
    assert "is waiting" in must(first.run("--forge", "gitlab"))  # the job stays green
    assert first.outputs()["slug"] == SLUG
    assert first.outputs()["state"] == "waiting"
    head = str(site.remote_repo().references[f"refs/heads/{BRANCH}"].target)
    return site, head


def pipeline_event(sha: str, ref: str, status: str) -> dict[str, Any]:
    """GitLab's recorded Pipeline Hook body, on ``ref`` at ``sha``; no merge request."""
    payload = webhook("pipeline")
    payload["object_attributes"].update(sha=sha, ref=ref, status=status, source="push")
    payload["merge_request"] = None
    return payload


def test_a_pipeline_that_ended_on_a_builds_head_continues_it(
    built: tuple[Site, str], api: GitLabAPI
) -> None:
    site, head = built
    pipeline = api.ci.add_pipeline(head, BRANCH, "success")
    api.ci.add_job(pipeline, "test", "success")
    job = Pipeline(site.clone(), api, pipeline_event(head, BRANCH, "success"))

    said = must(job.run("--forge", "gitlab"))

    assert f"pipeline 31 success: continuing the builds whose head is {head[:10]}" in said
    assert job.outputs()["state"] == "complete"  # its checks passed: marked ready
    assert remote_slugs(site) == [SLUG]


def test_the_job_ending_a_build_branchs_own_pipeline_continues_its_build(
    built: tuple[Site, str], api: GitLabAPI
) -> None:
    site, head = built
    own = {"CI_COMMIT_BRANCH": BRANCH, "CI_COMMIT_SHA": head, "CI_PIPELINE_ID": "77"}
    pipeline = api.ci.add_pipeline(head, BRANCH, "success")
    api.ci.add_job(pipeline, "test", "success")
    job = Pipeline(site.clone(), api, None, "push", own)

    said = must(job.run("--forge", "gitlab"))

    assert f"pipeline 77 of {BRANCH}: continuing the builds whose head is {head[:10]}" in said
    assert job.outputs()["state"] == "complete"


@pytest.mark.parametrize(
    ("sha", "ref", "status", "said"),
    [
        ("1" * 40, BRANCH, "success", "no running build's head is 1111111111; nothing to do"),
        (None, "main", "success", "ran on 'main', not an agentrun build's branch; nothing to do"),
        (None, BRANCH, "running", "ignored: pipeline 31 is running; its end continues it"),
    ],
)
def test_a_pipeline_elsewhere_or_still_running_continues_nothing(
    built: tuple[Site, str], api: GitLabAPI, sha: str | None, ref: str, status: str, said: str
) -> None:
    site, head = built
    job = Pipeline(site.clone(), api, pipeline_event(sha or head, ref, status))

    out = must(job.run("--forge", "gitlab"))

    assert said in out
    assert job.outputs().get("state") != "complete"  # still waiting for its checks


@pytest.mark.parametrize(
    ("attributes", "said"),
    [
        ({"status": "success"}, "the pipeline webhook payload names no commit sha"),
        ({"sha": "HEAD", "status": "success"}, "the pipeline webhook payload names no commit sha"),
        ("not an object", "the pipeline webhook payload names no commit sha"),
    ],
)
def test_a_malformed_pipeline_payload_is_one_line_and_exit_1(
    tmp_path: Path, api: GitLabAPI, attributes: object, said: str
) -> None:
    site = Site(tmp_path, api)  # type: ignore[arg-type]
    site.configure([], VERIFY)
    payload = {"object_kind": "pipeline", "object_attributes": attributes}
    job = Pipeline(site.clone(), api, payload)

    done = job.run("--forge", "gitlab")

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert remote_slugs(site) == []


def test_a_build_branchs_pipeline_without_a_commit_sha_is_one_line_and_exit_1(
    tmp_path: Path, api: GitLabAPI
) -> None:
    site = Site(tmp_path, api)  # type: ignore[arg-type]
    site.configure([], VERIFY)
    own = {"CI_COMMIT_BRANCH": BRANCH, "CI_COMMIT_SHA": "", "CI_PIPELINE_ID": "77"}

    done = Pipeline(site.clone(), api, None, "push", own).run("--forge", "gitlab")

    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        done.stderr.strip()
        == f"agentrun: CI_COMMIT_SHA names no commit for the pipeline of {BRANCH}"
    )
