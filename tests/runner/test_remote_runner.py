"""A runner with a remote: two clones (machines A and B) of a bare repository on file://.

The remote is the arbiter: a build run from A is visible and resumable from B, two
runners never run one build, a dead runner's build is taken over, people's commands
pushed meanwhile are merged, a runner that lost its lease cannot overwrite, and a
time limit leaves the build resumable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
import pytest
from conftest import make_repo
from runner.helpers import (
    Background,
    cli_env,
    configure,
    events,
    git,
    kill_left_over,
    session_started,
    wait_for,
)

from agentrun.commands.build import create_build
from agentrun.events import Event
from agentrun.gitrepo import now_utc
from agentrun.store.lease import lease_info, read_lease
from agentrun.store.log import EventLog
from agentrun.store.remote_lease import claim_remote

GOAL = "Add the feature file"
TIMEOUT = 60.0


@dataclass
class Machines:
    remote: Path
    a: Path
    b: Path

    def remote_events(self, slug: str) -> list[Event]:
        repo = pygit2.Repository(str(self.remote))
        if EventLog(repo).tip_oid(slug) is None:
            return []
        return events(repo, slug)

    def remote_ref(self, ref: str) -> str | None:
        return git(self.remote, "for-each-ref", "--format=%(objectname)", ref) or None


def machines_with(tmp_path: Path, steps: list[dict[str, Any]], extra: str = "") -> Machines:
    seed = make_repo(tmp_path / "seed")
    configure(seed, steps, extra)
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    for name in ("a", "b"):
        git(tmp_path, "clone", "-q", bare.as_uri(), name)
    return Machines(bare, tmp_path / "a", tmp_path / "b")


def cli(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", *args],
        cwd=cwd,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def procs() -> Iterator[list[Background]]:
    started: list[Background] = []
    yield started
    for proc in started:
        if proc.proc.poll() is None:
            proc.stop()


def create(path: Path) -> str:
    return create_build(pygit2.Repository(str(path)), GOAL).slug


def local_events(path: Path, slug: str) -> list[Event]:
    repo = pygit2.Repository(str(path))
    return events(repo, slug) if EventLog(repo).tip_oid(slug) else []


def assert_one_clean_log(log: list[Event]) -> None:
    """Consecutive seqs, one completion at the end, each phase's work recorded once."""
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    kinds = [e.type for e in log]
    assert kinds.count("build.completed") == 1 and kinds[-1] == "build.completed"
    assert kinds.count("implement.completed") == 1
    assert kinds.count("plan.submitted") == 1


def test_a_build_run_from_a_is_visible_and_resumable_from_b(tmp_path: Path) -> None:
    m = machines_with(
        tmp_path,
        [
            {"phase": "implement", "sleep": 2, "write": {"feature.txt": "one\n"}},
            {"phase": "code-review", "attempt": 1, "verb": "escalate", "text": "Ship it?"},
        ],
    )
    slug = create(m.a)
    runner = Background(m.a, "resume", slug, "--remote", "origin")
    # While implement runs on A, the phases before it are on the remote already.
    wait_for(
        lambda: "plan-review.verdict" in [e.type for e in m.remote_events(slug)],
        "plan and plan-review to reach the remote",
    )
    holder = m.remote_ref(f"refs/agentrun/leases/{slug}")
    assert holder is not None, "the build is claimed on the remote while it runs"
    code, out = runner.wait(TIMEOUT)
    assert code == 4, out  # parked
    assert f"build {slug}: parked at code-review@1" in out

    a_log = local_events(m.a, slug)
    assert [e.type for e in m.remote_events(slug)] == [e.type for e in a_log]
    assert m.remote_ref(f"refs/agentrun/leases/{slug}") is None, "released when A stopped"
    branch = git(m.a, "rev-parse", f"agentrun/{slug}")
    assert m.remote_ref(f"refs/heads/agentrun/{slug}") == branch
    assert m.remote_ref("refs/notes/agentrun") == git(m.a, "rev-parse", "refs/notes/agentrun")

    # B has never seen the build: it fetches, answers, pushes, and resumes it.
    assert cli(m.b, "sync", "origin").returncode == 0
    assert cli(m.b, "answer", slug, "Yes").returncode == 0
    resumed = cli(m.b, "resume", slug, "--remote", "origin")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"build {slug}: complete at done" in resumed.stdout
    final = m.remote_events(slug)
    assert final == local_events(m.b, slug)
    assert final[: len(a_log)] == a_log, "A's events come first, untouched"
    assert "escalation.answered" in [e.type for e in final]
    assert_one_clean_log(final)
    assert cli(m.a, "sync", "origin").returncode == 0
    assert local_events(m.a, slug) == final


