"""Leases: who executes a build now (``refs/agentrun/leases/<slug>``, DESIGN §2, §12).

A lease is a commit whose message is JSON. It is acquired by creating the ref (it must
not exist), taken over from an expired or dead holder by compare-and-swap on the oid
seen, renewed by a heartbeat, and released by deleting the ref while it is still ours.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pygit2
from pydantic import BaseModel, ConfigDict, ValidationError

from agentrun import procs
from agentrun.errors import (
    ConcurrentUpdateError,
    LeaseHeldError,
    LeaseLostError,
    UnknownBuildError,
)
from agentrun.gitrepo import commit_at, empty_tree, now_utc, signature
from agentrun.kernel.graph import TASK_ID
from agentrun.store import lease_rule
from agentrun.store.lease_rule import SKEW_SECONDS as SKEW_SECONDS
from agentrun.store.lease_rule import TTL_SECONDS as TTL_SECONDS
from agentrun.store.lease_rule import lease_ttl as lease_ttl
from agentrun.store.log import check_slug, delete_ref, move_ref
from agentrun.store.transport import TRACKED

LEASES = "refs/agentrun/leases/"
TASK_LEASES = "refs/agentrun/task-leases/"
HEARTBEAT_SECONDS = 30.0


class LeaseInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    holder: str
    host: str
    boot_id: str
    pid: int
    pid_start: float
    agent_pgid: int | None = None
    generation: int
    expires_at: datetime

    def expired(self, now: datetime) -> bool:
        return lease_rule.expired(self, now)

    def holder_dead_here(self) -> bool:
        """The holder ran on this very machine (same boot) and is gone."""
        return lease_rule.dead_here(self)


def is_stale(info: LeaseInfo, now: datetime | None = None) -> bool:
    """Nobody holds this lease any more: it expired, or its holder died on this machine
    (the rule: store/lease_rule.py)."""
    return lease_rule.is_stale(info, now or now_utc())


def live_holder(info: LeaseInfo | None, now: datetime | None = None) -> LeaseInfo | None:
    """Who holds a lease (here, or as a remote says): ``info``, unless it is stale."""
    return None if info is None or is_stale(info, now) else info


@dataclass(frozen=True)
class Holder:
    """Who runs a build now, and where that is known from."""

    info: LeaseInfo
    remote: str | None = None  # the remote whose lease it is, as last fetched; None: here

    def name(self) -> str:
        where = f" (on {self.remote})" if self.remote else ""
        return f"{self.info.holder}@{self.info.host}{where}"


def held(
    repo: pygit2.Repository,
    slug: str,
    remotes: Sequence[str] | None = None,
    now: datetime | None = None,
) -> Holder | None:
    """Who runs build ``slug`` now: a live lease here, else a live lease a remote held when
    last fetched (``remotes``: only those; None: every remote of the repository)."""
    now = now or now_utc()
    local = read_lease(repo, slug)
    if local is not None and (info := live_holder(local[1], now)) is not None:
        return Holder(info)
    for remote in repo.remotes.names() if remotes is None else remotes:
        ref = repo.references.get(f"{TRACKED}{remote}/{tracked(slug)}")
        if ref is not None:
            info = live_holder(lease_info(repo, str(ref.target)), now)
            if info is not None:
                return Holder(info, remote)
    return None


def claim_info(
    slug: str, seen: LeaseInfo | None, holder: str, ttl: float, now: datetime, where: str = ""
) -> LeaseInfo:
    """The lease this process claims over ``seen`` (the one found, if any), a generation on.

    A live holder of ``seen`` raises ``LeaseHeldError`` naming it; ``where`` says whose
    word that is (a remote's).
    """
    old = live_holder(seen, now)
    if old is not None:
        raise LeaseHeldError(
            f"{named(slug)} is being run by {old.holder} on {old.host} (pid {old.pid}){where}; "
            f"its lease expires at {old.expires_at:%Y-%m-%d %H:%M:%S} UTC. Wait for it, or "
            "stop that runner."
        )
    me = procs.me()
    return LeaseInfo(
        holder=holder,
        host=me.host,
        boot_id=me.boot_id,
        pid=me.pid,
        pid_start=me.start,
        generation=seen.generation + 1 if seen else 1,
        expires_at=now + timedelta(seconds=ttl),
    )


def renewal(
    repo: pygit2.Repository, info: LeaseInfo, ttl: float, now: datetime | None = None
) -> tuple[str, LeaseInfo]:
    """The commit that renews ``info``: a generation on, expiring ``ttl`` seconds from now.

    Nothing moves: the caller swaps it in (a ref here, a push there) over the oid it holds.
    """
    info = info.model_copy(
        update={
            "generation": info.generation + 1,
            "expires_at": (now or now_utc()) + timedelta(seconds=ttl),
        }
    )
    return lease_commit(repo, info), info


def lease_commit(repo: pygit2.Repository, info: LeaseInfo) -> str:
    """The commit that records ``info`` (every lease, here or on a remote, is one)."""
    sig = signature()
    return str(repo.create_commit(None, sig, sig, info.model_dump_json(), empty_tree(repo), []))


def lease_ref(key: str) -> str:
    """The lease of a build (``key`` is its slug) or of one of its tasks (``slug/task``:
    ``refs/agentrun/task-leases/<slug>/<task>``, claimed by the job that runs the task)."""
    slug, sep, task = key.partition("/")
    if sep:
        if not TASK_ID.fullmatch(task):
            raise UnknownBuildError(f"{task!r} is not a task id")
        return f"{TASK_LEASES}{check_slug(slug)}/{task}"
    return LEASES + check_slug(slug)


def task_key(slug: str, task: str) -> str:
    """The lease key of task ``task`` of build ``slug``."""
    return f"{slug}/{task}"


def named(key: str) -> str:
    """What a lease key is, in words: ``build b`` or ``task t of build b``."""
    slug, sep, task = key.partition("/")
    return f"task {task} of build {slug}" if sep else f"build {slug}"


def tracked(key: str) -> str:
    """Where a fetch keeps a remote's lease ``key``, below the remote's tracking prefix."""
    return lease_ref(key).removeprefix("refs/agentrun/")


def read_lease(repo: pygit2.Repository, slug: str) -> tuple[str, LeaseInfo] | None:
    ref = repo.references.get(lease_ref(slug))
    if ref is None:
        return None
    oid = str(ref.target)
    return oid, lease_info(repo, oid)


def lease_info(repo: pygit2.Repository, oid: str) -> LeaseInfo:
    """The lease a commit holds; an unreadable one protects nothing (expired long ago)."""
    try:
        return LeaseInfo.model_validate_json(commit_at(repo, oid).message)
    except (ValidationError, ValueError, KeyError):
        return LeaseInfo(
            holder="unreadable",
            host="",
            boot_id="",
            pid=0,
            pid_start=0,
            generation=0,
            expires_at=datetime(1970, 1, 1, tzinfo=now_utc().tzinfo),
        )


@dataclass
class Lease:
    """A lease we hold. ``renew`` keeps it; a failed renew means another runner took it."""

    repo: pygit2.Repository
    slug: str
    oid: str
    info: LeaseInfo
    ttl: float = TTL_SECONDS
    taken_from: LeaseInfo | None = None

    def renew(self, agent_pgid: int | bool | None = False, now: datetime | None = None) -> None:
        """Extend the lease; ``agent_pgid`` (when given) records the agent's process group."""
        held = self.info
        if agent_pgid is not False:
            held = held.model_copy(update={"agent_pgid": agent_pgid})
        oid, info = renewal(self.repo, held, self.ttl, now)
        try:
            move_ref(self.repo, lease_ref(self.slug), oid, self.oid)
        except ConcurrentUpdateError:
            raise LeaseLostError(
                f"the lease on {self.slug} was taken by another runner; stopping"
            ) from None
        self.oid, self.info = oid, info

    def release(self) -> None:
        ref = self.repo.references.get(lease_ref(self.slug))
        if ref is not None and str(ref.target) == self.oid:
            ref.delete()


def acquire(
    repo: pygit2.Repository,
    slug: str,
    holder: str,
    ttl: float = TTL_SECONDS,
    now: datetime | None = None,
) -> Lease:
    """Claim the build, or raise ``LeaseHeldError`` naming the live holder."""
    seen, taken_from = read_lease(repo, slug) or (None, None)
    info = claim_info(slug, taken_from, holder, ttl, now or now_utc())
    oid = lease_commit(repo, info)
    try:
        move_ref(repo, lease_ref(slug), oid, seen)
    except ConcurrentUpdateError:
        raise LeaseHeldError(f"another runner claimed {named(slug)} at the same moment") from None
    return Lease(repo, slug, oid, info, ttl, taken_from)


def clear_stale(repo: pygit2.Repository, slug: str, now: datetime | None = None) -> bool:
    """Remove a lease nobody holds any more (expired, or its holder died here).

    A runner killed right after ``build.completed`` leaves its lease behind; ``resume``,
    ``sweep`` and ``gc`` call this for finished builds. The ref is deleted only if it
    still holds the lease that was judged stale (compare-and-swap).
    """
    seen = read_lease(repo, slug)
    if seen is None:
        return False
    oid, info = seen
    if not is_stale(info, now):
        return False
    try:
        delete_ref(repo, lease_ref(slug), oid)
    except ConcurrentUpdateError:
        return False  # someone claimed or renewed it meanwhile: theirs now
    return True


class Heartbeat:
    """Renews a lease every ``interval`` seconds in a thread; remembers if it was lost."""

    def __init__(self, lease: Lease, interval: float = HEARTBEAT_SECONDS) -> None:
        self.lease = lease
        self.interval = interval
        self.lost: LeaseLostError | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="agentrun-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def renew(self, agent_pgid: int | bool | None = False) -> None:
        with self._lock:
            if self.lost is not None:
                raise self.lost
            try:
                self.lease.renew(agent_pgid)
            except LeaseLostError as exc:
                self.lost = exc
                raise

    def check(self) -> None:
        if self.lost is not None:
            raise self.lost

    def _run(self) -> None:
        # pygit2 objects are not shared across threads: the beat uses its own handle.
        own = pygit2.Repository(self.lease.repo.path)
        while not self._stop.wait(self.interval):
            with self._lock:
                lease = self.lease
                beat = Lease(own, lease.slug, lease.oid, lease.info, lease.ttl)
                try:
                    beat.renew()
                except LeaseLostError as exc:
                    self.lost = exc
                    return
                lease.oid, lease.info = beat.oid, beat.info
