"""``issue_comment.created``: commands from people with write permission steer the build."""

from __future__ import annotations

from pathlib import Path

import pytest
from github_flow import (
    API_REPO,
    PLAN_GATE,
    PLAN_STEPS,
    Site,
    approvals,
    commented,
    comments,
    git,
    labeled,
    must,
    permissions,
    plan_question,
    posted_comments,
    remote_events,
    remote_types,
    reviews,
)
from support.prism import GitHubAPI

SLUG = "issue-7-fix-the-greeting"
PR = 1347  # the number of GitHub's example pull request, which Prism answers
ESCALATE = [{"phase": "implement", "attempt": 1, "verb": "escalate", "text": "Which greeting?"}]


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    found = Site(tmp_path, github_api)
    found.configure(ESCALATE)
    return found


def parked(site: Site) -> None:
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(job.run())
    assert job.outputs()["state"] == "parked"
    site.api.clear()
    permissions(site.api, {"maintainer": "write", "reader": "read", "boss": "admin"})


def replies(site: Site) -> list[str]:
    """What the action itself said on issue 7 (the publisher's comments left out)."""
    return [c for c in posted_comments(site.api, 7) if c.endswith("<!-- agentrun -->")]


def reactions(site: Site) -> list[str]:
    return [r.path for r in site.api.find("POST", f"{API_REPO}/issues/comments/\\d+/reactions")]


def test_an_answer_from_a_writer_continues_and_a_readers_changes_nothing(site: Site) -> None:
    parked(site)
    comments(
        site.api,
        7,
        [
            (901, "reader", "/agentrun answer e1 say goodbye"),
            (902, "maintainer", "Thanks!\n/agentrun answer e1 say hello\nin English"),
        ],
    )
    # Only the newest comment's job ran (GitHub cancelled the queued one): both are read.
    job = site.job("issue_comment", commented(7, 902, "…", "maintainer"))

    out = must(job.run())

    answered = [e for e in remote_events(site, SLUG) if e.type == "escalation.answered"]
    assert [(a.payload.by, a.payload.answer) for a in answered] == [
        ("maintainer", "say hello\nin English")
    ]
    assert answered[0].actor.login == "maintainer"
    (refusal,) = replies(site)
    assert refusal.startswith(
        "@reader this command was not run: reader has read permission here; "
        "write or above is needed"
    )
    assert reactions(site) == [f"{API_REPO}/issues/comments/902/reactions"]
    cursor = [e.payload for e in remote_events(site, SLUG) if e.type == "forge.cursor"]
    assert cursor[-1].comment == 902
    assert job.outputs()["state"] == "complete"
    assert "comment 901 by reader refused" in out
    site.api.assert_accepted()


def test_a_readers_answer_alone_changes_nothing(site: Site) -> None:
    parked(site)
    before = remote_types(site, SLUG)
    comments(site.api, 7, [(901, "reader", "/agentrun answer e1 say goodbye")])

    job = site.job("issue_comment", commented(7, 901, "…", "reader"))
    must(job.run())

    after = remote_types(site, SLUG)
    assert after == [*before, "forge.cursor"]  # read, refused, remembered: nothing else
    assert job.outputs()["state"] == "parked"
    assert reactions(site) == []
    assert len(replies(site)) == 1
    site.api.assert_accepted()


def test_bots_are_refused_unless_listed(site: Site) -> None:
    parked(site)
    comments(site.api, 7, [(905, "renovate[bot]", "/agentrun abort")])

    must(site.job("issue_comment", commented(7, 905, "…", "renovate[bot]")).run())

    assert "build.abort-requested" not in remote_types(site, SLUG)
    (said,) = replies(site)
    assert "renovate[bot] is a bot, and bots are not listed in [forge] allow_bots" in said
    assert not site.api.find("GET", f"{API_REPO}/collaborators/.*/permission")


