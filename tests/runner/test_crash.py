"""A runner that dies (SIGKILL) or is interrupted (Ctrl-C) mid-phase, and the runner after it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from runner.helpers import (
    SCRIPTED_BUT_IMPLEMENT,
    agent_pids,
    background,
    branch_log,
    command_agent,
    configure,
    events,
    gone,
    kill_left_over,
    only_slug,
    payloads,
    run_cli,
    run_verb,
    session_started,
    tip,
    wait_for,
    wait_for_event,
)

from agentrun.store.lease import LeaseInfo, read_lease

GOAL = "Add the feature file"


@pytest.fixture
def agent_state(request: pytest.FixtureRequest, tmp_path: Path, repo_path: Path) -> Iterator[Path]:
    """A build whose implement role is a command agent that hangs in its first session.

    ``max_phase_attempts`` is the fixture's parameter (default 2). At teardown, whatever
    is left of the agent's tree is killed.
    """
    attempts = getattr(request, "param", 2)
    table, state = command_agent(tmp_path, implement="hang")
    configure(
        repo_path,
        base=SCRIPTED_BUT_IMPLEMENT,
        extra=f"{table}\n[policy]\nmax_phase_attempts = {attempts}\n",
    )
    yield state
    kill_left_over(state / "pids")


def live_lease(repo_path: Path, slug: str) -> LeaseInfo:
    found = read_lease(pygit2.Repository(str(repo_path)), slug)
    assert found is not None, "no lease while the runner works"
    return found[1]


def wait_for_hanging_agent(repo_path: Path, slug: str, state: Path) -> tuple[int, int, int]:
    """(runner pid, agent pid, the agent's sleep child) once implement@1 hangs."""
    wait_for_event(repo_path, slug, session_started("implement"), "implement to start")
    agent, child = agent_pids(state)
    wait_for(lambda: live_lease(repo_path, slug).agent_pgid == agent, "the agent in the lease")
    return live_lease(repo_path, slug).pid, agent, child


def assert_finished_once(repo: pygit2.Repository, repo_path: Path, slug: str) -> None:
    log = events(repo, slug)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert [e.type for e in log].count("build.completed") == 1
    assert log[-1].type == "build.completed"
    subjects = [subject for _, subject, _ in branch_log(repo_path, slug)]
    assert [s.split(":")[0] for s in subjects] == [
        "plan@1",
        "plan-review@1",
        "implement@1",
        "code-review@1",
    ]
    assert subjects[2] == "implement@1: added feature.txt"
    assert read_lease(repo, slug) is None


# A crash is not the phase's failure: the phase re-runs even with a single attempt allowed.
@pytest.mark.parametrize("agent_state", [2, 1], indirect=True, ids=["two-attempts", "one-attempt"])
def test_a_killed_runner_is_resumed_without_lost_or_duplicated_work(
    repo_path: Path, repo: pygit2.Repository, agent_state: Path
) -> None:
    with background(repo_path, "run", GOAL) as runner:
        slug = only_slug(repo_path)
        runner_pid, agent, child = wait_for_hanging_agent(repo_path, slug, agent_state)
        dead = next(
            e.payload.session
            for e in events(repo, slug)
            if e.type == "session.started" and e.payload.phase == "implement"
        )
        os.kill(runner_pid, signal.SIGKILL)
        code, _ = runner.wait()
        assert code != 0
    assert not gone(agent) and not gone(child)  # the dead runner's agent runs on

    resumed = run_cli(repo_path, "resume", slug, timeout=60)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.splitlines()[-2] == f"build {slug}: complete at done"
    wait_for(lambda: gone(agent) and gone(child), "the dead runner's agent tree to end", 10)
    ended = {p.session: p for p in payloads(repo, slug, "session.ended")}
    assert ended[dead].outcome == "abandoned"
    implements = [p for p in payloads(repo, slug, "session.started") if p.phase == "implement"]
    assert len(implements) == 2
    assert ended[implements[1].session].outcome == "ok"
    assert len(payloads(repo, slug, "runner.attached")) == 2
    assert_finished_once(repo, repo_path, slug)

    # The abandoned session's late verb is refused.
    before = tip(repo, slug)
    late = run_verb(repo_path, slug, "implement@1", dead, "done")
    assert late.returncode == 1
    assert f"session {dead} is not the open session of build {slug}" in late.stderr
    assert tip(repo, slug) == before


def test_a_second_runner_is_refused_while_the_first_is_live(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [{"phase": "implement", "sleep": 30}])
    with background(repo_path, "run", GOAL) as runner:
        slug = only_slug(repo_path)
        wait_for_event(repo_path, slug, session_started("implement"), "implement to start")
        holder = live_lease(repo_path, slug)
        before = tip(repo, slug)
        status = json.loads(run_cli(repo_path, "status", "--json").stdout)
        assert status["builds"][0]["runner"] == f"{holder.holder}@{holder.host}"

        second = run_cli(repo_path, "resume", slug)

        assert (second.returncode, second.stderr) == (7, "")  # not now: another runner has it
        pattern = (
            rf"build {slug} is being run by {holder.holder} on "
            rf"{re.escape(socket.gethostname())} \(pid {holder.pid}\); its lease expires at "
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\. Wait for it, or stop that runner\.\n"
        )
        assert re.fullmatch(pattern, second.stdout), second.stdout
        assert tip(repo, slug) == before
        run_cli(repo_path, "abort", slug)
        code, _ = runner.wait()
    assert code == 6  # aborted


def test_ctrl_c_interrupts_the_session_and_resume_finishes(
    repo_path: Path, repo: pygit2.Repository, agent_state: Path
) -> None:
    with background(repo_path, "run", GOAL) as runner:
        slug = only_slug(repo_path)
        runner_pid, agent, child = wait_for_hanging_agent(repo_path, slug, agent_state)
        os.kill(runner_pid, signal.SIGINT)
        code, out = runner.wait()

    assert code == 130, out
    assert out.splitlines()[-1] == "agentrun: interrupted"
    assert gone(agent) and gone(child)
    ended = payloads(repo, slug, "session.ended")[-1]
    assert (ended.outcome, ended.error) == ("interrupted", "Ctrl-C")
    failed = payloads(repo, slug, "phase.failed")[-1]
    assert (failed.phase, failed.interrupted, failed.will_retry) == ("implement", True, True)
    assert read_lease(repo, slug) is None

    resumed = run_cli(repo_path, "resume", slug, timeout=60)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.splitlines()[-2] == f"build {slug}: complete at done"
    started = payloads(repo, slug, "implement.started")
    assert [p.round for p in started] == [1, 1]
    assert_finished_once(repo, repo_path, slug)


def test_ctrl_c_during_a_verify_check_ends_the_check(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    """DESIGN §12: Ctrl-C ends what runs now; a check runs in its own session, out of the
    terminal's reach, so the runner must end its tree itself."""
    pid_file, marker = tmp_path / "check.pid", tmp_path / "checked-once"
    check = f"if [ ! -e {marker} ]; then touch {marker}; sleep 300 & echo $! > {pid_file}; wait; fi"
    configure(repo_path, extra=f'[[verify]]\nname = "slow"\ncommand = "{check}"\n')
    try:
        with background(repo_path, "run", GOAL) as runner:
            slug = only_slug(repo_path)
            wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "", "check")
            sleeper = int(pid_file.read_text())
            os.kill(live_lease(repo_path, slug).pid, signal.SIGINT)
            code, out = runner.wait()

        assert code == 130, out
        failed = payloads(repo, slug, "phase.failed")[-1]
        assert (failed.phase, failed.interrupted) == ("verify:slow", True)
        assert read_lease(repo, slug) is None
        wait_for(lambda: gone(sleeper), "the check's process tree to end", 5)
    finally:
        kill_left_over(pid_file)

    resumed = run_cli(repo_path, "resume", slug, timeout=60)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.splitlines()[-2] == f"build {slug}: complete at done"
