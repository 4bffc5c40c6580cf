"""``refs/agentrun/memory``: the facts builds carry into later builds, as an event log.

It is a build log in all but its ref (:class:`MemoryLog`): one event per commit, appends
compare-and-swap with bounded retries (:mod:`agentrun.store.cas`), scrubbed of secrets
by the store like every event. Sync treats it like a build's log, except that re-parenting
local-only facts onto the remote's (:func:`reparent`) gives a local fact whose id the
remote already used the next free id, and drops one whose text the remote already holds;
the accepts and forgets that follow them are renumbered alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pygit2

from agentrun.errors import MalformedEventError
from agentrun.events import Event, MemoryAccepted, MemoryAdded, MemoryForgotten, encode
from agentrun.gitrepo import commit_at
from agentrun.kernel import memory
from agentrun.kernel.draft import Draft
from agentrun.kernel.memory import Fact
from agentrun.store import cas
from agentrun.store.log import EventLog, Stored, Tip, move_ref

MEMORY_REF = "refs/agentrun/memory"
NAME = "memory"  # the memory's "slug": what EventLog's methods take

Decide = Callable[[dict[str, Fact]], Sequence[Draft] | None]


class MemoryLog(EventLog):
    """The memory's event log: an ``EventLog`` whose one log lives at ``MEMORY_REF``."""

    def ref_of(self, slug: str) -> str:
        return MEMORY_REF


@dataclass(frozen=True)
class Read:
    tip: Tip | None
    facts: dict[str, Fact]


# Folds already read in this process, by tip: a log only grows, so a tip names its facts.
_FOLDS: dict[str, dict[str, Fact]] = {}


def read(repo: pygit2.Repository) -> Read:
    """The memory's tip and its facts (none when the ref does not exist)."""
    try:
        return _read(MemoryLog(repo))
    except MalformedEventError as exc:
        if MEMORY_REF in str(exc):
            raise  # it names the ref and the way out already
        raise MalformedEventError(
            f"{MEMORY_REF} is damaged: {exc} -- `git update-ref -d {MEMORY_REF}` drops "
            "it (a remote's copy comes back with `git agentrun sync`)"
        ) from None


def _read(log: MemoryLog) -> Read:
    tip = log.tip(NAME)
    if tip is None:
        return Read(None, {})
    facts = _FOLDS.get(tip.oid)
    if facts is None:
        facts = memory.fold(stored.event for stored in log.walk(tip.oid))
        _FOLDS[tip.oid] = facts
    return Read(tip, facts)


def append(repo: pygit2.Repository, decide: Decide, what: str) -> list[Stored]:
    """Append what ``decide`` returns for the facts at a fresh tip; re-decided on a lost
    race (nothing when it returns nothing)."""
    log = MemoryLog(repo)

    def attempt() -> list[Stored]:
        found = read(repo)
        drafts = decide(found.facts)
        if not drafts:
            return []
        return log.append(NAME, drafts, found.tip)[1]

    return cas.retry(attempt, what)


def reparent(log: EventLog, slug: str, ours: str, theirs: str, base: str) -> tuple[int, int, str]:
    """Re-create the memory's local events after ``base`` on top of ``theirs``.

    As ``store.sync.reparent`` does for a build, with the facts' ids kept unique: a local
    fact whose id the remote used takes the next free one, a local fact whose text the
    remote holds is dropped for the remote's, and later accepts and forgets follow.
    ``base`` is "" when the two logs were begun apart (each clone added its first fact
    before they synced): then every local event moves. Returns (local events moved,
    remote events they now follow, the new tip).
    """
    repo = log.repo
    joined = [stored.event for stored in log.walk(theirs)]
    parent, seq = theirs, joined[-1].seq
    renamed: dict[str, str] = {}
    mine = list(log.walk(ours, stop=base or None))
    for stored in mine:
        # Against the remote's facts and the local ones already moved: no id is used twice.
        event = _renumbered(stored.event, memory.fold(joined), renamed)
        if event is None:
            continue
        seq += 1
        event = event.model_copy(update={"seq": seq})
        commit = commit_at(repo, stored.oid)
        new = repo.create_commit(
            None,
            commit.author,
            commit.committer,
            encode(event),
            commit.tree_id,
            [pygit2.Oid(hex=parent)],
        )
        parent = str(new)
        joined.append(event)
    move_ref(repo, MEMORY_REF, parent, ours)
    onto = log.event_at(theirs).seq - (log.event_at(base).seq if base else 0)
    return len(mine), onto, parent


def _renumbered(event: Event, remote: dict[str, Fact], renamed: dict[str, str]) -> Event | None:
    """``event`` with the ids it names made to fit ``remote``'s (None: drop it)."""
    p = event.payload
    if isinstance(p, MemoryAdded):
        twin = memory.same_text(remote, p.text)
        if twin is not None:
            renamed[p.id] = twin.id
            if p.state == "accepted" and twin.state == "proposed":
                return event.model_copy(update={"payload": MemoryAccepted(id=twin.id, by=p.who)})
            return None
        if p.id in remote:
            renamed[p.id] = memory.next_id(remote)
        new_id = renamed.get(p.id, p.id)
        return event.model_copy(update={"payload": p.model_copy(update={"id": new_id})})
    if isinstance(p, MemoryAccepted | MemoryForgotten):
        moved = p.model_copy(update={"id": renamed.get(p.id, p.id)})
        return event.model_copy(update={"payload": moved})
    return event