def test_controls_status_and_unknown_verbs(site: Site) -> None:
    parked(site)
    comments(
        site.api,
        7,
        [
            (910, "boss", "/agentrun pause"),
            (911, "boss", "/agentrun status\n/agentrun merge"),
        ],
    )
    job = site.job("issue_comment", commented(7, 911, "…", "boss"))
    must(job.run())

    types = remote_types(site, SLUG)
    assert "build.pause-requested" in types
    assert types.index("build.paused") > types.index("build.pause-requested")
    status, unknown = replies(site)
    assert status.startswith(f"@boss\n**agentrun** · build `{SLUG}` · **parked** at implement@1")
    assert unknown.startswith("@boss unknown command `merge`: use `/agentrun answer [ID] TEXT`")
    assert job.outputs()["state"] == "paused"

    comments(site.api, 7, [(912, "boss", "/agentrun resume"), (913, "boss", "/agentrun abort")])
    must(site.job("issue_comment", commented(7, 913, "…", "boss")).run())
    assert remote_types(site, SLUG)[-1] == "build.aborted"
    assert remote_events(site, SLUG)[-1].payload is not None

    comments(site.api, 7, [(914, "boss", "/agentrun pause")])
    must(site.job("issue_comment", commented(7, 914, "…", "boss")).run())
    assert replies(site)[-1].startswith(f"@boss build {SLUG} is aborted; there is nothing to pause")


def test_agentruns_own_comments_are_never_read_as_commands(site: Site) -> None:
    parked(site)
    own = "<!-- agentrun:status -->\n/agentrun abort"
    comments(site.api, 7, [(920, "github-actions[bot]", own), (921, "somebody", own)])

    must(site.job("issue_comment", commented(7, 921, "…", "somebody")).run())

    assert "build.abort-requested" not in remote_types(site, SLUG)
    assert replies(site) == []


def test_a_comment_on_an_issue_without_a_build(site: Site) -> None:
    out = must(site.job("issue_comment", commented(8, 930, "/agentrun status", "boss")).run())
    assert "no agentrun build belongs to #8; nothing to do" in out


