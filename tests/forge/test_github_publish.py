"""Whole builds published to GitHub: a scripted agent, a bare origin, Prism for the API.

The build is started from issue #42 (as the Action starts it) and runs in-process with
``[forge] kind = "github"``. Prism answers every pull request as #1347 and every comment
as id 1, so the assertions are on what agentrun sent, and that GitHub's description (and
GraphQL schema) accepted all of it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pygit2
import pytest
from runner.helpers import configure, git, payloads, types
from support.prism import GitHubAPI, Recorded

from agentrun.commands.build import create_build, resume_build, run_build
from agentrun.commands.control import answer
from agentrun.config import load_config
from agentrun.events import BuildCreated, HumanActor
from agentrun.kernel.draft import Draft
from agentrun.runner.loop import Outcome
from agentrun.store.log import EventLog

REPO = "/repos/octocat/Hello-World"
ISSUE, PR = 42, 1347
SLUG = "issue-42-add-the-app-module"
LOGIN = "hubot"
LEAKED = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" * 2  # a token an agent printed
GOAL = f"Add the app module\n\nThe config says token={LEAKED}; do not keep it."
PLAN = "1. Add src/app.py.\n2. Check that it exists.\n"
APP = {"src/app.py": "VALUE = 1\n"}
VERIFY = """
[forge]
kind = "github"

[[verify]]
name = "exists"
command = "test -f src/app.py"

