"""A build's pull request merged or closed on GitHub: the build is archived everywhere (§12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest
from github_flow import API_REPO, Site, example, labeled, must
from support.prism import GitHubAPI

from agentrun.store.archive import archived
from agentrun.store.log import EventLog

SLUG = "issue-7-fix-the-greeting"
PR = 1347  # the number of GitHub's example pull request, which Prism answers


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    return Site(tmp_path, github_api)


def closed(number: int, merged: bool, login: str) -> dict[str, Any]:
    payload = example("pull_request", "closed")
    payload["pull_request"].update(number=number, merged=merged, state="closed")
    payload["sender"]["login"] = login
    return payload


def complete_build(site: Site) -> None:
    site.configure([])
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(job.run())
    assert job.outputs()["state"] == "complete"


def closing_event(site: Site, slug: str) -> Any:
    remote = site.remote_repo()
    tip = archived(remote)[slug]
    return EventLog(remote).event_at(tip).payload


def test_a_merged_pull_request_archives_its_build_on_the_remote(site: Site) -> None:
    complete_build(site)

    job = site.job("pull_request", closed(PR, merged=True, login="maintainer"))
    out = must(job.run())

    assert f"build {SLUG}: pull request #{PR} was merged; the build is archived" in out
    assert job.outputs()["state"] == "merged"
    remote = site.remote_repo()
    assert EventLog(remote).slugs() == []
    last = closing_event(site, SLUG)
    assert (last.type, last.number, last.merged) == ("proposal.closed", PR, True)
    # A later job's clone sees it archived, not live.
    later = site.clone()
    must(site.job("schedule", None, checkout=later).run())
    assert EventLog(pygit2.Repository(str(later))).slugs() == []


def test_the_scheduled_sweep_archives_a_build_whose_pull_request_was_closed(
    site: Site,
) -> None:
    complete_build(site)
    site.api.clear()
    site.api.respond(
        "GET",
        f"{API_REPO}/pulls/{PR}",
        lambda ex: {**ex, "state": "closed", "merged_at": None, "merged": False},
    )

    out = must(site.job("schedule", None).run())

    assert f"build {SLUG}: pull request #{PR} was closed; the build is archived" in out
    last = closing_event(site, SLUG)
    assert (last.type, last.merged) == ("proposal.closed", False)
    assert EventLog(site.remote_repo()).slugs() == []
    site.api.assert_accepted()


def test_a_closed_pull_request_that_is_no_builds_changes_nothing(site: Site) -> None:
    complete_build(site)

    out = must(site.job("pull_request", closed(4242, merged=False, login="someone")).run())

    assert "pull request #4242 is not an agentrun build's; nothing to do" in out
    assert EventLog(site.remote_repo()).slugs() == [SLUG]
