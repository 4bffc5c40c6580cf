"""``git agentrun sweep``: resume what was answered or orphaned, report the rest.

Machines A and B are clones of a bare repository on file://; B sweeps what A left.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pygit2
import pytest
from conftest import make_repo
from runner.helpers import cli_env, configure, events, git

from agentrun.commands.build import create_build
from agentrun.commands.control import answer, pause
from agentrun.commands.sweep import sweep
from agentrun.gitrepo import now_utc
from agentrun.runner.loop import Runner
from agentrun.store.lease import LeaseInfo, lease_commit, lease_ref
from agentrun.store.log import EventLog
from agentrun.store.sync import sync
from agentrun.store.transport import RefUpdate, Remote

# Every plan asks a question first; answered, the build runs to the end.
STEPS = [{"phase": "plan", "attempt": 1, "verb": "escalate", "text": "Which file?"}]


@dataclass
class Machines:
    remote: Path
    a: pygit2.Repository
    b: pygit2.Repository
    b_path: Path


@pytest.fixture
def m(tmp_path: Path) -> Machines:
    seed = make_repo(tmp_path / "seed")
    configure(seed, STEPS)
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    for name in ("a", "b"):
        git(tmp_path, "clone", "-q", bare.as_uri(), name)
    a = pygit2.Repository(str(tmp_path / "a"))
    b = pygit2.Repository(str(tmp_path / "b"))
    return Machines(bare, a, b, tmp_path / "b")


def remote_types(m: Machines, slug: str) -> list[str]:
    return [e.type for e in events(pygit2.Repository(str(m.remote)), slug)]


def test_sweep_resumes_the_answered_and_reports_the_parked_and_paused(m: Machines) -> None:
    parked = create_build(m.a, "Parked build").slug
    answered = create_build(m.a, "Answered build").slug
    paused = create_build(m.a, "Paused build").slug
    for slug in (parked, answered):
        assert Runner(m.a, slug).run().state.state_name == "parked"
    answer(m.a, answered, "README.md")
    assert pause(m.a, paused).acknowledged
    sync(m.a, "origin")

    swept = subprocess.run(
        ["git", "agentrun", "sweep", "--remote", "origin", "--json"],
        cwd=m.b_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert swept.returncode == 0, swept.stderr
    assert json.loads(swept.stdout) == {
        "schema": 1,
        "builds": [
            {
                "slug": answered,
                "action": "resumed",
                "reason": "its questions were answered",
                "state": "complete",
            },
            {
                "slug": parked,
                "action": "skipped",
                "reason": "parked on question e1",
                "state": "parked",
            },
            {"slug": paused, "action": "skipped", "reason": "paused", "state": "paused"},
        ],
        "unreadable": [],
    }
    assert remote_types(m, answered)[-1] == "build.completed"
    assert EventLog(m.b).tip_oid(answered) == git(
        m.remote, "rev-parse", f"refs/agentrun/builds/{answered}"
    )
    assert "runner.attached" not in remote_types(m, paused)

    again = subprocess.run(
        ["git", "agentrun", "sweep"],  # no remote named or configured: this clone only
        cwd=m.b_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.stdout.splitlines() == [
        f"{parked}: skipped (parked on question e1); parked at plan@1",
        f"{paused}: skipped (paused); paused at plan@1",
    ]


def test_a_live_lease_elsewhere_is_respected_until_it_expires(
    m: Machines, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTRUN_LEASE_TTL", "2")  # the skew allowance is 0.5 s then
    slug = create_build(m.a, "Orphaned build").slug
    sync(m.a, "origin")
    expires = now_utc() + timedelta(seconds=1)
    other = LeaseInfo(
        holder="r-other",
        host="another-machine",
        boot_id="b",
        pid=4242,
        pid_start=1.0,
        generation=1,
        expires_at=expires,
    )
    pushed = Remote(m.a, "origin").push(
        [RefUpdate(lease_ref(slug), lease_commit(m.a, other), None)]
    )
    assert pushed is not None and pushed.returncode == 0

    first = sweep(m.b, "origin").builds

    assert [(s.slug, s.action) for s in first] == [(slug, "skipped")]
    assert first[0].reason == (
        "running elsewhere: r-other on another-machine (pid 4242) holds it until "
        f"{expires:%Y-%m-%d %H:%M:%S} UTC"
    )
    assert remote_types(m, slug) == ["build.created"]

    time.sleep(max((expires - now_utc()).total_seconds(), 0) + 0.7)
    second = sweep(m.b, "origin").builds

    assert [(s.slug, s.action, s.reason) for s in second] == [(slug, "resumed", "it never ran")]
    assert second[0].state == "parked"  # on the plan's question
    assert remote_types(m, slug)[:2] == ["build.created", "runner.attached"]
    assert git(m.remote, "for-each-ref", f"refs/agentrun/leases/{slug}") == ""


def test_a_time_limit_already_passed_resumes_nothing(m: Machines) -> None:
    slug = create_build(m.a, "Late build").slug
    swept = sweep(m.a, None, stop_at=time.monotonic() - 1).builds
    assert [(s.slug, s.action, s.reason) for s in swept] == [
        (slug, "skipped", "time limit reached before this build")
    ]
    assert [e.type for e in events(m.a, slug)] == ["build.created"]


def _cli_sweep(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", "sweep", *args],
        cwd=path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unreadable_log_is_reported_and_the_sweep_goes_on(m: Machines) -> None:
    broken = create_build(m.a, "Broken build").slug
    fine = create_build(m.a, "Fine build").slug
    path = Path(m.a.workdir)
    ref = f"refs/agentrun/builds/{broken}"
    old = git(path, "rev-parse", ref)
    tree = git(path, "hash-object", "-t", "tree", "-w", "/dev/null")
    bad = git(path, "commit-tree", tree, "-p", old, "-m", "garbage without a body")
    git(path, "update-ref", ref, bad, old)
    problem = f"commit {bad[:12]} is not an agentrun event: no JSON body"

    swept = _cli_sweep(path, "--json")

    assert swept.returncode == 1, swept.stderr
    assert json.loads(swept.stdout) == {
        "schema": 1,
        "builds": [
            {"slug": fine, "action": "resumed", "reason": "it never ran", "state": "parked"}
        ],
        "unreadable": [{"slug": broken, "error": problem}],
    }
    assert "escalation.raised" in [e.type for e in events(m.a, fine)]
    text = _cli_sweep(path)
    assert text.returncode == 1
    assert text.stdout == f"{fine}: skipped (parked on question e1); parked at plan@1\n"
    assert text.stderr == f"agentrun: build {broken} cannot be read: {problem}\n"


def test_a_build_the_time_limit_cut_short_is_stopped(m: Machines) -> None:
    configure(Path(m.a.workdir), [{"phase": "plan", "attempt": 1, "sleep": 60, "verb": "plan"}])
    slug = create_build(m.a, "Slow build").slug

    swept = _cli_sweep(Path(m.a.workdir), "--json", "--time-limit", "0.02")

    assert swept.returncode == 7, swept.stderr
    assert json.loads(swept.stdout)["builds"] == [
        {
            "slug": slug,
            "action": "resumed",
            "reason": "it never ran; stopped at the time limit",
            "state": "stopped",
        }
    ]