def test_two_runners_at_once_exactly_one_runs(tmp_path: Path, procs: list[Background]) -> None:
    m = machines_with(tmp_path, [{"phase": "plan", "sleep": 2}])
    slug = create(m.a)
    assert cli(m.a, "sync", "origin").returncode == 0
    assert cli(m.b, "sync", "origin").returncode == 0
    before = m.remote_events(slug)

    procs += [Background(path, "resume", slug, "--remote", "origin") for path in (m.a, m.b)]
    results = [proc.wait(TIMEOUT) for proc in procs]

    codes = sorted(code for code, _ in results)
    assert codes == [0, 7], results  # 7: not now, the other runner has it
    loser = next(out for code, out in results if code == 7)
    assert (
        f"build {slug} is being run by r-" in loser
        or f"another machine claimed build {slug} on origin" in loser
    ), loser
    log = m.remote_events(slug)
    assert log[: len(before)] == before
    assert [e.type for e in log].count("runner.attached") == 1
    assert_one_clean_log(log)


def test_a_killed_runner_is_swept_and_finished_from_another_clone(
    tmp_path: Path, procs: list[Background]
) -> None:
    marker, pid_file = tmp_path / "hung-once", tmp_path / "hung.pid"
    hang = f"test -e {marker} || {{ touch {marker}; echo $$ > {pid_file}; exec sleep 120; }}"
    m = machines_with(tmp_path, [{"phase": "implement", "run": hang, "write": {"f.txt": "x\n"}}])
    env = {"AGENTRUN_LEASE_TTL": "4"}
    slug = create(m.a)
    try:
        runner = Background(m.a, "resume", slug, "--remote", "origin", env=env)
        procs.append(runner)
        wait_for(
            lambda: any(session_started("implement")(e) for e in local_events(m.a, slug)),
            "implement to start on A",
        )
        wait_for(lambda: pid_file.exists(), "the agent's command to hang")
        pushed = m.remote_events(slug)
        runner.stop()

        swept = cli(m.b, "sweep", "--remote", "origin", env=env)

        assert swept.returncode == 0, swept.stdout + swept.stderr
        assert swept.stdout.startswith(f"{slug}: resumed ("), swept.stdout
        assert swept.stdout.rstrip().endswith("; complete at done"), swept.stdout
    finally:
        kill_left_over(pid_file)
    log = m.remote_events(slug)
    assert log[: len(pushed)] == pushed, "nothing A pushed was lost"
    assert_one_clean_log(log)
    assert m.remote_ref(f"refs/agentrun/leases/{slug}") is None
    again = cli(m.b, "sweep", "--remote", "origin", "--json", env=env)
    assert json.loads(again.stdout) == {"schema": 1, "builds": [], "unreadable": []}


def test_an_answer_pushed_meanwhile_is_merged_not_lost(tmp_path: Path) -> None:
    # B syncs and pauses while A's implement session runs: long enough for a loaded machine.
    m = machines_with(
        tmp_path, [{"phase": "implement", "sleep": 8}], extra='[sync]\nremote = "origin"\n'
    )
    slug = create(m.a)
    runner = Background(m.a, "resume", slug)  # the remote comes from [sync] remote
    wait_for(
        lambda: (
            any(session_started("implement")(e) for e in m.remote_events(slug))
            or any(session_started("implement")(e) for e in local_events(m.a, slug))
        ),
        "implement to start on A",
    )
    assert cli(m.b, "sync", "origin").returncode == 0
    paused = cli(m.b, "pause", slug)
    assert paused.returncode == 0, paused.stderr
    assert "the runner of" in paused.stdout, "B must not acknowledge while A holds the lease"
    assert cli(m.b, "sync", "origin").returncode == 0
    requested = [e for e in m.remote_events(slug) if e.type == "build.pause-requested"]
    assert len(requested) == 1

    code, out = runner.wait(TIMEOUT)

    assert code == 5, out  # paused
    assert f"build {slug}: paused at" in out
    log = m.remote_events(slug)
    kinds = [e.type for e in log]
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert kinds.count("build.pause-requested") == 1
    assert kinds.index("build.pause-requested") < kinds.index("implement.completed")
    assert kinds[-1] == "build.paused"
    assert local_events(m.a, slug) == log


