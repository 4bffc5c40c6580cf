"""Whole Action flows: label → question → answer → draft PR → checks → ready; reviews;
two jobs at once; a job killed mid-phase or stopped at its time limit."""

from __future__ import annotations

import time
from pathlib import Path

import pygit2
import pytest
from github_flow import (
    API_REPO,
    Site,
    commented,
    comments,
    kill_when_hung,
    labeled,
    must,
    permissions,
    posted_comments,
    remote_events,
    remote_types,
    reviewed,
    reviews,
)
from runner.helpers import SCRIPTED_BUT_IMPLEMENT, command_agent, kill_left_over
from support.prism import GitHubAPI

from agentrun.store.log import EventLog

SLUG = "issue-7-fix-the-greeting"
PR = 1347  # the number of GitHub's example pull request, which Prism answers
VERIFY = '[[verify]]\nname = "tests"\ncommand = "true"\n'


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    return Site(tmp_path, github_api)


def test_label_question_answer_draft_checks_ready_then_review(site: Site) -> None:
    site.configure(
        [{"phase": "implement", "round": 1, "attempt": 1, "verb": "escalate", "text": "Which?"}],
        VERIFY,
    )
    first = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(first.run())
    assert first.outputs()["state"] == "parked"
    (question,) = [c for c in posted_comments(site.api, 7) if "Which?" in c]
    assert "/agentrun answer" in question
    assert not site.api.find("POST", f"{API_REPO}/pulls")

    site.api.clear()
    permissions(site.api, {"maintainer": "write", "reader": "read"})
    comments(site.api, 7, [(902, "maintainer", "/agentrun answer say hello")])
    second = site.job("issue_comment", commented(7, 902, "…", "maintainer"))
    must(second.run())

    outputs = second.outputs()
    assert (outputs["slug"], outputs["state"]) == (SLUG, "complete")
    assert outputs["pr-url"].endswith(f"/pull/{PR}")
    (opened,) = site.api.find("POST", f"{API_REPO}/pulls")
    assert opened.body["draft"] is True
    # A green check per verify step on the pushed head, then ready, then a review asked of
    # whoever labeled the issue.
    sha = str(site.remote_repo().references[f"refs/heads/agentrun/{SLUG}"].target)
    (status,) = [r.body for r in site.api.find("POST", f"{API_REPO}/statuses/{sha}")]
    assert (status["context"], status["state"]) == ("agentrun/tests", "success")
    (asked,) = site.api.find("POST", f"{API_REPO}/pulls/{PR}/requested_reviewers")
    assert asked.body == {"reviewers": ["maintainer"]}
    assert len(site.api.readied) == 1  # marked ready for review, after the checks
    site.api.assert_accepted()

    # Changes requested on the pull request: the review is the next round's feedback.
    site.api.clear()
    permissions(site.api, {"maintainer": "write"})
    reviews(site.api, PR, [(5001, "maintainer", "CHANGES_REQUESTED", "Greet in French too")])
    third = site.job(
        "pull_request_review",
        reviewed(PR, 5001, "changes_requested", "…", "maintainer", f"agentrun/{SLUG}"),
    )
    must(third.run())

    events = remote_events(site, SLUG)
    (feedback,) = [e.payload for e in events if e.type == "feedback.received"]
    assert (feedback.number, feedback.review, feedback.author) == (PR, 5001, "maintainer")
    assert feedback.text.startswith("Greet in French too")
    rounds = [e.payload.round for e in events if e.type == "implement.started"]
    assert rounds[-1] == 2
    assert [e.payload.review for e in events if e.type == "forge.cursor"][-1] == 5001
    assert third.outputs()["state"] == "complete"
    site.api.assert_accepted()


def test_two_jobs_at_once_for_one_issue_run_one_build(site: Site) -> None:
    site.configure([{"phase": "implement", "sleep": 4.0, "write": {"greeting.txt": "hi\n"}}])
    payload = labeled(7, "Fix the greeting", "Say hello.", "maintainer")
    jobs = [site.job("issues", payload), site.job("issues", payload)]

    procs = [job.popen() for job in jobs]
    outs = [proc.communicate(timeout=90)[0] for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0], outs
    assert EventLog(site.remote_repo()).slugs() == [SLUG]
    assert remote_types(site, SLUG).count("runner.attached") == 1
    held = [out for out in outs if "not run here: " in out]
    assert len(held) == 1, outs
    assert "(held by r-" in held[0]  # the runner that holds the lease, named
    assert remote_types(site, SLUG)[-1] == "build.completed"


def _hanging_config(site: Site) -> Path:
    table, state = command_agent(site.root, implement="hang")
    # The agent keeps its pids in the test's temporary folder, which isolation hides
    # (tests/security runs agents isolated under GITHUB_ACTIONS).
    table += '\n[isolation]\nmode = "none"\n'
    site.configure([], table, SCRIPTED_BUT_IMPLEMENT)
    return state


def _local_types(checkout: Path) -> list[str]:
    repo = pygit2.Repository(str(checkout))
    if EventLog(repo).tip_oid(SLUG) is None:
        return []
    return [s.event.type for s in EventLog(repo).read(SLUG)]


def test_a_job_killed_mid_phase_is_resumed_by_the_scheduled_sweep(site: Site) -> None:
    state = _hanging_config(site)
    ttl = {"AGENTRUN_LEASE_TTL": "2"}
    job = site.job("issues", labeled(7, "Fix the greeting", "", "maintainer"), extra_env=ttl)
    proc = job.popen()
    kill_when_hung(proc, state)
    assert "build.completed" not in remote_types(site, SLUG)
    time.sleep(2.5)  # the dead job's lease on the remote expires

    sweep = site.job("schedule", None, extra_env=ttl)
    out = must(sweep.run())

    assert f"{SLUG}: resumed" in out
    types = remote_types(site, SLUG)
    assert types[-1] == "build.completed"
    assert types.count("runner.attached") == 2


def test_a_job_at_its_time_limit_leaves_the_build_resumable(site: Site) -> None:
    state = _hanging_config(site)
    job = site.job(
        "issues", labeled(7, "Fix the greeting", "", "maintainer"), args=("--time-limit", "0.1")
    )
    try:
        out = must(job.run())
    finally:
        kill_left_over(state / "pids")

    assert "(stopped: time-limit)" in out
    assert job.outputs()["state"] == "stopped"  # the job's runner ended; a sweep continues
    types = remote_types(site, SLUG)
    assert "build.completed" not in types
    interrupted = [e.payload for e in remote_events(site, SLUG) if e.type == "phase.failed"]
    assert interrupted and interrupted[-1].interrupted

    out = must(site.job("schedule", None).run())
    assert f"{SLUG}: resumed" in out
    assert remote_types(site, SLUG)[-1] == "build.completed"
