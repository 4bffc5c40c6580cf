"""Pause, resume and abort from another process while a runner works (or none does)."""

from __future__ import annotations

import time
from pathlib import Path

import pygit2
from runner.helpers import (
    SCRIPT,
    background,
    configure,
    only_slug,
    payloads,
    run_cli,
    script_toml,
    session_started,
    tip,
    types,
    wait_for_event,
)

from agentrun.commands.build import create_build, run_build
from agentrun.store.lease import read_lease

GOAL = "Add the app module"
APP = {"src/app.py": "VALUE = 1\n"}


def test_pause_is_acknowledged_after_the_session_then_resume_completes(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [{"phase": "implement", "sleep": 3, "write": APP}])
    with background(repo_path, "run", GOAL) as runner:
        slug = only_slug(repo_path)
        wait_for_event(repo_path, slug, session_started("implement"), "implement to start")

        paused = run_cli(repo_path, "pause", slug)
        assert (paused.returncode, paused.stderr) == (0, "")
        assert paused.stdout == (
            f"pause requested; the runner of {slug} will act on it at its next safe step\n"
        )
        code, out = runner.wait()

    assert code == 5, out  # paused
    lines = out.splitlines()
    assert lines[-2:] == [
        f"build {slug}: paused at code-review@1",
        f"resume with: git agentrun resume {slug}",
    ]
    kinds = types(repo, slug)
    # The running session was not cut short: it finished, then the runner paused.
    assert kinds[-5:] == [
        "build.pause-requested",
        "agent.done",
        "session.ended",
        "implement.completed",
        "build.paused",
    ]
    assert payloads(repo, slug, "session.ended")[-1].outcome == "ok"
    assert read_lease(repo, slug) is None

    resumed = run_cli(repo_path, "resume", slug)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[-2:] == [
        f"build {slug}: complete at done",
        "proposal #1 (ready for review): git agentrun pulls show 1",
    ]
    kinds = types(repo, slug)
    paused_at = kinds.index("build.paused")
    assert kinds[paused_at + 1 : paused_at + 4] == [
        "build.resume-requested",
        "runner.attached",
        "build.resumed",
    ]
    assert kinds.count("build.completed") == 1
    assert kinds[-1] == "build.completed"


def test_abort_cancels_the_running_session_promptly(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [{"phase": "implement", "sleep": 30, "write": APP}])
    with background(repo_path, "run", GOAL) as runner:
        slug = only_slug(repo_path)
        started = wait_for_event(repo_path, slug, session_started("implement"), "implement")
        asked = time.monotonic()

        aborted = run_cli(repo_path, "abort", slug)
        assert (aborted.returncode, aborted.stderr) == (0, "")
        assert aborted.stdout == (
            f"abort requested; the runner of {slug} will act on it at its next safe step\n"
        )
        code, out = runner.wait(timeout=20)
        took = time.monotonic() - asked

    assert took < 10, f"the runner took {took:.1f}s to stop"
    assert code == 6, out  # aborted
    assert out.splitlines()[-1] == f"build {slug}: aborted at implement@1"
    kinds = types(repo, slug)
    assert kinds[-3:] == ["build.abort-requested", "session.ended", "build.aborted"]
    ended = payloads(repo, slug, "session.ended")[-1]
    assert (ended.session, ended.outcome) == (started.payload.session, "aborted")
    assert "implement.completed" not in kinds
    assert read_lease(repo, slug) is None

    status = run_cli(repo_path, "status")
    assert status.stdout.splitlines()[1].split()[:2] == [slug, "aborted"]


def test_pause_and_abort_without_a_runner_are_acknowledged_at_once(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path)
    slug = create_build(repo, GOAL).slug

    paused = run_cli(repo_path, "pause", slug)
    assert (paused.returncode, paused.stdout, paused.stderr) == (0, f"build {slug} is paused\n", "")
    assert types(repo, slug) == ["build.created", "build.pause-requested", "build.paused"]

    again = run_cli(repo_path, "pause", slug)
    assert (again.returncode, again.stdout) == (0, f"build {slug} is paused\n")
    assert len(types(repo, slug)) == 3

    aborted = run_cli(repo_path, "abort", slug)
    assert (aborted.returncode, aborted.stdout) == (0, f"build {slug} is aborted\n")
    assert types(repo, slug)[-2:] == ["build.abort-requested", "build.aborted"]

    late = run_cli(repo_path, "pause", slug)
    assert late.returncode == 1
    assert late.stderr == f"agentrun: build {slug} is aborted; there is nothing to pause\n"


def test_abort_of_a_parked_build_without_a_runner(repo_path: Path, repo: pygit2.Repository) -> None:
    configure(repo_path, [{"phase": "implement", "verb": "escalate", "text": "Why?"}])
    slug = create_build(repo, GOAL).slug
    assert run_build(repo, slug).state.state_name == "parked"

    aborted = run_cli(repo_path, "abort", slug)
    assert (aborted.returncode, aborted.stdout) == (0, f"build {slug} is aborted\n")
    assert types(repo, slug)[-2:] == ["build.abort-requested", "build.aborted"]


def test_resume_of_a_complete_build_is_a_no_op(repo_path: Path, repo: pygit2.Repository) -> None:
    configure(repo_path)
    slug = create_build(repo, GOAL).slug
    assert run_build(repo, slug).state.state_name == "complete"
    before = tip(repo, slug)

    resumed = run_cli(repo_path, "resume", slug)

    assert (resumed.returncode, resumed.stderr) == (0, "")
    assert resumed.stdout == f"build {slug} is complete; nothing to resume\n"
    assert tip(repo, slug) == before


def test_retry_rearms_a_phase_out_of_attempts_and_resume_completes(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(
        repo_path,
        [
            {"phase": "implement", "round": 1, "attempt": 1, "fail": "overloaded"},
            {"phase": "implement", "round": 1, "attempt": 2, "fail": "overloaded"},
        ],
        extra="[policy]\nmax_phase_attempts = 2\n",
    )
    slug = create_build(repo, GOAL).slug
    assert run_build(repo, slug).state.state_name == "parked"

    retried = run_cli(repo_path, "retry", slug)

    assert (retried.returncode, retried.stderr) == (0, "")
    assert retried.stdout == (
        f"retry recorded; run `git agentrun resume {slug}` to continue the build\n"
    )
    assert types(repo, slug)[-1] == "build.retry-requested"
    # Whatever overloaded the model has passed: implement now makes its change.
    (repo_path / SCRIPT).write_text(script_toml([{"phase": "implement", "write": {"x.txt": "x"}}]))
    resumed = run_cli(repo_path, "resume", slug)
    assert resumed.returncode == 0, resumed.stderr
    assert "complete" in resumed.stdout
    starts = payloads(repo, slug, "implement.started")
    assert len(starts) == 3


def test_retry_of_a_complete_build_is_refused_and_changes_nothing(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path)
    slug = create_build(repo, GOAL).slug
    assert run_build(repo, slug).state.state_name == "complete"
    before = tip(repo, slug)

    retried = run_cli(repo_path, "retry", slug)

    assert retried.returncode == 1
    assert retried.stderr.strip().endswith(f"build {slug} is complete; there is nothing to retry")
    assert tip(repo, slug) == before
