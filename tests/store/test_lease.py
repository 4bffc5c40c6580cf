"""Leases: who executes a build now (``refs/agentrun/leases/<slug>``, DESIGN §2, §12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pygit2
import pytest
from conftest import git

from agentrun import procs
from agentrun.errors import LeaseHeldError, LeaseLostError
from agentrun.store.lease import (
    SKEW_SECONDS,
    Heartbeat,
    Lease,
    LeaseInfo,
    acquire,
    lease_ref,
    read_lease,
)

SLUG = "issue-7-lease"
REF = f"refs/agentrun/leases/{SLUG}"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
T0 = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)


def current(repo: pygit2.Repository) -> str | None:
    ref = repo.references.get(REF)
    return None if ref is None else str(ref.target)


def held(repo: pygit2.Repository, lease: Lease) -> bool:
    """The lease's ref still points at what ``lease`` wrote: nobody took it over."""
    ref = repo.references.get(lease_ref(lease.slug))
    return ref is not None and str(ref.target) == lease.oid


def write_lease(repo_path: Path, message: str) -> str:
    """A lease commit written by hand with the git CLI."""
    oid = git(repo_path, "commit-tree", EMPTY_TREE, "-m", message)
    git(repo_path, "update-ref", REF, oid)
    return oid


def test_acquire_a_fresh_build(repo: pygit2.Repository, repo_path: Path) -> None:
    lease = acquire(repo, SLUG, "runner-a", ttl=120, now=T0)
    me = procs.me()
    assert lease.taken_from is None
    assert lease.info.holder == "runner-a"
    assert lease.info.generation == 1
    assert lease.info.expires_at == T0 + timedelta(seconds=120)
    assert (lease.info.host, lease.info.boot_id, lease.info.pid) == (me.host, me.boot_id, me.pid)
    assert lease.info.pid_start == pytest.approx(me.start)
    assert lease.info.pid_start > 0
    assert lease_ref(SLUG) == REF
    assert current(repo) == lease.oid
    assert held(repo, lease)
    assert read_lease(repo, SLUG) == (lease.oid, lease.info)

    # A commit whose message is JSON {holder, host, generation, expires_at, ...}.
    doc = json.loads(git(repo_path, "log", "-1", "--format=%B", REF))
    assert doc["holder"] == "runner-a"
    assert doc["host"] == me.host
    assert doc["generation"] == 1
    assert datetime.fromisoformat(doc["expires_at"]) == T0 + timedelta(seconds=120)
    assert git(repo_path, "log", "-1", "--format=%T", REF) == EMPTY_TREE


def test_a_live_lease_is_refused_naming_holder_and_expiry(repo: pygit2.Repository) -> None:
    first = acquire(repo, SLUG, "runner-a", ttl=120, now=T0)
    with pytest.raises(LeaseHeldError) as info:
        acquire(repo, SLUG, "runner-b", now=T0 + timedelta(seconds=60))
    message = str(info.value)
    assert "runner-a" in message
    assert first.info.host in message
    assert "2026-11-03 12:02:00" in message
    assert current(repo) == first.oid


def test_a_lease_within_the_skew_allowance_is_still_held(repo: pygit2.Repository) -> None:
    acquire(repo, SLUG, "runner-a", ttl=120, now=T0)
    almost = T0 + timedelta(seconds=120 + SKEW_SECONDS - 1)
    with pytest.raises(LeaseHeldError):
        acquire(repo, SLUG, "runner-b", now=almost)


def test_an_expired_lease_is_taken_over(repo: pygit2.Repository) -> None:
    first = acquire(repo, SLUG, "runner-a", ttl=120, now=T0)
    later = T0 + timedelta(seconds=120 + SKEW_SECONDS + 1)
    second = acquire(repo, SLUG, "runner-b", ttl=120, now=later)
    assert second.taken_from == first.info
    assert second.info.holder == "runner-b"
    assert second.info.generation == 2
    assert current(repo) == second.oid
    assert not held(repo, first)
    assert held(repo, second)


