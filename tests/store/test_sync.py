"""Sync with a remote: a bare repository on ``file://`` and two clones, machines A and B."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo
from support.notes import read_notes
from support.smart_http import smart_http

from agentrun.errors import LeaseHeldError, LeaseLostError
from agentrun.events import (
    BuildCreated,
    BuildPauseRequested,
    EscalationAnswered,
    HumanActor,
    RunnerAttached,
)
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog, Tip
from agentrun.store.notes import NOTES_REF, add_note
from agentrun.store.remote_lease import claim_remote
from agentrun.store.sync import sync
from agentrun.store.transport import RefUpdate, Remote, SyncError

SLUG = "b-1"
LOG = f"refs/agentrun/builds/{SLUG}"
T0 = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)


@dataclass
class Machines:
    remote: Path
    a: pygit2.Repository
    b: pygit2.Repository
    a_path: Path
    b_path: Path


def clone(url: str, path: Path, name: str) -> pygit2.Repository:
    git(path.parent, "clone", "-q", url, path.name)
    git(path, "config", "user.name", f"Machine {name}")
    git(path, "config", "user.email", f"{name.lower()}@example.com")
    return pygit2.Repository(str(path))


@pytest.fixture
def machines(tmp_path: Path) -> Machines:
    seed = make_repo(tmp_path / "seed")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    url = bare.as_uri()
    a = clone(url, tmp_path / "a", "A")
    b = clone(url, tmp_path / "b", "B")
    return Machines(bare, a, b, tmp_path / "a", tmp_path / "b")


def remote_ref(m: Machines, ref: str) -> str | None:
    out = git(m.remote, "for-each-ref", "--format=%(objectname)", ref)
    return out or None


def create(repo: pygit2.Repository, writer: str = "A") -> Tip:
    head = str(repo.head.target)
    created = BuildCreated(goal="g", base_ref="main", base_sha=head, branch=f"agentrun/{SLUG}")
    tip, _ = EventLog(repo, writer).append(SLUG, [Draft(created)], None, T0)
    return tip


def append(repo: pygit2.Repository, drafts: list[Draft], writer: str) -> Tip:
    log = EventLog(repo, writer)
    tip, _ = log.append(SLUG, drafts, log.tip(SLUG), T0)
    return tip


def attached(n: int) -> Draft:
    return Draft(RunnerAttached(instance=f"r-{n}", host="a", pid=n, resumed_from_seq=n))


def human(text: str) -> Draft:
    answer = EscalationAnswered(id="e-1", answer=text, by="bob")
    return Draft(answer, HumanActor(login="bob"), {"answer.txt": text.encode()})


def lines(repo: pygit2.Repository) -> list[str]:
    return sync(repo, "origin").lines()


def test_nothing_to_do_is_up_to_date(machines: Machines) -> None:
    assert lines(machines.a) == ["up to date with origin"]
    create(machines.a)
    lines(machines.a)
    assert lines(machines.a) == [f"build {SLUG}: up to date"]


def test_a_build_travels_from_a_to_b(machines: Machines) -> None:
    m = machines
    create(m.a)
    append(m.a, [attached(1), attached(2)], "A")
    assert lines(m.a) == [f"build {SLUG}: pushed 3 events"]
    assert remote_ref(m, LOG) == EventLog(m.a).tip_oid(SLUG)
    assert lines(m.b) == [f"build {SLUG}: pulled 3 events"]
    events_a = [s.event for s in EventLog(m.a).read(SLUG)]
    assert [s.event for s in EventLog(m.b).read(SLUG)] == events_a
    # Nothing went to live refs' neighbours a user's `git fetch --prune` would delete.
    assert not [r for r in m.b.references if r.startswith("refs/remotes/origin/agentrun")]
    assert m.b.references.get("refs/agentrun-remotes/origin/builds/" + SLUG) is not None


def test_behind_fast_forwards_and_ahead_pushes(machines: Machines) -> None:
    m = machines
    create(m.a)
    lines(m.a)
    lines(m.b)
    append(m.a, [attached(1)], "A")
    assert lines(m.a) == [f"build {SLUG}: pushed 1 event"]
    assert lines(m.b) == [f"build {SLUG}: pulled 1 event"]
    assert EventLog(m.b).tip_oid(SLUG) == EventLog(m.a).tip_oid(SLUG) == remote_ref(m, LOG)


def test_diverged_logs_converge_by_reparenting(machines: Machines) -> None:
    m = machines
    create(m.a)
    lines(m.a)
    lines(m.b)
    append(m.a, [attached(1), attached(2)], "A")
    append(m.b, [Draft(BuildPauseRequested(reason="lunch"), HumanActor(login="bob"))], "B")
    append(m.b, [human("blue")], "B")
    lines(m.a)
    assert lines(m.b) == [
        f"build {SLUG}: re-parented 2 local events onto 2 remote ones, pushed 2 events"
    ]
    assert lines(m.a) == [f"build {SLUG}: pulled 2 events"]
    assert lines(m.b) == [f"build {SLUG}: up to date"]
    tips = {EventLog(m.a).tip_oid(SLUG), EventLog(m.b).tip_oid(SLUG), remote_ref(m, LOG)}
    assert len(tips) == 1
    stored = EventLog(m.b).read(SLUG)
    assert [s.event.seq for s in stored] == [1, 2, 3, 4, 5]
    assert [s.event.type for s in stored] == [
        "build.created",
        "runner.attached",
        "runner.attached",
        "build.pause-requested",
        "escalation.answered",
    ]
    moved = stored[4].event
    assert moved.payload == EscalationAnswered(id="e-1", answer="blue", by="bob")
    assert (moved.actor, moved.writer, moved.ts) == (HumanActor(login="bob"), "B", T0)
    assert EventLog(m.a).artifact(stored[4].oid, "answer.txt") == b"blue"
    assert [s.event for s in EventLog(m.a).read(SLUG)] == [s.event for s in stored]


def test_a_stale_expected_oid_is_refused_and_nothing_is_overwritten(machines: Machines) -> None:
    m = machines
    create(m.a)
    lines(m.a)
    lines(m.b)
    seen = remote_ref(m, LOG)
    append(m.a, [attached(1)], "A")
    lines(m.a)
    theirs = remote_ref(m, LOG)
    ours = append(m.b, [human("red")], "B")
    # B pushes as if the remote still had what B fetched: the lease refuses it.
    done = Remote(m.b, "origin").push([RefUpdate(LOG, ours.oid, seen)])
    assert done is not None and done.returncode != 0
    assert "stale info" in done.stderr
    assert remote_ref(m, LOG) == theirs
    assert lines(m.b) == [
        f"build {SLUG}: re-parented 1 local event onto 1 remote one, pushed 1 event"
    ]


def test_an_atomic_push_moves_nothing_when_one_ref_is_stale(machines: Machines) -> None:
    m = machines
    create(m.a)
    lines(m.a)
    tip = append(m.a, [attached(1)], "A")
    head = str(m.a.head.target)
    branch = "refs/heads/agentrun/" + SLUG
    stale = Remote(m.a, "origin").push(
        [RefUpdate(branch, head, None), RefUpdate(LOG, tip.oid, "0" * 40)]
    )
    assert stale is not None and stale.returncode != 0
    assert remote_ref(m, branch) is None


def test_sync_says_to_run_again_when_the_remote_moved(machines: Machines) -> None:
    m = machines
    create(m.a)
    lines(m.a)
    lines(m.b)
    add_note(m.a, str(m.a.head.target), {"from": "a"})
    assert lines(m.a) == [f"build {SLUG}: up to date", "notes: pushed"]
    append(m.a, [attached(1)], "A")
    append(m.b, [human("green")], "B")
    # A pushes between B's fetch and B's push: B reaches the remote over smart HTTP, and
    # the server lets A push just before it tells B's push what the remote holds.
    with smart_http(m.remote.parent) as server:
        git(m.b_path, "remote", "set-url", "origin", server.url(m.remote.name))
        Remote(m.b, "origin").check_namespaces()  # its pushes come before the race
        push_from_a = partial(git, m.a_path, "push", "-q", "--no-verify", "origin", f"{LOG}:{LOG}")
        server.before.append(("service=git-receive-pack", push_from_a))
        with pytest.raises(SyncError, match="run `git agentrun sync origin` again"):
            sync(m.b, "origin")
        assert not server.before, "B's push never asked the remote"
    git(m.b_path, "remote", "set-url", "origin", m.remote.as_uri())
    assert remote_ref(m, LOG) == EventLog(m.a).tip_oid(SLUG)
    assert lines(m.b) == [
        f"build {SLUG}: re-parented 1 local event onto 1 remote one, pushed 1 event"
    ]
    assert [s.event.seq for s in EventLog(m.b).read(SLUG)] == [1, 2, 3]


def test_build_branch_is_pushed_fast_forward_only(machines: Machines) -> None:
    m = machines
    create(m.a)
    git(m.a_path, "checkout", "-q", "-b", f"agentrun/{SLUG}")
    git(m.a_path, "commit", "-q", "--allow-empty", "-m", "work")
    assert lines(m.a) == [f"build {SLUG}: pushed 1 event; branch agentrun/{SLUG} pushed"]
    branch = f"refs/heads/agentrun/{SLUG}"
    assert remote_ref(m, branch) == str(m.a.head.target)
    lines(m.b)
    git(m.b_path, "fetch", "-q", "origin", f"{branch}:{branch}")
    git(m.b_path, "checkout", "-q", f"agentrun/{SLUG}")
    git(m.b_path, "commit", "-q", "--allow-empty", "-m", "b's work")
    git(m.a_path, "commit", "-q", "--allow-empty", "-m", "a's work")
    assert lines(m.a) == [f"build {SLUG}: up to date; branch agentrun/{SLUG} pushed"]
    out = lines(m.b)
    assert out == [
        f"build {SLUG}: up to date; conflicts: the remote's branch agentrun/{SLUG} has "
        "commits this clone lacks (not pushed; merge or rebase it, then sync again)"
    ]
    assert remote_ref(m, branch) == str(m.a.head.target)


def test_notes_from_both_machines_are_merged(machines: Machines) -> None:
    m = machines
    head = str(m.a.head.target)
    add_note(m.a, head, {"from": "a"})
    assert lines(m.a) == ["notes: pushed"]
    add_note(m.b, head, {"from": "b"})
    assert lines(m.b) == ["notes: merged and pushed"]
    assert lines(m.a) == ["notes: pulled"]
    facts = [{"from": "a"}, {"from": "b"}]
    assert sorted(read_notes(m.a, head), key=str) == facts
    assert sorted(read_notes(m.b, head), key=str) == facts
    assert remote_ref(m, NOTES_REF) == str(m.a.references[NOTES_REF].target)


def test_unknown_remote_and_shallow_clone_are_refused(machines: Machines, tmp_path: Path) -> None:
    with pytest.raises(SyncError, match=r"no remote named 'upstream' \(remotes here: origin\)"):
        sync(machines.a, "upstream")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", machines.remote.as_uri(), "shallow")
    with pytest.raises(SyncError, match="shallow"):
        sync(pygit2.Repository(str(shallow)), "origin")


def test_a_remote_lease_blocks_another_machine(machines: Machines) -> None:
    m = machines
    lease = claim_remote(m.a, "origin", SLUG, "runner-a", ttl=60, now=T0)
    ref = f"refs/agentrun/leases/{SLUG}"
    assert remote_ref(m, ref) == lease.oid
    with pytest.raises(LeaseHeldError, match="being run by runner-a"):
        claim_remote(m.b, "origin", SLUG, "runner-b", ttl=60, now=T0)
    lease.renew(now=T0)
    assert remote_ref(m, ref) == lease.oid
    assert lease.release()
    assert remote_ref(m, ref) is None
    taken = claim_remote(m.b, "origin", SLUG, "runner-b", ttl=60, now=T0)
    assert taken.info.holder == "runner-b"
    assert not lease.release()  # no longer ours: the lease refuses the delete
    assert remote_ref(m, ref) == taken.oid


def test_an_expired_remote_lease_is_taken_over(machines: Machines) -> None:
    m = machines
    old = claim_remote(m.a, "origin", SLUG, "runner-a", ttl=60, now=T0)
    later = T0 + timedelta(hours=1)
    taken = claim_remote(m.b, "origin", SLUG, "runner-b", ttl=60, now=later)
    assert taken.info.generation == old.info.generation + 1
    assert remote_ref(m, f"refs/agentrun/leases/{SLUG}") == taken.oid
    with pytest.raises(LeaseLostError, match="taken by another machine"):
        old.renew(now=later)
