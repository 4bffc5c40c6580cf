"""Sync carries the archive: a build finished on one machine is finished on all of them."""

from __future__ import annotations

import pygit2
import test_sync
from test_sync import T0, Machines, remote_ref

from agentrun.events import BuildCreated, BuildPauseRequested, HumanActor
from agentrun.kernel.draft import Draft
from agentrun.store.archive import ARCHIVE_REF, archive, archived
from agentrun.store.log import EventLog
from agentrun.store.sync import sync

machines = test_sync.machines  # two clones of a bare remote (the fixture)


def new_build(repo: pygit2.Repository, slug: str) -> str:
    head = str(repo.head.target)
    created = BuildCreated(goal="g", base_ref="main", base_sha=head, branch=f"agentrun/{slug}")
    tip, _ = EventLog(repo, "w").append(slug, [Draft(created)], None, T0)
    return tip.oid


def test_a_build_archived_on_a_is_retired_on_the_remote_and_on_b(machines: Machines) -> None:
    m = machines
    new_build(m.a, "b-1")
    sync(m.a, "origin")
    sync(m.b, "origin")
    assert EventLog(m.b).tip_oid("b-1") is not None

    tip = archive(m.a, "b-1", "complete")
    pushed = sync(m.a, "origin")

    assert pushed.archive == "pushed"
    assert remote_ref(m, "refs/agentrun/builds/b-1") is None
    assert remote_ref(m, ARCHIVE_REF) == str(m.a.references[ARCHIVE_REF].target)
    pulled = sync(m.b, "origin")
    assert pulled.archive == "pulled"
    assert EventLog(m.b).tip_oid("b-1") is None
    assert archived(m.b) == {"b-1": tip}
    assert sync(m.b, "origin").lines() == ["up to date with origin"]


def test_both_machines_archiving_join_their_archives(machines: Machines) -> None:
    m = machines
    new_build(m.a, "b-1")
    new_build(m.b, "b-2")
    sync(m.a, "origin")
    sync(m.b, "origin")
    sync(m.a, "origin")
    archive(m.a, "b-2", "complete")
    archive(m.b, "b-1", "failed")
    sync(m.a, "origin")

    joined = sync(m.b, "origin")

    assert joined.archive == "merged and pushed"
    assert set(archived(m.b)) == {"b-1", "b-2"}
    sync(m.a, "origin")
    assert set(archived(m.a)) == {"b-1", "b-2"}
    assert EventLog(m.a).slugs() == []
    assert remote_ref(m, "refs/agentrun/builds/b-1") is None
    assert remote_ref(m, "refs/agentrun/builds/b-2") is None


def test_a_log_that_grew_after_it_was_archived_stays_live(machines: Machines) -> None:
    m = machines
    new_build(m.a, "b-1")
    sync(m.a, "origin")
    sync(m.b, "origin")
    log_b = EventLog(m.b, "w")
    log_b.append(
        "b-1", [Draft(BuildPauseRequested(), HumanActor(login="bob"))], log_b.tip("b-1"), T0
    )
    sync(m.b, "origin")  # the remote's log now has an event A's archive lacks
    archive(m.a, "b-1", "complete")

    sync(m.a, "origin")

    assert remote_ref(m, "refs/agentrun/builds/b-1") == EventLog(m.b).tip_oid("b-1")
    assert EventLog(m.a).tip_oid("b-1") == EventLog(m.b).tip_oid("b-1")