def test_a_command_on_the_builds_pull_request_and_a_readers_review(
    tmp_path: Path, github_api: GitHubAPI
) -> None:
    github_api.clear()
    site = Site(tmp_path, github_api)
    site.configure([])
    must(site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer")).run())
    site.api.clear()
    permissions(site.api, {"maintainer": "write", "reader": "read"})
    comments(site.api, PR, [(940, "maintainer", "/agentrun retry")])
    reviews(site.api, PR, [(6001, "reader", "CHANGES_REQUESTED", "Rewrite it all")])

    job = site.job("issue_comment", commented(PR, 940, "…", "maintainer", on_pull=True))
    must(job.run())

    said = [r.body["body"] for r in site.api.find("POST", f"{API_REPO}/issues/{PR}/comments")]
    assert said[0].startswith(f"@maintainer build {SLUG} is complete; there is nothing to retry")
    assert said[1].startswith("@reader your review was not taken: reader has read permission here")
    events = remote_events(site, SLUG)
    assert "feedback.received" not in [e.type for e in events]
    cursor = [e.payload for e in events if e.type == "forge.cursor"][-1]
    assert (cursor.comment, cursor.review) == (940, 6001)
    assert job.outputs()["state"] == "complete"
    site.api.assert_accepted()


def test_the_scheduled_sweep_reads_answers_that_no_job_processed(site: Site) -> None:
    # Two parked builds; the job of the answer on #7 never ran (GitHub cancelled it).
    parked(site)
    must(site.job("issues", labeled(8, "Fix the farewell", "Say bye.", "maintainer")).run())
    site.api.clear()
    permissions(site.api, {"maintainer": "write"})
    comments(site.api, 7, [(950, "maintainer", "/agentrun answer say hello")])
    comments(site.api, 8, [])

    out = must(site.job("schedule", None).run())

    assert "comment 950 by maintainer: answered e1" in out
    assert f"{SLUG}: resumed" in out
    assert remote_types(site, SLUG)[-1] == "build.completed"
    other = "issue-8-fix-the-farewell"
    assert f"{other}: skipped (parked on question e1)" in out
    assert "escalation.answered" not in remote_types(site, other)
    assert reactions(site) == [f"{API_REPO}/issues/comments/950/reactions"]
    site.api.assert_accepted()


def test_a_bot_known_from_the_payload_is_refused_and_a_listed_bot_accepted(
    tmp_path: Path, github_api: GitHubAPI
) -> None:
    github_api.clear()
    site = Site(tmp_path, github_api)
    site.configure(ESCALATE, '[forge]\nallow_bots = ["helper[bot]"]\n')
    parked(site)
    payload = commented(7, 961, "…", "mybot")
    payload["comment"]["user"]["type"] = "Bot"  # a bot whose login does not say so
    comments(
        site.api, 7, [(960, "helper[bot]", "/agentrun pause"), (961, "mybot", "/agentrun abort")]
    )

    must(site.job("issue_comment", payload).run())

    types = remote_types(site, SLUG)
    assert "build.pause-requested" in types
    assert "build.abort-requested" not in types
    (said,) = replies(site)
    assert said.startswith("@mybot this command was not run: mybot is a bot")
    assert reactions(site) == [f"{API_REPO}/issues/comments/960/reactions"]


def test_agentrun_reconcile_merges_the_moved_base_and_marks_ready_again(
    tmp_path: Path, github_api: GitHubAPI
) -> None:
    github_api.clear()
    site = Site(tmp_path, github_api)
    site.configure(
        [{"phase": "implement", "write": {"greeting.txt": "hello\n"}}],
        extra='\n[[verify]]\nname = "greeting"\ncommand = "test -f greeting.txt"\n',
    )
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(job.run())
    assert job.outputs()["state"] == "complete"
    # Someone merges other work into main on the origin meanwhile.
    (site.seed / "NOTES.md").write_text("notes\n")
    git(site.seed, "add", "NOTES.md")
    git(site.seed, "commit", "-q", "-m", "notes on main")
    git(site.seed, "push", "-q", "origin", "HEAD:main")
    main = git(site.seed, "rev-parse", "HEAD")
    site.api.clear()
    permissions(site.api, {"maintainer": "write"})
    comments(site.api, PR, [(950, "maintainer", "/agentrun reconcile")])

    job = site.job("issue_comment", commented(PR, 950, "…", "maintainer", on_pull=True))
    must(job.run())

    kinds = remote_types(site, SLUG)
    after = kinds[kinds.index("build.reconcile-requested") :]
    assert after.index("reconcile.completed") < after.index("verify.completed")
    assert after.index("verify.completed") < after.index("proposal.ready")
    requested = [e.payload for e in remote_events(site, SLUG) if e.type.startswith("build.rec")]
    assert requested[0].base_sha == main
    assert site.api.drafted and site.api.readied  # back to draft, then ready again
    assert job.outputs()["state"] == "complete"
    site.api.assert_accepted()


def test_a_plan_waits_on_the_issue_until_a_writer_approves_it(site: Site) -> None:
    site.configure(PLAN_STEPS, PLAN_GATE)
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(job.run())
    assert job.outputs()["state"] == "parked"
    question = plan_question(posted_comments(site.api, 7))
    assert question.startswith(f"<!-- agentrun:question {SLUG} e1 -->\n**Question e1**")
    assert "implement.started" not in remote_types(site, SLUG)
    site.api.assert_accepted()
    site.api.clear()
    permissions(site.api, {"maintainer": "write", "reader": "read"})

    comments(site.api, 7, [(901, "reader", "/agentrun approve")])
    refused = site.job("issue_comment", commented(7, 901, "…", "reader"))
    must(refused.run())
    assert refused.outputs()["state"] == "parked"
    assert approvals(site, SLUG) == []
    (reply,) = replies(site)
    assert reply.startswith("@reader this command was not run: reader has read permission")

    comments(site.api, 7, [(902, "maintainer", "Looks right.\n/agentrun approve")])
    approved = site.job("issue_comment", commented(7, 902, "…", "maintainer"))
    out = must(approved.run())

    assert approvals(site, SLUG) == [("maintainer", "maintainer")]
    assert approved.outputs()["state"] == "complete", out
    assert "comment 902 by maintainer: plan approved (e1)" in out
    assert reactions(site) == [f"{API_REPO}/issues/comments/902/reactions"]
    types = remote_types(site, SLUG)
    assert types.index("plan.approved") < types.index("implement.started")
    site.api.assert_accepted()
