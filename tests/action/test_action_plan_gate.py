"""The human plan gate through ``git agentrun action`` on both forges: the plan is posted
on the issue as a question; ``/agentrun approve`` from a person allowed to steer lets the
build implement, from anyone else it is refused with the usual reply."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from github_flow import (
    API_REPO,
    Site,
    commented,
    comments,
    labeled,
    must,
    permissions,
    posted_comments,
    remote_events,
    remote_types,
)
from gitlab_flow import DEVELOPER, REPORTER, Pipeline, issue_event, note_event
from support.gitlab_api import GitLabAPI, serving
from support.prism import GitHubAPI

PLAN = "1. Greet in `app.py`.\n2. Add a test."
STEPS = [{"phase": "plan", "verb": "plan", "text": PLAN}]
GATE = '[policy]\nplan_approval = "human"\n'
ASKED = "Plan round 1 waits for a person's approval before any code is written."
REPLIES = "Reply `/agentrun approve` to go on, or `/agentrun answer <what to change>`"


def approvals(site: Site, slug: str) -> list[tuple[str, str]]:
    found = [e for e in remote_events(site, slug) if e.type == "plan.approved"]
    return [(e.payload.by, e.actor.login) for e in found]


def the_question(bodies: list[str]) -> str:
    (question,) = [b for b in bodies if ASKED in b]
    assert PLAN in question and REPLIES in question
    assert question.count("/agentrun answer") == 1  # no second reply line to contradict it
    return question


# --- GitHub ---------------------------------------------------------------------------

GITHUB_SLUG = "issue-7-fix-the-greeting"


@pytest.fixture
def github(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    found = Site(tmp_path, github_api)
    found.configure(STEPS, GATE)
    return found


def test_github_the_plan_waits_on_the_issue_and_a_writer_approves_it(github: Site) -> None:
    job = github.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(job.run())
    assert job.outputs()["state"] == "parked"
    question = the_question(posted_comments(github.api, 7))
    assert question.startswith(f"<!-- agentrun:question {GITHUB_SLUG} e1 -->\n**Question e1**")
    assert "implement.started" not in remote_types(github, GITHUB_SLUG)
    github.api.assert_accepted()
    github.api.clear()
    permissions(github.api, {"maintainer": "write", "reader": "read"})

    # A reader's approval is refused with the usual reply, and nothing moves.
    comments(github.api, 7, [(901, "reader", "/agentrun approve")])
    refused = github.job("issue_comment", commented(7, 901, "…", "reader"))
    must(refused.run())
    assert refused.outputs()["state"] == "parked"
    assert approvals(github, GITHUB_SLUG) == []
    (reply,) = [c for c in posted_comments(github.api, 7) if c.startswith("@reader")]
    assert reply.startswith(
        "@reader this command was not run: reader has read permission here; "
        "write or above is needed"
    )

    comments(
        github.api,
        7,
        [
            (901, "reader", "/agentrun approve"),
            (902, "maintainer", "Looks right.\n/agentrun approve"),
        ],
    )
    approved = github.job("issue_comment", commented(7, 902, "…", "maintainer"))
    out = must(approved.run())

    assert approvals(github, GITHUB_SLUG) == [("maintainer", "maintainer")]
    assert approved.outputs()["state"] == "complete", out
    assert "comment 902 by maintainer: plan approved (e1)" in out
    reactions = github.api.find("POST", f"{API_REPO}/issues/comments/\\d+/reactions")
    assert [r.path for r in reactions] == [f"{API_REPO}/issues/comments/902/reactions"]
    types = remote_types(github, GITHUB_SLUG)
    assert types.index("plan.approved") < types.index("implement.started")
    github.api.assert_accepted()


# --- GitLab ---------------------------------------------------------------------------

GITLAB_SLUG = "issue-1-fix-the-greeting"
STATUS = "<!-- agentrun:status"


@pytest.fixture
def gitlab_api(tmp_path: Path) -> Iterator[GitLabAPI]:
    with serving(tmp_path / "origin.git") as found:
        yield found


@pytest.fixture
def gitlab(tmp_path: Path, gitlab_api: GitLabAPI) -> Site:
    found = Site(tmp_path, gitlab_api)  # type: ignore[arg-type]  # the origin and checkouts only
    gitlab_api.add_member("maintainer", DEVELOPER)
    gitlab_api.add_member("reporter", REPORTER)
    found.configure(STEPS, GATE)
    return found


def pipeline(site: Site, api: GitLabAPI, payload: object) -> Pipeline:
    return Pipeline(site.clone(), api, payload)  # type: ignore[arg-type]


def notes(api: GitLabAPI, iid: int) -> list[str]:
    return [n["body"] for n in api.comments("issues", iid) if not n["body"].startswith(STATUS)]


def test_gitlab_the_plan_waits_on_the_issue_and_a_developer_approves_it(
    gitlab: Site, gitlab_api: GitLabAPI
) -> None:
    api = gitlab_api
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    first = pipeline(gitlab, api, issue_event(issue, "maintainer"))
    must(first.run("--forge", "gitlab"))
    assert first.outputs()["state"] == "parked"
    the_question(notes(api, issue))
    assert not api.mrs

    # A Reporter's approval (its payload claiming a Developer wrote it) is refused.
    note = api.add_note("issues", issue, "reporter", "/agentrun approve")
    forged = pipeline(gitlab, api, note_event(issue, "maintainer", note["body"]))
    must(forged.run())
    assert forged.outputs()["state"] == "parked"
    assert approvals(gitlab, GITLAB_SLUG) == []
    refusal = [n for n in notes(api, issue) if n.startswith("@reporter")]
    assert refusal and "permission" in refusal[0], notes(api, issue)

    api.add_note("issues", issue, "maintainer", "/agentrun approve")
    second = pipeline(gitlab, api, note_event(issue, "maintainer", "…"))
    must(second.run())

    assert approvals(gitlab, GITLAB_SLUG) == [("maintainer", "maintainer")]
    assert second.outputs()["state"] == "complete", second.output.read_text()
    [mr] = api.mrs.values()
    assert mr["source_branch"] == f"agentrun/{GITLAB_SLUG}"
    accepted = api.find("POST", f"/api/v4/projects/.+/issues/{issue}/notes/.+/award_emoji")
    assert [r.body["name"] for r in accepted] == ["thumbsup"]