def test_a_short_ttl_expires(repo: pygit2.Repository) -> None:
    acquire(repo, SLUG, "runner-a", ttl=0.01)
    # Past the TTL and the skew allowance, as seen by the next runner's clock.
    later = datetime.now(UTC) + timedelta(seconds=SKEW_SECONDS + 1)
    second = acquire(repo, SLUG, "runner-b", now=later)
    assert second.taken_from is not None
    assert second.taken_from.holder == "runner-a"


HOLDER = """
import sys
import pygit2
from agentrun.store.lease import acquire
lease = acquire(pygit2.Repository(sys.argv[1]), sys.argv[2], "runner-dead", ttl=3600)
print(lease.info.pid)
"""


def test_a_dead_holder_on_this_host_is_taken_over_at_once(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", HOLDER, str(repo_path), SLUG],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(out.stdout)
    seen = read_lease(repo, SLUG)
    assert seen is not None
    assert seen[1].holder == "runner-dead"
    assert seen[1].pid == dead_pid
    assert not procs.is_alive(dead_pid, seen[1].pid_start)
    assert not seen[1].expired(datetime.now(UTC))  # an hour to go

    lease = acquire(repo, SLUG, "runner-b")
    assert lease.taken_from is not None
    assert lease.taken_from.holder == "runner-dead"
    assert lease.taken_from.pid == dead_pid
    assert lease.info.generation == 2
    assert current(repo) == lease.oid


def foreign_lease(pid: int, host: str, boot_id: str, pid_start: float) -> str:
    return LeaseInfo(
        holder="runner-x",
        host=host,
        boot_id=boot_id,
        pid=pid,
        pid_start=pid_start,
        generation=4,
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    ).model_dump_json()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_holder_on_another_host_is_not_judged_by_local_pids(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    me = procs.me()
    write_lease(repo_path, foreign_lease(dead_pid(), "elsewhere", me.boot_id, 1.0))
    with pytest.raises(LeaseHeldError, match="runner-x on elsewhere"):
        acquire(repo, SLUG, "runner-b")


def test_a_holder_from_an_earlier_boot_is_not_judged_by_local_pids(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    me = procs.me()
    write_lease(repo_path, foreign_lease(dead_pid(), me.host, "another-boot", 1.0))
    with pytest.raises(LeaseHeldError):
        acquire(repo, SLUG, "runner-b")


def test_a_reused_pid_does_not_keep_a_dead_holder_alive(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    """The pid is alive (it is ours) but started at another time: a different process."""
    me = procs.me()
    write_lease(repo_path, foreign_lease(os.getpid(), me.host, me.boot_id, me.start - 3600))
    lease = acquire(repo, SLUG, "runner-b")
    assert lease.taken_from is not None
    assert lease.taken_from.holder == "runner-x"
    assert lease.info.generation == 5


def test_renew_extends_and_counts_generations(repo: pygit2.Repository) -> None:
    lease = acquire(repo, SLUG, "runner-a", ttl=120, now=T0)
    first_oid = lease.oid
    lease.renew(now=T0 + timedelta(seconds=30))
    assert lease.info.generation == 2
    assert lease.info.expires_at == T0 + timedelta(seconds=150)
    assert lease.oid != first_oid
    assert current(repo) == lease.oid
    assert read_lease(repo, SLUG) == (lease.oid, lease.info)

    lease.renew(agent_pgid=4242, now=T0 + timedelta(seconds=60))
    assert lease.info.agent_pgid == 4242
    lease.renew(now=T0 + timedelta(seconds=90))
    assert lease.info.agent_pgid == 4242  # kept unless given
    lease.renew(agent_pgid=None, now=T0 + timedelta(seconds=120))
    assert lease.info.agent_pgid is None
    assert lease.info.generation == 5


def test_renew_after_a_takeover_is_lost(repo: pygit2.Repository) -> None:
    first = acquire(repo, SLUG, "runner-a", ttl=120, now=T0)
    second = acquire(repo, SLUG, "runner-b", now=T0 + timedelta(hours=1))
    with pytest.raises(LeaseLostError, match=SLUG):
        first.renew()
    assert current(repo) == second.oid
    second.renew()
    assert current(repo) == second.oid


def test_renew_after_release_is_lost(repo: pygit2.Repository) -> None:
    lease = acquire(repo, SLUG, "runner-a")
    lease.release()
    with pytest.raises(LeaseLostError):
        lease.renew()
    assert current(repo) is None


def test_release_deletes_only_our_own_lease(repo: pygit2.Repository) -> None:
    first = acquire(repo, SLUG, "runner-a", ttl=120, now=T0)
    second = acquire(repo, SLUG, "runner-b", now=T0 + timedelta(hours=1))
    first.release()
    assert current(repo) == second.oid
    second.release()
    assert current(repo) is None
    assert read_lease(repo, SLUG) is None
    third = acquire(repo, SLUG, "runner-c")
    assert third.taken_from is None
    assert third.info.generation == 1


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_heartbeat_renews_in_the_background(repo: pygit2.Repository) -> None:
    lease = acquire(repo, SLUG, "runner-a", ttl=120)
    start_expiry = lease.info.expires_at
    with Heartbeat(lease, interval=0.05) as beat:
        assert wait_for(lambda: lease.info.generation >= 3)
        beat.check()
    generation = lease.info.generation
    assert lease.info.expires_at > start_expiry
    assert current(repo) == lease.oid
    assert read_lease(repo, SLUG) == (lease.oid, lease.info)
    time.sleep(0.2)
    assert lease.info.generation == generation  # stopped with the context
    assert beat.lost is None


def test_heartbeat_notices_a_lost_lease(repo: pygit2.Repository) -> None:
    lease = acquire(repo, SLUG, "runner-a", ttl=120)
    with Heartbeat(lease, interval=0.05) as beat:
        acquire(repo, SLUG, "runner-b", now=datetime.now(UTC) + timedelta(hours=1))
        assert wait_for(lambda: beat.lost is not None)
        with pytest.raises(LeaseLostError):
            beat.check()
        with pytest.raises(LeaseLostError):
            beat.renew()
    assert read_lease(repo, SLUG) is not None
    seen = read_lease(repo, SLUG)
    assert seen is not None and seen[1].holder == "runner-b"


def test_heartbeat_renew_records_the_agent_group(repo: pygit2.Repository) -> None:
    lease = acquire(repo, SLUG, "runner-a")
    with Heartbeat(lease, interval=60) as beat:
        beat.renew(agent_pgid=777)
    assert lease.info.agent_pgid == 777
    seen = read_lease(repo, SLUG)
    assert seen is not None and seen[1].agent_pgid == 777


@pytest.mark.parametrize(
    "message",
    ["not json at all", '{"holder": "half a lease"}', "[1, 2, 3]", '{"holder": 1, "pid": "x"}'],
)
def test_an_unreadable_lease_is_treated_as_expired(
    repo: pygit2.Repository, repo_path: Path, message: str
) -> None:
    oid = write_lease(repo_path, message)
    seen = read_lease(repo, SLUG)
    assert seen is not None
    assert seen[0] == oid
    assert seen[1].expired(datetime.now(UTC))

    lease = acquire(repo, SLUG, "runner-b")
    assert lease.taken_from is not None
    assert lease.taken_from.holder == "unreadable"
    assert current(repo) == lease.oid


def test_leases_of_different_builds_are_independent(repo: pygit2.Repository) -> None:
    one = acquire(repo, "build-one", "runner-a")
    two = acquire(repo, "build-two", "runner-b")
    assert held(repo, one) and held(repo, two)
    one.release()
    assert held(repo, two)