def test_a_runner_that_lost_its_lease_stops_without_overwriting(tmp_path: Path) -> None:
    m = machines_with(tmp_path, [{"phase": "implement", "sleep": 9}])
    env = {"AGENTRUN_LEASE_TTL": "2"}
    slug = create(m.a)
    runner = Background(m.a, "resume", slug, "--remote", "origin", env=env)
    try:
        wait_for(
            lambda: any(session_started("implement")(e) for e in local_events(m.a, slug)),
            "implement to start on A",
        )
        time.sleep(3)  # longer than the TTL: only the heartbeat keeps the lease alive
        bare = pygit2.Repository(str(m.remote))
        held = lease_info(bare, str(bare.references[f"refs/agentrun/leases/{slug}"].target))
        assert held.expires_at > now_utc(), "the remote lease is renewed while the phase runs"
        os.killpg(runner.proc.pid, signal.SIGSTOP)  # A's heartbeat stops with it
        time.sleep(3.5)  # past the TTL (2 s) and the skew allowance (0.5 s)
        os.environ["AGENTRUN_LEASE_TTL"] = "2"
        try:
            taken = claim_remote(pygit2.Repository(str(m.b)), "origin", slug, "r-thief", ttl=60)
        finally:
            del os.environ["AGENTRUN_LEASE_TTL"]
        remote_tip = m.remote_ref(f"refs/agentrun/builds/{slug}")
    finally:
        os.killpg(runner.proc.pid, signal.SIGCONT)
    code, out = runner.wait(TIMEOUT)

    assert code == 1, out
    assert f"the lease on build {slug} at origin was taken by another runner" in out
    assert m.remote_ref(f"refs/agentrun/builds/{slug}") == remote_tip, "nothing overwritten"
    assert m.remote_ref(f"refs/agentrun/leases/{slug}") == taken.oid
    mine = [e.type for e in local_events(m.a, slug)]
    assert "implement.completed" in mine, "A keeps its work locally"
    assert read_lease(pygit2.Repository(str(m.a)), slug) is None


def test_a_time_limit_stops_the_run_and_a_later_resume_finishes(tmp_path: Path) -> None:
    m = machines_with(tmp_path, [{"phase": "implement", "attempt": 1, "sleep": 60}])
    slug = create(m.a)
    started = time.monotonic()

    limited = cli(m.a, "resume", slug, "--remote", "origin", "--time-limit", "0.05")

    assert limited.returncode == 7, limited.stdout + limited.stderr  # not now: resumable
    assert time.monotonic() - started < 30
    lines = limited.stdout.splitlines()
    assert lines[-1] == f"stopped at the time limit; continue with: git agentrun resume {slug}"
    log = m.remote_events(slug)
    assert log == local_events(m.a, slug), "the last sync pushed everything"
    ended = [e.payload for e in log if e.type == "session.ended"][-1]
    assert (ended.outcome, ended.error) == ("interrupted", "the time limit")
    failed = [e.payload for e in log if e.type == "phase.failed"][-1]
    assert (failed.phase, failed.interrupted, failed.will_retry) == ("implement", True, True)
    assert failed.error == "interrupted by the time limit"
    assert m.remote_ref(f"refs/agentrun/leases/{slug}") is None

    resumed = cli(m.b, "resume", slug, "--remote", "origin")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"build {slug}: complete at done" in resumed.stdout
    assert_one_clean_log(m.remote_events(slug))


def test_an_abort_pushed_from_elsewhere_cancels_the_running_session(tmp_path: Path) -> None:
    m = machines_with(
        tmp_path, [{"phase": "implement", "sleep": 45}], extra='[sync]\nremote = "origin"\n'
    )
    slug = create(m.a)
    short = {"AGENTRUN_LEASE_TTL": "2"}  # the remote is looked at every 0.5 s
    runner = Background(m.a, "resume", slug, env=short)
    wait_for(
        lambda: any(session_started("implement")(e) for e in local_events(m.a, slug)),
        "implement to start on A",
    )
    assert cli(m.b, "sync", "origin").returncode == 0
    aborted = cli(m.b, "abort", slug, env=short)
    assert "the runner of" in aborted.stdout, aborted.stdout + aborted.stderr
    asked = time.monotonic()
    assert cli(m.b, "sync", "origin").returncode == 0

    code, out = runner.wait(timeout=30)

    assert code == 6, out  # aborted
    assert time.monotonic() - asked < 20, "the 45 s session was cut short"
    log = m.remote_events(slug)
    kinds = [e.type for e in log]
    assert kinds[-1] == "build.aborted"
    assert kinds.count("build.abort-requested") == 1
    ended = [e.payload for e in log if e.type == "session.ended"][-1]
    assert ended.outcome == "aborted"
    assert [e.seq for e in log] == list(range(1, len(log) + 1))


def test_status_on_another_clone_names_the_runner_seen_on_the_remote(tmp_path: Path) -> None:
    m = machines_with(
        tmp_path,
        [{"phase": "implement", "sleep": 4, "write": {"x.txt": "x"}}],
        extra='[sync]\nremote = "origin"\n',
    )
    slug = create(m.a)
    runner = Background(m.a, "resume", slug)
    wait_for(
        lambda: any(session_started("implement")(e) for e in local_events(m.a, slug)),
        "implement to start on A",
    )
    assert cli(m.b, "sync", "origin").returncode == 0

    shown = cli(m.b, "status", "--json")

    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)["builds"]
    assert row["slug"] == slug
    assert row["runner"].startswith("r-") and row["runner"].endswith(" (on origin)")
    code, out = runner.wait(TIMEOUT)
    assert code == 0, out
    assert cli(m.b, "sync", "origin").returncode == 0
    (row,) = json.loads(cli(m.b, "status", "--json").stdout)["builds"]
    assert row["runner"] is None
