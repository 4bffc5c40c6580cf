"""``/agentrun remember accept ID`` through ``git agentrun action``, on GitHub and GitLab.

A build's code review asks for the same thing in two rounds: that finding becomes a
proposed fact in ``refs/agentrun/memory``, pushed to the origin with the build's log. A
comment from someone who may not steer leaves it proposed; one from a writer (GitHub) or
a Developer (GitLab) accepts it, and the accept reaches the origin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from github_flow import (
    Site,
    commented,
    comments,
    labeled,
    must,
    permissions,
    posted_comments,
)
from gitlab_flow import DEVELOPER, REPORTER, Pipeline, issue_event, note_event
from support.gitlab_api import GitLabAPI, serving
from support.prism import GitHubAPI

from agentrun.store.memory import read

FINDING = "Add a test for the greeting"
# Two rounds of code review ask for the same thing; the third implement round asks a
# person, so the build parks with its issue open to comments.
STEPS = [
    {"phase": "code-review", "round": 1, "verb": "revise", "findings": [FINDING]},
    {"phase": "code-review", "round": 2, "verb": "revise", "findings": [FINDING.lower()]},
    {"phase": "implement", "round": 3, "verb": "escalate", "text": "Which greeting?"},
]
FACT = f"A reviewer asked for this in more than one round: {FINDING}"


def origin_facts(site: Site) -> dict[str, tuple[str, str, str]]:
    facts = read(pygit2.Repository(str(site.origin))).facts
    return {f.id: (f.state, f.text, f.by) for f in facts.values()}


def test_github_a_writer_accepts_a_recurring_finding_a_reader_may_not(
    tmp_path: Path, github_api: GitHubAPI
) -> None:
    github_api.clear()
    site = Site(tmp_path, github_api)
    site.configure(STEPS)
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(job.run())
    assert job.outputs()["state"] == "parked"
    assert origin_facts(site) == {"m-1": ("proposed", FACT, "")}

    site.api.clear()
    permissions(site.api, {"maintainer": "write", "reader": "read"})
    comments(site.api, 7, [(901, "reader", "/agentrun remember accept m-1")])
    must(site.job("issue_comment", commented(7, 901, "…", "reader")).run())
    assert origin_facts(site)["m-1"][0] == "proposed"
    said = [c for c in posted_comments(site.api, 7) if c.startswith("@reader")]
    assert said and "reader has read permission here; write or above is needed" in said[0]

    site.api.clear()
    permissions(site.api, {"maintainer": "write", "reader": "read"})
    comments(site.api, 7, [(902, "maintainer", "/agentrun remember accept m-1")])
    out = must(site.job("issue_comment", commented(7, 902, "…", "maintainer")).run())
    assert "comment 902 by maintainer: fact m-1 accepted" in out
    assert origin_facts(site) == {"m-1": ("accepted", FACT, "maintainer")}
    site.api.assert_accepted()


@pytest.fixture
def gitlab(tmp_path: Path) -> Iterator[GitLabAPI]:
    with serving(tmp_path / "origin.git") as found:
        yield found


def test_gitlab_a_developer_accepts_a_recurring_finding_a_reporter_may_not(
    tmp_path: Path, gitlab: GitLabAPI
) -> None:
    site = Site(tmp_path, gitlab)  # type: ignore[arg-type]  # the origin and checkouts only
    gitlab.add_member("maintainer", DEVELOPER)
    gitlab.add_member("reporter", REPORTER)
    site.configure(STEPS)
    issue = gitlab.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))

    def pipeline(payload: object) -> Pipeline:
        return Pipeline(site.clone(), gitlab, payload, "trigger", {})  # type: ignore[arg-type]

    first = pipeline(issue_event(issue, "maintainer"))
    must(first.run("--forge", "gitlab"))
    assert first.outputs()["state"] == "parked"
    assert origin_facts(site) == {"m-1": ("proposed", FACT, "")}

    note = gitlab.add_note("issues", issue, "reporter", "/agentrun remember accept m-1")
    must(pipeline(note_event(issue, "maintainer", note["body"])).run())
    assert origin_facts(site)["m-1"][0] == "proposed"
    refused = [n["body"] for n in gitlab.comments("issues", issue)]
    assert any(b.startswith("@reporter") and "permission" in b for b in refused), refused

    gitlab.add_note("issues", issue, "maintainer", "/agentrun remember accept m-1")
    must(pipeline(note_event(issue, "maintainer", "…")).run())
    assert origin_facts(site) == {"m-1": ("accepted", FACT, "maintainer")}
