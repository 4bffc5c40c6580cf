"""Whole GitLab CI flows: label → question note → a Reporter's answer refused, a
Developer's applied → draft merge request → green statuses → ready and reviewer →
changes requested run round 2; a forged payload; a scheduled sweep; bad payloads."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_flow import (
    PLAN_GATE,
    PLAN_STEPS,
    Site,
    approvals,
    kill_when_hung,
    must,
    plan_question,
    remote_events,
    remote_slugs,
    remote_types,
)
from gitlab_flow import (
    DEVELOPER,
    REPORTER,
    Pipeline,
    issue_event,
    merge_request_event,
    note_event,
)
from runner.helpers import SCRIPTED_BUT_IMPLEMENT, command_agent
from support.gitlab_api import PROJECT, GitLabAPI, serving

from agentrun.forge.gitlab_site import proposal_number

SLUG = "issue-1-fix-the-greeting"
BRANCH = f"agentrun/{SLUG}"
VERIFY = '[[verify]]\nname = "tests"\ncommand = "true"\n'
ISSUES = f"/api/v4/projects/{PROJECT}/issues"
MRS = f"/api/v4/projects/{PROJECT}/merge_requests"
STATUS = "<!-- agentrun:status"  # the status note's first line


@pytest.fixture
def api(tmp_path: Path) -> Iterator[GitLabAPI]:
    with serving(tmp_path / "origin.git") as found:
        yield found


@pytest.fixture
def site(tmp_path: Path, api: GitLabAPI) -> Site:
    found = Site(tmp_path, api)  # type: ignore[arg-type]  # the origin and checkouts only
    api.add_member("maintainer", DEVELOPER)
    api.add_member("reporter", REPORTER)
    return found


def pipeline(
    site: Site,
    api: GitLabAPI,
    payload: object,
    source: str = "trigger",
    extra_env: dict[str, str] | None = None,
) -> Pipeline:
    return Pipeline(site.clone(), api, payload, source, extra_env or {})  # type: ignore[arg-type]


def notes(api: GitLabAPI, kind: str, iid: int) -> list[str]:
    """The notes on an issue or merge request, but the status note (edited in place)."""
    return [n["body"] for n in api.comments(kind, iid) if not n["body"].startswith(STATUS)]


def test_label_question_refused_and_accepted_answers_draft_ready_then_changes(
    site: Site, api: GitLabAPI
) -> None:
    site.configure(
        [{"phase": "implement", "round": 1, "attempt": 1, "verb": "escalate", "text": "Which?"}],
        VERIFY,
    )
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    first = pipeline(site, api, issue_event(issue, "maintainer"))
    done = first.run("--forge", "gitlab")
    must(done)
    assert first.outputs()["state"] == "parked"
    asked = [n for n in notes(api, "issues", issue) if "Which?" in n]
    assert len(asked) == 1, api.comments("issues", issue)
    question = asked[0]
    assert "/agentrun answer" in question
    assert not api.mrs

    # A Reporter's answer, whose payload claims a Developer wrote it: the note is read
    # again through the API, and its author may not steer.
    note = api.add_note("issues", issue, "reporter", "/agentrun answer say goodbye")
    forged = pipeline(site, api, note_event(issue, "maintainer", note["body"]))
    must(forged.run())  # GITLAB_CI=true picks the gitlab forge
    assert forged.outputs()["state"] == "parked"
    refusal = [n for n in notes(api, "issues", issue) if n.startswith("@reporter")]
    assert refusal and "permission" in refusal[0], notes(api, "issues", issue)

    api.add_note("issues", issue, "maintainer", "/agentrun answer say hello")
    second = pipeline(site, api, note_event(issue, "maintainer", "…"))
    must(second.run())
    outputs = second.outputs()
    assert (outputs["slug"], outputs["state"]) == (SLUG, "complete"), second.output.read_text()
    [mr] = api.mrs.values()
    assert mr["source_branch"] == BRANCH and outputs["pr-url"] == mr["web_url"]
    [opened] = api.find("POST", MRS)
    assert opened.body["title"].startswith("Draft: ")
    assert not mr["title"].startswith("Draft: ")  # ready after the checks
    assert f"Closes #{issue}" in mr["description"]
    sha = str(site.remote_repo().references[f"refs/heads/{BRANCH}"].target)
    statuses = [r.body for r in api.find("POST", f"/api/v4/projects/{PROJECT}/statuses/{sha}")]
    assert [(s["name"], s["state"]) for s in statuses][-1] == ("agentrun/tests", "success")
    assert [r["username"] for r in mr["reviewers"]] == ["maintainer"]
    accepted = api.find("POST", f"/api/v4/projects/.+/issues/{issue}/notes/.+/award_emoji")
    assert [r.body["name"] for r in accepted] == ["thumbsup"]

    # Changes requested on the merge request: its notes are the next round's feedback.
    iid = int(mr["iid"])
    api.reviewer_states[(iid, "maintainer")] = "requested_changes"
    api.add_note("merge_requests", iid, "maintainer", "Greet in French too")
    third = pipeline(site, api, merge_request_event(iid, BRANCH, "update", "maintainer"))
    must(third.run())
    feedback = [e.payload for e in remote_events(site, SLUG) if e.type == "feedback.received"]
    assert [(f.number, f.author) for f in feedback] == [(proposal_number(iid), "maintainer")]
    assert "Greet in French too" in feedback[0].text
    rounds = [e.payload.round for e in remote_events(site, SLUG) if e.type == "implement.started"]
    assert rounds[-1] == 2


def test_a_bot_account_with_developer_access_is_refused_unless_listed(
    site: Site, api: GitLabAPI
) -> None:
    site.configure(
        [{"phase": "implement", "round": 1, "attempt": 1, "verb": "escalate", "text": "Which?"}],
        VERIFY,
    )
    bot = "project_7_bot_0f1e2d3c4b5a"  # a project access token's user
    api.add_user(bot, bot=True)
    api.add_member(bot, DEVELOPER)
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    must(pipeline(site, api, issue_event(issue, "maintainer")).run())
    api.add_note("issues", issue, bot, "/agentrun answer say hello")

    job = pipeline(site, api, note_event(issue, bot, "…"))
    must(job.run())

    assert job.outputs()["state"] == "parked"
    (refusal,) = [n for n in notes(api, "issues", issue) if n.startswith(f"@{bot}")]
    assert "is a bot" in refusal and "allow_bots" in refusal


def test_two_pipelines_at_once_for_one_issue_run_one_build(site: Site, api: GitLabAPI) -> None:
    site.configure([{"phase": "implement", "sleep": 4.0, "write": {"greeting.txt": "hi\n"}}])
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    jobs = [pipeline(site, api, issue_event(issue, "maintainer")) for _ in range(2)]

    procs = [job.popen() for job in jobs]
    outs = [proc.communicate(timeout=90)[0] for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0], outs
    assert remote_slugs(site) == [SLUG]
    assert remote_types(site, SLUG).count("runner.attached") == 1
    held = [out for out in outs if "not run here: " in out]
    assert len(held) == 1 and "(held by r-" in held[0], outs  # the holder, named
    assert remote_types(site, SLUG)[-1] == "build.completed"


def test_a_pipeline_killed_mid_phase_is_resumed_by_the_scheduled_sweep(
    site: Site, api: GitLabAPI
) -> None:
    table, state = command_agent(site.root, implement="hang")
    # The agent keeps its pids in the test's temporary folder, which isolation hides.
    site.configure([], table + '\n[isolation]\nmode = "none"\n', SCRIPTED_BUT_IMPLEMENT)
    issue = api.add_issue("Fix the greeting", "", "maintainer", ("agentrun",))
    ttl = {"AGENTRUN_LEASE_TTL": "2"}
    proc = pipeline(site, api, issue_event(issue, "maintainer"), extra_env=ttl).popen()
    kill_when_hung(proc, state)
    assert "build.completed" not in remote_types(site, SLUG)
    time.sleep(2.5)  # the dead pipeline's lease on the remote expires

    out = must(pipeline(site, api, None, source="schedule", extra_env=ttl).run())

    assert f"{SLUG}: resumed" in out
    types = remote_types(site, SLUG)
    assert types[-1] == "build.completed"
    assert types.count("runner.attached") == 2


@pytest.mark.parametrize("how", ["webhook", "sweep"])
def test_a_merged_merge_request_archives_its_build(site: Site, api: GitLabAPI, how: str) -> None:
    site.configure([], VERIFY)
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    first = pipeline(site, api, issue_event(issue, "maintainer"))
    must(first.run())
    assert first.outputs()["state"] == "complete"
    assert api.issues[issue]["labels"] == ["agentrun", "agentrun:done"]  # the state label
    [mr] = api.mrs.values()
    iid = int(mr["iid"])

    # A payload claiming a merge that GitLab does not know of archives nothing.
    lie = pipeline(site, api, merge_request_event(iid, BRANCH, "merge", "maintainer"))
    assert f"merge request !{iid} is still open" in must(lie.run())
    assert remote_slugs(site) == [SLUG]

    mr["state"] = "merged"
    if how == "webhook":
        job = pipeline(site, api, merge_request_event(iid, BRANCH, "merge", "maintainer"))
    else:
        job = pipeline(site, api, None, source="schedule")
    said = must(job.run())

    assert f"merge request !{iid} was merged; the build is archived" in said
    assert remote_slugs(site) == []  # archived: no longer an open build
    assert job.outputs()["state"] == "merged"


def test_a_payload_naming_an_issue_without_the_label_starts_nothing(
    site: Site, api: GitLabAPI
) -> None:
    site.configure([], VERIFY)
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("bug",))
    job = pipeline(site, api, issue_event(issue, "maintainer", "open"))
    done = job.run()
    assert "does not carry the trigger label 'agentrun'" in must(done)
    assert remote_slugs(site) == []


def test_a_scheduled_pipeline_starts_a_labeled_issue_the_webhook_missed(
    site: Site, api: GitLabAPI
) -> None:
    site.configure([], VERIFY)
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    job = pipeline(site, api, None, source="schedule")
    said = must(job.run())
    assert f"build {SLUG} created for issue #{issue}" in said
    assert remote_slugs(site) == [SLUG]
    assert job.outputs()["state"] == "complete"
    again = must(pipeline(site, api, None, source="schedule").run())
    assert "created" not in again and remote_slugs(site) == [SLUG]  # one build per issue


@pytest.mark.parametrize(
    ("payload", "source", "said"),
    [
        ("[1, 2]", "trigger", "is not a JSON object"),
        ("{not json", "trigger", "cannot read the webhook payload"),
        (None, "chat", "TRIGGER_PAYLOAD is not set for a chat pipeline"),
        (None, "push", "the push payload names no ref that was pushed"),  # no CI_COMMIT_*
        (
            json.dumps({"object_kind": "note", "object_attributes": {"noteable_type": "Issue"}}),
            "trigger",
            "names no issue or merge request iid",
        ),
    ],
)
def test_a_bad_payload_is_one_line_and_exit_1(
    site: Site, api: GitLabAPI, payload: str | None, source: str, said: str
) -> None:
    site.configure([], VERIFY)
    job = pipeline(site, api, None, source)
    env = job.env()
    if payload is not None:
        path = job.checkout.parent / "payload.json"
        path.write_text(payload)
        env["TRIGGER_PAYLOAD"] = str(path)
    import subprocess

    done = subprocess.run(
        ["git", "agentrun", "action", "--forge", "gitlab"],
        cwd=job.checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert remote_slugs(site) == []


def test_a_plan_waits_on_the_issue_until_a_developer_approves_it(
    site: Site, api: GitLabAPI
) -> None:
    site.configure(PLAN_STEPS, PLAN_GATE)
    issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
    first = pipeline(site, api, issue_event(issue, "maintainer"))
    must(first.run("--forge", "gitlab"))
    assert first.outputs()["state"] == "parked"
    plan_question(notes(api, "issues", issue))
    assert not api.mrs

    # A Reporter's approval, whose payload claims a Developer wrote it, is refused.
    note = api.add_note("issues", issue, "reporter", "/agentrun approve")
    forged = pipeline(site, api, note_event(issue, "maintainer", note["body"]))
    must(forged.run())
    assert forged.outputs()["state"] == "parked"
    assert approvals(site, SLUG) == []
    refusal = [n for n in notes(api, "issues", issue) if n.startswith("@reporter")]
    assert refusal and "permission" in refusal[0], notes(api, "issues", issue)

    api.add_note("issues", issue, "maintainer", "/agentrun approve")
    second = pipeline(site, api, note_event(issue, "maintainer", "…"))
    must(second.run())

    assert approvals(site, SLUG) == [("maintainer", "maintainer")]
    assert second.outputs()["state"] == "complete", second.output.read_text()
    [mr] = api.mrs.values()
    assert mr["source_branch"] == BRANCH
    accepted = api.find("POST", f"/api/v4/projects/.+/issues/{issue}/notes/.+/award_emoji")
    assert [r.body["name"] for r in accepted] == ["thumbsup"]
