"""What every job owes the workflow: reviews only on build branches, the commit identity
it is given, outputs however it ends, and the build logs fetched by itself."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from github_flow import (
    API_REPO,
    Site,
    commented,
    comments,
    labeled,
    must,
    permissions,
    remote_types,
    reviewed,
    reviews,
)
from runner.helpers import git
from support.prism import GitHubAPI

SLUG = "issue-7-fix-the-greeting"
PR = 1347  # the number of GitHub's example pull request, which Prism answers
BOT = ("github-actions[bot]", "41898282+github-actions[bot]@users.noreply.github.com")
ESCALATE = [{"phase": "implement", "attempt": 1, "verb": "escalate", "text": "Which greeting?"}]


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    return Site(tmp_path, github_api)


def complete(site: Site) -> None:
    site.configure([])
    must(site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer")).run())
    assert remote_types(site, SLUG)[-1] == "build.completed"
    site.api.clear()
    permissions(site.api, {"maintainer": "write"})
    reviews(site.api, PR, [(5001, "maintainer", "CHANGES_REQUESTED", "Greet in French too")])


def test_a_review_on_a_pull_request_that_is_not_a_builds_steers_nothing(site: Site) -> None:
    complete(site)
    before = remote_types(site, SLUG)
    # GitHub's example as it is: PR #1347 (the build's number here), branch `changes`.
    job = site.job(
        "pull_request_review", reviewed(PR, 5001, "changes_requested", "…", "maintainer", None)
    )

    out = must(job.run())

    assert out == (
        f"pull request #{PR} is not an agentrun build's (its branch 'changes' is not "
        "agentrun/*); nothing to do\n"
    )
    assert remote_types(site, SLUG) == before
    assert site.api.requests == []  # nothing asked of the API
    assert job.outputs() == {"slug": "", "pr-url": "", "state": "", "tasks": "[]"}


def test_the_same_review_on_the_builds_branch_starts_the_next_round(site: Site) -> None:
    complete(site)
    payload = reviewed(PR, 5001, "changes_requested", "…", "maintainer", f"agentrun/{SLUG}")

    must(site.job("pull_request_review", payload).run())

    assert "feedback.received" in remote_types(site, SLUG)
    assert remote_types(site, SLUG)[-1] == "build.completed"


def test_the_builds_commits_carry_the_identity_the_job_is_given(site: Site) -> None:
    site.configure([{"phase": "implement", "round": 1, "write": {"hello.txt": "hello\n"}}])
    name, email = BOT
    identity = {"AGENTRUN_COMMITTER_NAME": name, "AGENTRUN_COMMITTER_EMAIL": email}
    job = site.job("issues", labeled(7, "Fix the greeting", "", "maintainer"), extra_env=identity)

    must(job.run())

    remote = site.remote_repo()
    branch = remote.references[f"refs/heads/agentrun/{SLUG}"].target
    base = remote.references["refs/heads/main"].target
    walker = remote.walk(branch, pygit2.enums.SortMode.TOPOLOGICAL)
    walker.hide(base)
    phase_commits = list(walker)
    assert len(phase_commits) >= 3  # plan, implement, reviews, ...
    for commit in phase_commits:
        assert (commit.author.name, commit.author.email) == BOT, commit.message
        assert (commit.committer.name, commit.committer.email) == BOT
    log = remote.references[f"refs/agentrun/builds/{SLUG}"].peel(pygit2.Commit)
    assert (log.committer.name, log.committer.email) == BOT  # the events too


def test_a_failed_build_writes_its_outputs(site: Site) -> None:
    site.configure([])
    site.api.answer_with("POST", f"{API_REPO}/pulls", 403)  # the token may not open PRs
    job = site.job("issues", labeled(7, "Fix the greeting", "", "maintainer"))

    done = job.run()

    assert done.returncode == 6, done.stdout + done.stderr  # a failed build fails the job
    assert job.outputs() == {"slug": SLUG, "pr-url": "", "state": "failed", "tasks": "[]"}


def test_a_job_that_errors_still_writes_what_it_knew(site: Site) -> None:
    site.configure(ESCALATE)
    must(site.job("issues", labeled(7, "Fix the greeting", "", "maintainer")).run())
    comments(site.api, 7, [(902, "maintainer", "/agentrun answer say hello")])
    # The job's token is missing: steering cannot ask the API who commented.
    job = site.job(
        "issue_comment", commented(7, 902, "…", "maintainer"), extra_env={"GITHUB_TOKEN": ""}
    )

    done = job.run()

    assert done.returncode == 1
    assert done.stderr.startswith("agentrun: the github forge needs a token")
    assert done.stderr.count("\n") == 1
    assert job.outputs() == {"slug": SLUG, "pr-url": "", "state": "parked", "tasks": "[]"}


def test_bad_input_still_writes_the_outputs(site: Site, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    job = site.job("issues", None, extra_env={"GITHUB_EVENT_PATH": str(broken)})

    done = job.run()

    assert done.returncode == 1
    assert "cannot read the event payload" in done.stderr
    assert job.output.read_text() == "slug=\npr-url=\nstate=\n"


def test_a_fresh_checkout_fetches_the_build_logs_itself(site: Site) -> None:
    site.configure(ESCALATE)
    must(site.job("issues", labeled(7, "Fix the greeting", "", "maintainer")).run())
    checkout = site.clone()  # as actions/checkout leaves it: no refs/agentrun/* at all
    assert git(checkout, "for-each-ref", "refs/agentrun", "refs/agentrun-remotes") == ""
    permissions(site.api, {"maintainer": "write"})
    comments(site.api, 7, [(903, "maintainer", "/agentrun status")])

    job = site.job("issue_comment", commented(7, 903, "…", "maintainer"), checkout=checkout)
    must(job.run())

    assert job.outputs()["slug"] == SLUG
    assert git(checkout, "for-each-ref", "--format=%(refname)", f"refs/agentrun/builds/{SLUG}")
