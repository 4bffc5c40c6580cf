"""``push``: a pushed ``Agentrun-Goal`` trailer starts its build in the CI job, on GitHub
(the push webhook's ``before``..``after``) and GitLab (a push pipeline's variables), once
per (commit, goal) whether the pre-push hook recorded it first or not."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_flow import Site, empty_site, must, pushed, remote_events, remote_slugs, remote_types
from gitlab_flow import Pipeline
from runner.helpers import git
from support.gitlab_api import GitLabAPI, serving
from support.prism import GitHubAPI

ZERO = "0" * 40


def goal_pushed(site: Site, *goals: str, branch: str = "main") -> tuple[str, str]:
    """A commit with the goals' trailers pushed from the seed (no hook there): before, after."""
    before = git(site.seed, "rev-parse", "HEAD")
    trailers = "\n".join(f"Agentrun-Goal: {goal}" for goal in goals)
    git(site.seed, "commit", "-q", "--allow-empty", "-m", f"ask\n\n{trailers}")
    git(site.seed, "push", "-q", "origin", f"HEAD:{branch}")
    return before, git(site.seed, "rev-parse", "HEAD")


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    return empty_site(tmp_path, github_api)


def test_a_pushed_goal_becomes_a_build_and_a_pull_request_once(site: Site) -> None:
    before, after = goal_pushed(site, "Add a greeting")
    job = site.job("push", pushed(before, after))

    out = must(job.run())

    (slug,) = remote_slugs(site)
    assert f"build {slug} started for the goal of commit {after[:10]} on main" in out
    created = remote_events(site, slug)[0].payload
    assert (created.source, created.base_ref, created.base_sha) == ("hook", "main", after)
    assert created.config["forge"]["kind"] == "github"
    assert job.outputs()["state"] == "complete"
    assert "proposal.opened" in remote_types(site, slug)
    (opened,) = site.api.find("POST", "/repos/octocat/Hello-World/pulls")
    assert opened.body["head"] == f"agentrun/{slug}"

    again = must(site.job("push", pushed(before, after)).run())
    assert f"build {slug} exists for the goal of commit {after[:10]}" in again
    assert remote_slugs(site) == [slug]
    site.api.assert_accepted()


def test_the_job_runs_the_build_the_hook_recorded_and_starts_no_other(site: Site) -> None:
    git(site.seed, "agentrun", "hook", "install")
    before, after = goal_pushed(site, "Add a greeting")  # through the hook
    (slug,) = remote_slugs(site)
    assert remote_types(site, slug) == ["build.created"]

    job = site.job("push", pushed(before, after))
    out = must(job.run())

    assert f"build {slug} exists for the goal of commit {after[:10]}" in out
    assert remote_slugs(site) == [slug]
    assert job.outputs()["state"] == "complete"
    assert "proposal.opened" in remote_types(site, slug)


def test_a_new_branch_brings_only_its_own_commits(site: Site) -> None:
    goal_pushed(site, "Already on main")  # a goal nobody ran (no hook, no job)
    git(site.seed, "checkout", "-q", "-b", "feature")
    _, after = goal_pushed(site, "Add a farewell", "Add a greeting", branch="feature")

    out = must(site.job("push", pushed(ZERO, after, "refs/heads/feature")).run())

    slugs = remote_slugs(site)
    assert len(slugs) == 2, out
    assert {remote_events(site, s)[0].payload.goal for s in slugs} == {
        "Add a farewell",
        "Add a greeting",
    }
    assert {remote_events(site, s)[0].payload.base_ref for s in slugs} == {"feature"}


@pytest.mark.parametrize(
    ("ref", "said"),
    [
        ("refs/heads/agentrun/some-build", "ignored: a push to refs/heads/agentrun/some-build"),
        ("refs/tags/v1", "ignored: a push to refs/tags/v1 starts no build"),
    ],
)
def test_build_branches_and_tags_start_nothing(site: Site, ref: str, said: str) -> None:
    before, after = goal_pushed(site, "Add a greeting")
    out = must(site.job("push", pushed(before, after, ref)).run())
    assert said in out
    assert remote_slugs(site) == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"after": "not-a-sha"}, "the push payload's after is not a commit id"),
        ({"before": None}, "the push payload's before is not a commit id"),
        ({"ref": None}, "the push payload names no ref that was pushed"),
    ],
)
def test_a_malformed_push_payload_is_one_line_and_exit_1(
    site: Site, change: dict[str, object], said: str
) -> None:
    before, after = goal_pushed(site, "Add a greeting")
    payload = {**pushed(before, after), **change}

    done = site.job("push", payload).run()

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert remote_slugs(site) == []


# --- GitLab: a push pipeline ------------------------------------------------------------


@pytest.fixture
def gitlab(tmp_path: Path) -> Iterator[tuple[Site, GitLabAPI]]:
    with serving(tmp_path / "origin.git") as api:
        found = Site(tmp_path, api)  # type: ignore[arg-type]  # the origin and checkouts only
        found.configure([])
        yield found, api


def push_pipeline(site: Site, api: GitLabAPI, before: str, after: str, branch: str) -> Pipeline:
    env = {"CI_COMMIT_BEFORE_SHA": before, "CI_COMMIT_SHA": after, "CI_COMMIT_BRANCH": branch}
    return Pipeline(site.clone(), api, None, "push", env)


def test_a_gitlab_push_pipeline_starts_the_goal_once(gitlab: tuple[Site, GitLabAPI]) -> None:
    site, api = gitlab
    before, after = goal_pushed(site, "Add a greeting")
    job = push_pipeline(site, api, before, after, "main")

    out = must(job.run())

    (slug,) = remote_slugs(site)
    assert f"build {slug} started for the goal of commit {after[:10]} on main" in out
    created = remote_events(site, slug)[0].payload
    assert (created.source, created.base_sha, created.config["forge"]["kind"]) == (
        "hook",
        after,
        "gitlab",
    )
    assert job.outputs()["state"] == "complete"
    assert "proposal.opened" in remote_types(site, slug)

    again = must(push_pipeline(site, api, before, after, "main").run())
    assert f"build {slug} exists" in again and remote_slugs(site) == [slug]
    # A build branch's own push pipeline is the CI gate's, never a goal's.
    ignored = must(push_pipeline(site, api, before, after, "agentrun/x").run())
    assert "continuing the builds whose head is" in ignored and "started" not in ignored
    assert remote_slugs(site) == [slug]


def test_a_gitlab_push_pipeline_with_a_bad_commit_is_one_line_and_exit_1(
    gitlab: tuple[Site, GitLabAPI],
) -> None:
    site, api = gitlab
    before, _ = goal_pushed(site, "Add a greeting")
    job = push_pipeline(site, api, before, "HEAD", "main")
    done = subprocess.run(
        ["git", "agentrun", "action", "--forge", "gitlab"],
        cwd=job.checkout,
        env=job.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "the push payload's after is not a commit id" in line
