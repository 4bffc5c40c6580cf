"""The forge's CI as a gate, through `git agentrun action` with GitHub's own webhook
payloads (``workflow_run``, ``check_suite``, ``status``) against Prism: a build waits for
its required checks, goes on when they pass, takes a failure as its next round's
feedback, and asks when a check never appears."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from github_flow import (
    API_REPO,
    Site,
    example,
    labeled,
    must,
    posted_comments,
    remote_events,
    remote_types,
)
from runner.helpers import SCRIPTED_BUT_IMPLEMENT, cli_env, command_agent, configure, git, run_cli
from support.prism import GitHubAPI

SLUG = "issue-7-fix-the-greeting"
PR = 1347  # the number of GitHub's example pull request, which Prism answers
BRANCH = f"agentrun/{SLUG}"
VERIFY = '[[verify]]\nname = "tests"\ncommand = "true"\n'
CHECK_RUNS = f"{API_REPO}/commits/[0-9a-f]{{40}}/check-runs"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # shaped like a personal token
LOG = (
    "2026-12-01T10:00:00.0000000Z ##[group]Run pytest -q\n"
    f"2026-12-01T10:00:01.0000000Z token={SECRET}\n"
    "2026-12-01T10:00:01.2000000Z FAILED tests/test_login.py::test_redirect - assert 302\n"
    "2026-12-01T10:00:01.5000000Z ##[error]Process completed with exit code 1.\n"
)
ACTIONS = {"slug": "github-actions", "id": 15368, "name": "GitHub Actions"}


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    return Site(tmp_path, github_api)


def gated(site: Site, tmp_path: Path, minutes: float = 60) -> Path:
    """Main's config: the gate on test and lint; implement is a command agent that keeps
    its prompts (in the folder returned)."""
    table, state = command_agent(tmp_path)
    # The agent keeps its prompts in the test's temporary folder, which isolation hides.
    table += '\n[isolation]\nmode = "none"\n'
    gate = f'[forge]\nrequire_checks = ["test", "lint"]\nchecks_timeout_minutes = {minutes}\n'
    site.configure([], VERIFY + gate + table, base=SCRIPTED_BUT_IMPLEMENT)
    return state


def run(name: str, status: str = "completed", conclusion: str | None = "success", **more: Any):
    return {"name": name, "status": status, "conclusion": conclusion, **more}


def check_runs(api: GitHubAPI, *answers: list[dict[str, Any]]) -> list[int]:
    """The check runs on any commit: ``answers`` in turn, one per look (the last stays).
    The count of looks is returned (a list, filled in as they come)."""
    looks: list[int] = []

    def answer(ex: dict[str, Any]) -> dict[str, Any]:
        items = answers[min(len(looks), len(answers) - 1)]
        looks.append(1)
        listed = [{**ex["check_runs"][0], "id": 100 + n, **i} for n, i in enumerate(items)]
        return {"total_count": len(listed), "check_runs": listed}

    api.respond("GET", CHECK_RUNS, answer)
    return looks


def head(site: Site) -> str:
    return str(site.remote_repo().references[f"refs/heads/{BRANCH}"].target)


def workflow_run(sha: str, branch: str = BRANCH) -> dict[str, Any]:
    payload = example("workflow_run", "completed")
    payload["workflow_run"].update(
        head_sha=sha, head_branch=branch, status="completed", conclusion="success", name="CI"
    )
    return payload


def test_a_build_waits_for_ci_and_green_checks_mark_it_ready(site: Site, tmp_path: Path) -> None:
    gated(site, tmp_path)
    check_runs(site.api, [run("test", "in_progress", None)])
    first = site.job(
        "issues",
        labeled(7, "Fix the greeting", "Say hello.", "maintainer"),
        extra_env={"AGENTRUN_DEFAULT_TOKEN": "true"},  # action.yml: github-token is github.token
    )
    done = first.run()
    must(done)
    assert first.outputs()["state"] == "waiting"
    assert "start no workflows" in done.stdout  # the workflow's token: the CI never runs
    assert f"build {SLUG} is waiting" in done.stdout
    assert not site.api.readied
    sha = head(site)
    (seen,) = [e.payload for e in remote_events(site, SLUG) if e.type == "checks.seen"]
    assert seen.sha == sha
    assert [(c.name, c.state) for c in seen.checks] == [("test", "pending")]

    # A sweep (here `git agentrun sweep`, as anywhere) looks again: nothing changed, so
    # nothing is recorded, and it exits 4 saying what the build waits for.
    events_before = len(remote_types(site, SLUG))
    checkout = site.clone()
    swept = _agentrun(checkout, site, "sweep", "--remote", "origin")
    assert swept.returncode == 4, swept.stdout + swept.stderr
    assert f"{SLUG}: resumed (it waits for CI on {sha[:10]}: test (pending), lint" in swept.stdout
    assert "; waiting" in swept.stdout
    assert remote_types(site, SLUG)[events_before:] == []  # not even runner.attached
    status = run_cli(checkout, "status", "--json")
    (row,) = json.loads(status.stdout)["builds"]
    assert row["state"] == "waiting"
    assert status.returncode == 0
    # `resume` in the Action (its build input) with the workflow's token: 4, and a warning.
    resumed = _agentrun(checkout, site, "resume", SLUG, "--remote", "origin", default_token=True)
    assert resumed.returncode == 4, resumed.stdout + resumed.stderr
    assert f"waiting for CI on {sha[:10]}: test (pending), lint (not there yet)" in resumed.stdout
    assert "agentrun: warning: pushes made with the workflow's own token" in resumed.stderr
    assert remote_types(site, SLUG)[events_before:] == []

    # The user's CI completes: the workflow_run trigger continues the build.
    site.api.clear()
    check_runs(site.api, [run("lint"), run("test"), run("deploy", "queued", None)])
    second = site.job("workflow_run", workflow_run(sha))
    must(second.run())
    assert second.outputs()["state"] == "complete"
    assert len(site.api.readied) == 1
    seen_again = [e.payload for e in remote_events(site, SLUG) if e.type == "checks.seen"]
    assert [(c.name, c.state) for c in seen_again[-1].checks] == [
        ("lint", "success"),
        ("test", "success"),
    ]
    site.api.assert_accepted()


def test_a_failing_check_is_the_next_rounds_feedback(site: Site, tmp_path: Path) -> None:
    state = gated(site, tmp_path)
    site.api.job_log = LOG
    failing = run(
        "test",
        conclusion="failure",
        app=ACTIONS,
        output={
            "title": "1 test failed",
            "summary": "tests/test_login.py::test_redirect",
            "text": None,
            "annotations_count": 0,
            "annotations_url": "https://example.com",
        },
    )
    looks = check_runs(site.api, [failing, run("lint")], [run("lint"), run("test")])
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(job.run())
    assert job.outputs()["state"] == "complete"
    assert len(looks) == 2  # round 1's head, then round 2's
    rounds = [e.payload.round for e in remote_events(site, SLUG) if e.type == "implement.started"]
    assert rounds == [1, 2]
    prompt = (state / "prompt-implement@2.txt").read_text()
    assert "CI check `test` failed (failure) on" in prompt
    assert "1 test failed\ntests/test_login.py::test_redirect" in prompt
    assert "FAILED tests/test_login.py::test_redirect - assert 302" in prompt
    assert "2026-12-01T10:00:01" not in prompt  # GitHub's line stamps are dropped
    assert SECRET not in prompt  # the log is scrubbed before it is kept
    assert "CI check" not in (state / "prompt-implement@1.txt").read_text()
    assert len(site.api.readied) == 1
    site.api.assert_accepted()


def test_a_check_that_never_appears_asks_after_the_timeout(site: Site, tmp_path: Path) -> None:
    gated(site, tmp_path, minutes=0.02)  # 1.2 s
    check_runs(site.api, [run("test")])
    first = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    must(first.run())
    assert first.outputs()["state"] == "waiting"
    time.sleep(1.5)

    # Another CI's status on the head: the build looks again, past lint's time.
    payload = example("status", None)
    payload.update(sha=head(site), context="ci/other", state="success")
    second = site.job("status", payload)
    must(second.run())
    assert second.outputs()["state"] == "parked"
    # Asked on the pull request (one exists), with the reply syntax.
    (question,) = [c for c in posted_comments(site.api, PR) if "did not appear" in c]
    assert "The required check(s) lint did not appear" in question
    assert "/agentrun answer" in question
    raised = [e.payload for e in remote_events(site, SLUG) if e.type == "escalation.raised"]
    assert raised[-1].cause == "checks-timeout"
    assert remote_types(site, SLUG).count("checks.seen") == 2
    site.api.assert_accepted()


def test_ci_events_of_other_branches_and_commits_do_nothing(site: Site) -> None:
    site.configure([], VERIFY + '[forge]\nrequire_checks = "all"\n')
    other = site.job("workflow_run", workflow_run("a" * 40, branch="main"))
    assert "not an agentrun build's branch" in must(other.run())
    suite = example("check_suite", "completed")
    suite["check_suite"].update(head_sha="b" * 40, head_branch=BRANCH)
    nothing = site.job("check_suite", suite)
    assert "no running build's head is bbbbbbbbbb; nothing to do" in must(nothing.run())
    own = example("status", None)
    own.update(context="agentrun/tests", state="success")
    assert "ignored: status agentrun/tests success" in must(site.job("status", own).run())
    assert not site.api.find("GET", CHECK_RUNS)


def test_the_local_forge_with_require_checks_is_a_config_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    configure(repo, [], VERIFY + '[forge]\nrequire_checks = ["test"]\n')
    done = run_cli(repo, "run", "Fix the greeting")
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "[forge] require_checks waits for a hosted forge's CI" in line
    assert "local" in line
    assert run_cli(repo, "status", "--json").stdout.count('"slug"') == 0


def _agentrun(checkout: Path, site: Site, *args: str, default_token: bool = False) -> Any:
    """``git agentrun ARGS`` in ``checkout`` with the forge's variables (and, with
    ``default_token``, what action.yml says when github-token is github.token)."""
    import subprocess

    extra = {"AGENTRUN_DEFAULT_TOKEN": "true"} if default_token else {}
    return subprocess.run(
        ["git", "agentrun", *args],
        cwd=checkout,
        env=cli_env({**site.api.env(), **extra}),
        capture_output=True,
        text=True,
        timeout=90,
    )