[[verify]]
name = "docs"
command = "false"
paths = ["docs/**"]
"""
LABELS = {"agentrun:running", "agentrun:parked", "agentrun:done", "agentrun:failed"}


@pytest.fixture
def api(github_env: GitHubAPI) -> GitHubAPI:
    return github_env


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    path = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(path))
    return path


def project(repo_path: Path, origin: Path, steps: list[dict[str, Any]]) -> pygit2.Repository:
    configure(repo_path, steps, extra=VERIFY)
    git(repo_path, "remote", "add", "origin", f"file://{origin}")
    git(repo_path, "push", "-q", "origin", "main")
    return pygit2.Repository(str(repo_path))


def start_from_issue(repo: pygit2.Repository) -> str:
    """What the Action does for a labeled issue: a build that names the issue and who asked."""
    config = load_config(Path(repo.workdir))
    created = BuildCreated(
        goal=GOAL,
        base_ref="main",
        base_sha=str(repo.head.target),
        branch=f"agentrun/{SLUG}",
        source="issue",
        issue=f"octocat/Hello-World#{ISSUE}",
        requested_by=LOGIN,
        config=config.model_dump(mode="json"),
    )
    EventLog(repo).append(SLUG, [Draft(created, HumanActor(login=LOGIN))], None)
    return SLUG


def sent(api: GitHubAPI, method: str, path: str) -> list[Any]:
    return [r.body for r in api.find(method, REPO + path)]


def label_changes(api: GitHubAPI, number: int) -> list[tuple[str, str]]:
    """("+", label) and ("-", label), in the order they were sent."""
    changes = []
    for r in api.requests:
        if r.method == "POST" and r.path == f"{REPO}/issues/{number}/labels":
            changes += [("+", name) for name in r.body["labels"]]
        if r.method == "DELETE" and r.path.startswith(f"{REPO}/issues/{number}/labels/"):
            changes.append(("-", r.path.rsplit("/", 1)[1].replace("%3A", ":")))
    return changes


def status_bodies(api: GitHubAPI) -> list[str]:
    """Every version of the status comment sent: the first POST on the issue, then PATCHes."""
    first = [
        r.body["body"]
        for r in api.find("POST", f"{REPO}/issues/{ISSUE}/comments")
        if r.body["body"].startswith(f"<!-- agentrun:status {SLUG} -->")
    ]
    return first + [r.body["body"] for r in api.find("PATCH", f"{REPO}/issues/comments/1")]


def not_leaked(requests: list[Recorded]) -> None:
    for r in requests:
        assert LEAKED not in str(r.body), f"{r} carried the token"


# --- the whole flow ---------------------------------------------------------------------


def test_a_green_build_is_published_on_github(
    repo_path: Path, origin: Path, api: GitHubAPI
) -> None:
    repo = project(
        repo_path,
        origin,
        [
            {"phase": "plan", "verb": "plan", "text": PLAN},
            {"phase": "implement", "round": 1, "write": APP, "text": "add the app"},
        ],
    )
    slug = start_from_issue(repo)
    outcome = run_build(repo, slug)

    assert outcome.state.state_name == "complete"
    head = outcome.state.head
    assert git(origin, "rev-parse", f"refs/heads/agentrun/{slug}") == head

    # The draft pull request: title from the goal, body with plan, checks and `Closes`.
    [opened] = sent(api, "POST", "/pulls")
    assert opened["draft"] is True
    assert (opened["title"], opened["head"], opened["base"]) == (
        "Add the app module",
        f"agentrun/{slug}",
        "main",
    )
    assert "### Plan\n\n1. Add src/app.py.\n2. Check that it exists." in opened["body"]
    assert f"Closes #{ISSUE}" in opened["body"]
    final_body = sent(api, "PATCH", f"/pulls/{PR}")[-1]["body"]
    assert "| exists | passed |" in final_body and "| docs | skipped |" in final_body

    # One status comment on the issue, posted once and then edited in place.
    bodies = status_bodies(api)
    assert len(sent(api, "POST", f"/issues/{ISSUE}/comments")) == 1
    assert len(bodies) >= 3
    assert all(b.startswith(f"<!-- agentrun:status {slug} -->\n") for b in bodies)
    assert all(a != b for a, b in itertools.pairwise(bodies))  # no resends
    assert "- [ ] plan ← now (round 1)" in bodies[0]  # from the first phase on
    assert "pull request" not in bodies[0]
    assert "**complete**" in bodies[-1]
    assert "- [x] ready for review" in bodies[-1]
    assert f"pull request: https://github.com/octocat/Hello-World/pull/{PR}" in bodies[-1]
    assert "[redacted]" in "".join(bodies) + opened["body"]
    not_leaked(api.requests)

    # A commit status per verify step on the head the build ends with, before it is
    # marked ready; the skipped one succeeds, saying so.
    assert len(api.find("POST", f"{REPO}/statuses/.*")) == 2
    statuses = {s["context"]: s for s in sent(api, "POST", f"/statuses/{head}")}
    assert set(statuses) == {"agentrun/exists", "agentrun/docs"}
    assert statuses["agentrun/exists"]["state"] == "success"
    assert statuses["agentrun/docs"]["state"] == "success"
    assert statuses["agentrun/docs"]["description"].startswith("skipped")

    # Labels follow the state on the issue and on the pull request; only the issue's
    # labels had to be read (the pull request is new).
    assert [r.path for r in api.find("GET", f"{REPO}/issues/[0-9]+")] == [f"{REPO}/issues/{ISSUE}"]
    assert label_changes(api, ISSUE) == [
        ("+", "agentrun:running"),
        ("+", "agentrun:done"),
        ("-", "agentrun:running"),
    ]
    assert label_changes(api, PR)[-2:] == [("+", "agentrun:done"), ("-", "agentrun:running")]

    # Ready for review through GraphQL, then a review from whoever asked for the build.
    [mutation] = api.graphql()
    assert "markPullRequestReadyForReview" in mutation.body["query"]
    assert api.readied == ["MDExOlB1bGxSZXF1ZXN0MQ=="]
    assert sent(api, "POST", f"/pulls/{PR}/requested_reviewers") == [{"reviewers": [LOGIN]}]
    ready_at = api.requests.index(mutation)
    assert all(api.requests.index(r) < ready_at for r in api.find("POST", f"{REPO}/statuses/.*"))
    review_at = api.requests.index(api.find("POST", f"{REPO}/pulls/{PR}/requested_reviewers")[0])
    assert ready_at < review_at

    api.assert_accepted()
    assert "observation.recorded" not in types(repo, slug)


def test_a_question_is_asked_once_where_people_are(
    repo_path: Path, origin: Path, api: GitHubAPI
) -> None:
    repo = project(
        repo_path,
        origin,
        [
            {"phase": "implement", "round": 1, "write": APP},
            {"phase": "code-review", "attempt": 1, "verb": "escalate", "text": "Keep VALUE?"},
        ],
    )
    slug = start_from_issue(repo)
    parked = run_build(repo, slug)
    assert parked.state.state_name == "parked"

    # The proposal exists, so the question goes there, with the exact reply syntax.
    [question] = sent(api, "POST", f"/issues/{PR}/comments")
    assert question["body"].startswith(f"<!-- agentrun:question {slug} e1 -->\n")
    assert "Keep VALUE?" in question["body"]
    assert "`/agentrun answer e1 <your answer>`" in question["body"]
    assert "Keep VALUE?" in status_bodies(api)[-1]
    assert label_changes(api, ISSUE)[-2:] == [("+", "agentrun:parked"), ("-", "agentrun:running")]
    assert label_changes(api, PR)[-2:] == [("+", "agentrun:parked"), ("-", "agentrun:running")]
    api.assert_accepted()

    answer(repo, slug, "Yes, keep it.", login=LOGIN)
    api.clear()
    resumed = resume_build(repo, slug)
    assert isinstance(resumed, Outcome) and resumed.state.state_name == "complete"
    assert sent(api, "POST", f"/issues/{PR}/comments") == []  # not asked again
    # A new job does not know the labels: it reads them once (Prism's issue has "bug").
    assert len(api.find("GET", f"{REPO}/issues/{ISSUE}")) == 1
    assert label_changes(api, ISSUE) == [
        ("+", "agentrun:running"),
        ("+", "agentrun:done"),
        ("-", "agentrun:running"),
    ]
    api.assert_accepted()


def test_a_failing_check_shows_at_once_and_the_fix_ends_green(
    repo_path: Path, origin: Path, api: GitHubAPI
) -> None:
    repo = project(
        repo_path,
        origin,
        [
            {"phase": "implement", "round": 1, "write": {"src/other.py": "X = 1\n"}},
            {"phase": "implement", "round": 2, "write": APP},
        ],
    )
    slug = start_from_issue(repo)
    outcome = run_build(repo, slug)
    assert outcome.state.state_name == "complete"

    posted = [(r.path.rsplit("/", 1)[1], r.body) for r in api.find("POST", f"{REPO}/statuses/.*")]
    failed = [(sha, body) for sha, body in posted if body["state"] == "failure"]
    assert len(failed) == 1 and failed[0][1]["context"] == "agentrun/exists"
    assert failed[0][0] != outcome.state.head  # on the head that failed, at once
    final = sorted(body["context"] for sha, body in posted if sha == outcome.state.head)
    assert final == ["agentrun/docs", "agentrun/exists"]
    assert len(posted) == 3
    why = [b for b in status_bodies(api) if "Round 2 works on:" in b]
    assert why and "- Verify step `exists` failed in round 1:" in why[0]
    api.assert_accepted()


def test_a_failed_build_is_pushed_anyway_and_says_so(
    repo_path: Path, origin: Path, api: GitHubAPI
) -> None:
    repo = project(repo_path, origin, [{"phase": "implement", "round": 1, "write": APP}])
    slug = start_from_issue(repo)
    api.answer_with("POST", f"{REPO}/pulls", 403)  # the token may not open pull requests

    outcome = run_build(repo, slug)

    assert outcome.state.state_name == "failed"
    head = outcome.state.head
    assert git(origin, "rev-parse", f"refs/heads/agentrun/{slug}") == head
    assert payloads(repo, slug, "publication.pushed")[-1].sha == head
    final = status_bodies(api)[-1]
    assert "**The build failed:**" in final and "403" in final
    assert f"Its work so far is pushed to `agentrun/{slug}` at `{head[:10]}`" in final
    assert label_changes(api, ISSUE)[-2:] == [("+", "agentrun:failed"), ("-", "agentrun:running")]
    assert api.graphql() == []


def test_a_forge_failure_while_syncing_does_not_stop_the_build(
    repo_path: Path, origin: Path, api: GitHubAPI
) -> None:
    repo = project(repo_path, origin, [{"phase": "implement", "round": 1, "write": APP}])
    slug = start_from_issue(repo)
    api.answer_with("POST", f"{REPO}/issues/{ISSUE}/labels", 410)  # issues off

    outcome = run_build(repo, slug)

    assert outcome.state.state_name == "complete"
    notes = [p.text for p in payloads(repo, slug, "observation.recorded")]
    assert len(notes) == 1  # recorded once, not once per phase
    assert notes[0].startswith(f"github: could not label #{ISSUE}: 410")
    assert api.graphql()  # publication went on: the PR was marked ready
    assert {label for _, label in label_changes(api, PR)} <= LABELS


def test_a_build_started_elsewhere_keeps_its_status_on_the_pull_request(
    repo_path: Path, origin: Path, api: GitHubAPI
) -> None:
    repo = project(repo_path, origin, [{"phase": "implement", "round": 1, "write": APP}])
    slug = create_build(repo, "Add the app module").slug

    assert run_build(repo, slug).state.state_name == "complete"

    [status] = sent(api, "POST", f"/issues/{PR}/comments")
    assert status["body"].startswith(f"<!-- agentrun:status {slug} -->\n")
    assert "Closes #" not in sent(api, "POST", "/pulls")[0]["body"]
    assert api.find("POST", f"{REPO}/issues/{ISSUE}/.*") == []
    assert label_changes(api, PR) == [
        ("+", "agentrun:running"),
        ("+", "agentrun:done"),
        ("-", "agentrun:running"),
    ]
    assert api.graphql() and sent(api, "POST", f"/pulls/{PR}/requested_reviewers") == []
    api.assert_accepted()
