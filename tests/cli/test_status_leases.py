"""``status`` judges leases without store/lease.py: what it shows for every kind of lease
(live, expired, its holder dead here, a remote's, a task's, unreadable, in a form only
pydantic reads) is what ``lease.held`` says, and a live lease imports no pydantic, pygit2
or psutil. Real repositories, real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pygit2
import pytest
from cli.test_status_index import by_slug, here, imported, new_build, status_out

from agentrun import procs
from agentrun.commands import status
from agentrun.gitrepo import empty_tree, signature
from agentrun.store import lease, lease_rule

__all__ = ["here"]  # the fixture, used by name


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


def put(repo: pygit2.Repository, ref: str, message: str) -> None:
    sig = signature()
    oid = repo.create_commit(None, sig, sig, message, empty_tree(repo), [])
    repo.references.create(ref, oid, force=True)


def claim(pid: int, start: float, *, minutes: float = 10, host: str = "") -> str:
    me = procs.me()
    info = lease.LeaseInfo(
        holder=f"r-{pid}",
        host=host or me.host,
        boot_id=me.boot_id,
        pid=pid,
        pid_start=start,
        generation=1,
        expires_at=datetime.now(UTC) + timedelta(minutes=minutes),
    )
    return info.model_dump_json()


def dead_pid() -> tuple[int, float]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = procs.start_time(proc.pid)
    proc.wait()
    assert start is not None
    return proc.pid, start


KEYS = ["live", "expired", "dead", "remote", "gone", "junk", "lax", "b/t1", "b/t2", "none"]


def leases(repo: pygit2.Repository, sleeper: subprocess.Popen[bytes]) -> None:
    start = procs.start_time(sleeper.pid)
    assert start is not None
    for slug in ("live", "expired", "dead", "remote", "gone", "junk", "lax", "b", "none"):
        new_build(repo, slug)
    put(repo, lease.lease_ref("live"), claim(sleeper.pid, start))
    put(repo, lease.lease_ref("expired"), claim(sleeper.pid, start, minutes=-5))
    put(repo, lease.lease_ref("dead"), claim(*dead_pid()))
    repo.remotes.create("origin", "https://example.invalid/x.git")
    remote_claim = claim(sleeper.pid, start, host="elsewhere")
    put(repo, lease.lease_ref("remote"), claim(*dead_pid()))  # dead here: the remote's counts
    put(repo, f"refs/agentrun-remotes/origin/{lease.tracked('remote')}", remote_claim)
    put(repo, f"refs/agentrun-remotes/gone/{lease.tracked('gone')}", remote_claim)  # no remote
    put(repo, lease.lease_ref("junk"), "not a lease at all")
    lax = json.loads(claim(sleeper.pid, start))
    lax["pid"] = str(lax["pid"])  # pydantic reads "123" as 123: only it may say
    put(repo, lease.lease_ref("lax"), json.dumps(lax))
    put(repo, lease.lease_ref("b/t1"), claim(sleeper.pid, start))
    put(repo, f"refs/agentrun-remotes/origin/{lease.tracked('b/t2')}", remote_claim)


def held_name(repo: pygit2.Repository, key: str) -> str | None:
    holder = lease.held(repo, key)
    return None if holder is None else holder.name()


def test_status_shows_what_held_says(
    here: Path, repo: pygit2.Repository, sleeper: subprocess.Popen[bytes]
) -> None:
    leases(repo, sleeper)
    expected = {key: held_name(repo, key) for key in KEYS}
    assert expected["live"] == f"r-{sleeper.pid}@{procs.me().host}"
    assert expected["remote"] == f"r-{sleeper.pid}@elsewhere (on origin)"
    assert expected["b/t1"] and expected["b/t2"] and expected["lax"]
    assert [k for k, v in expected.items() if v is None] == [
        "expired",
        "dead",
        "gone",
        "junk",
        "none",
    ]
    holders = status.Holders(status.read_refs(str(here)))
    assert {key: holders.name(key) for key in KEYS} == expected
    assert holders.refs.opened is not None  # the lax lease was asked of store/lease.py
    rows = by_slug(status_out("--json"))
    rows_runner = {slug: rows[slug]["runner"] for slug in rows}
    assert rows_runner == {
        slug: held_name(repo, slug) for slug in [*(k for k in KEYS if "/" not in k), "b"]
    }
    states = {line.split()[0]: line.split()[1] for line in status_out().splitlines()[1:]}
    assert states == {
        slug: "stopped" if runner is None else "running" for slug, runner in rows_runner.items()
    }


def test_a_live_lease_is_judged_without_pydantic_pygit2_or_psutil(
    here: Path, repo: pygit2.Repository, sleeper: subprocess.Popen[bytes]
) -> None:
    start = procs.start_time(sleeper.pid)
    assert start is not None
    new_build(repo, "live")
    repo.remotes.create("origin", "https://example.invalid/x.git")
    put(repo, lease.lease_ref("live"), claim(sleeper.pid, start))
    put(repo, f"refs/agentrun-remotes/origin/{lease.tracked('live')}", claim(*dead_pid()))
    status_out()  # the index
    assert imported(here, "--json") == []  # a real process: pydantic, pygit2, psutil…
    assert by_slug(status_out("--json"))["live"]["runner"] == held_name(repo, "live")


def commit_of(message: str) -> bytes:
    return f"tree {'0' * 40}\nauthor a <a@b> 0 +0000\n\n{message}".encode()


def test_what_is_read_without_pydantic_is_what_pydantic_reads() -> None:
    good = json.loads(claim(1, 1.0))
    for value in (good, {**good, "agent_pgid": 7, "pid_start": 3}, {**good, "holder": "é\u00e9"}):
        text = json.dumps(value)
        info = lease.LeaseInfo.model_validate_json(text)
        seen = lease_rule.read_claim("commit", commit_of(text))
        assert seen is not None
        assert (seen.holder, seen.host, seen.boot_id, seen.pid) == (
            info.holder,
            info.host,
            info.boot_id,
            info.pid,
        )
        assert (seen.pid_start, seen.expires_at) == (info.pid_start, info.expires_at)
    for sure in ("[]", "{", "not a lease", json.dumps({**good, "extra": 1})):
        assert lease_rule.read_claim("commit", commit_of(sure)) is None
        with pytest.raises(ValueError):  # pydantic's ValidationError is one
            lease.LeaseInfo.model_validate_json(sure)
    assert lease_rule.read_claim("blob", b"{}") is None
    assert lease_rule.read_claim("missing", None) is None
    lax = ({**good, "pid": "1"}, {**good, "pid": True}, {**good, "expires_at": "2026-12-02"})
    for value in lax:
        with pytest.raises(lease_rule.Unsure):
            lease_rule.read_claim("commit", commit_of(json.dumps(value)))
    nan = json.dumps({**good, "pid_start": float("nan")})
    for message in (nan, '{"a": 1, "a": 2}', "\n" + json.dumps(good)[:-1] + ', "pid": 1}'):
        with pytest.raises(lease_rule.Unsure):
            lease_rule.read_claim("commit", commit_of(message))


def test_the_remotes_are_pygit2s(repo: pygit2.Repository, repo_path: Path) -> None:
    for name, url in (("zeta", "u1"), ("alpha", "u2"), ("Beta", "u3"), ("a.b", "u5")):
        repo.remotes.create(name, url)
    repo.config["remote.push-only.pushurl"] = "u4"
    repo.config["remote.no-url.fetch"] = "+refs/heads/*:refs/remotes/no-url/*"
    names = list(repo.remotes.names())
    assert status.remote_names(str(repo_path)) == names
    assert len(names) == 5
