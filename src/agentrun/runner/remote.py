"""A runner with a remote (DESIGN §2 "Leases and fencing", §4): the remote is the arbiter.

``claim`` takes the build's lease on the remote (a live holder elsewhere raises
``LeaseHeldError``) and brings the local log up to the remote's. ``boundary`` pushes the
build's new events, its branch, the notes and the renewed lease in one atomic push, each
ref compare-and-swap on the oid last seen: a runner whose lease was taken can no longer
append there. When the remote gained events meanwhile (an answer, a pause pushed from
elsewhere), they are fetched, our local-only events are re-parented onto them, and the
push is tried again. A thread renews the remote lease between boundaries, because a
phase may run far longer than the lease's TTL. ``close`` pushes what is left and
releases the lease.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun.config import load_config
from agentrun.errors import AgentrunError, LeaseLostError
from agentrun.runner.build import BuildHandle
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import lease_ref, renewal, tracked
from agentrun.store.log import EventLog, build_ref
from agentrun.store.remote_lease import RemoteLease, claim_remote
from agentrun.store.sync import build_updates
from agentrun.store.transport import RefUpdate, Remote, SyncError, last_line

# Pushes that lost the race to another runner of the build (its task runners push the
# same log) are tried again after a short, growing, random wait.
PUSH_TRIES = 12
PUSH_BACKOFF_SECONDS = 0.05


def configured_remote(repo: pygit2.Repository, slug: str) -> str | None:
    """``[sync] remote`` of the working tree's config, else of the build's own snapshot."""
    if repo.workdir:
        remote = load_config(Path(repo.workdir)).sync.remote
        if remote:
            return remote
    try:
        return load_state(EventLog(repo), StateCache(repo), slug)[1].config.sync.remote
    except AgentrunError:
        return None  # no such build here (yet): the runner says so itself


@dataclass(frozen=True)
class Pushed:
    """What one boundary did: events pushed, and whether remote events came in."""

    events: int
    pulled: bool


class RemoteRun:
    """The remote side of one runner: claim, push at each phase boundary, close."""

    def __init__(
        self,
        repo: pygit2.Repository,
        name: str,
        slug: str,
        holder: str,
        ttl: float,
        lease_key: str | None = None,
    ) -> None:
        """``lease_key``: the lease to hold (a task's, ``store.lease.task_key``); by default
        the build's own."""
        self.repo, self.name, self.slug, self.holder, self.ttl = repo, name, slug, holder, ttl
        self.key = lease_key or slug
        self.remote = Remote(repo, name)
        self.lease: RemoteLease | None = None
        self.lost: LeaseLostError | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.aborted = threading.Event()  # an abort request arrived through the remote
        self._thread: threading.Thread | None = None

    # --- claim ---------------------------------------------------------------------

    def claim(self, heartbeat_seconds: float) -> None:
        """Claim the build on the remote, then bring the local log up to the remote's."""
        self.lease = claim_remote(self.repo, self.name, self.key, self.holder, self.ttl)
        try:
            self.remote.fetch()
            if self.remote.seen(tracked(self.key)) != self.lease.oid:
                raise self._lost("right after it was claimed")
            build_updates(self.remote, self.slug)
        except BaseException:
            self.lease.release()
            raise
        self._thread = threading.Thread(
            target=self._beat, args=(heartbeat_seconds,), name="agentrun-remote-lease", daemon=True
        )
        self._thread.start()

    # --- boundaries ------------------------------------------------------------------

    def boundary(self, build: BuildHandle | None = None) -> Pushed:
        """Push the build's log, branch, notes and renewed lease in one atomic push.

        Raises ``LeaseLostError`` (nothing pushed, the local log left as it is) when
        another runner holds the lease now, and ``SyncError`` when the remote cannot be
        reached or keeps refusing.
        """
        with self._lock:
            if self.lost is not None:
                raise self.lost
            lease = self._held()
            pulled = False
            why = "no answer"
            for attempt in range(PUSH_TRIES):
                if attempt:
                    time.sleep(random.uniform(0, PUSH_BACKOFF_SECONDS * 2 ** min(attempt, 5)))
                found, updates = build_updates(self.remote, self.slug)
                pulled = pulled or bool(found.pulled or found.reparented)
                if found.reparented and build is not None:
                    # Our events were re-created on top of the remote's: read the log afresh.
                    build.tip, build.full = load_state(build.log, build.cache, self.slug)
                oid, info = renewal(self.repo, lease.info, self.ttl)
                done = self.remote.push([*updates, RefUpdate(lease_ref(self.key), oid, lease.oid)])
                if done is not None and done.returncode == 0:
                    self.remote.record(updates)
                    lease.oid, lease.info = oid, info
                    self.remote.record([RefUpdate(lease_ref(self.key), oid, None)])
                    return Pushed(found.pushed, pulled)
                why = last_line(done.stderr if done else "") or "no answer"
                # Someone moved a ref since we last saw it: look again before anything else.
                self.remote.fetch()
                if self.remote.seen(tracked(self.key)) != lease.oid:
                    raise self._lost("at a phase boundary")
            raise SyncError(
                f"{self.name} kept refusing the push of build {self.slug} ({why}); its events "
                f"are kept here: run `git agentrun resume {self.slug} --remote {self.name}` later"
            )

    def close(self, push: bool = True) -> None:
        """Stop renewing; push what is left (``push``), then release the lease."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        lease = self.lease
        if lease is None or self.lost is not None:
            return
        try:
            if push:
                self.boundary()
        finally:
            with self._lock:
                if self.lost is None and lease.release():
                    self.remote.record([RefUpdate(lease_ref(self.key), "", None)])

    # --- the lease ---------------------------------------------------------------------

    def _held(self) -> RemoteLease:
        assert self.lease is not None, "claim() first"
        return self.lease

    def _lost(self, when: str) -> LeaseLostError:
        self.lost = LeaseLostError(
            f"the lease on build {self.slug} at {self.name} was taken by another runner "
            f"({when}); stopping without pushing: this clone keeps its events"
        )
        return self.lost

    def _watch_for_abort(self, remote: Remote) -> None:
        """An abort pushed from elsewhere cancels the running session, as a local one does.

        The remote's log is fetched (its tracking ref is what the next boundary expects
        anyway); an abort request among the events this clone lacks sets ``aborted``.
        """
        ref = build_ref(self.slug)
        try:
            remote.git(
                "fetch",
                "--no-tags",
                "--quiet",
                self.name,
                f"+{ref}:{remote.tracking}builds/{self.slug}",
            )
        except SyncError:
            return  # out of reach: the next beat looks again
        theirs = remote.seen(f"builds/{self.slug}")
        log = EventLog(remote.repo)
        ours = log.tip_oid(self.slug)
        if theirs is None or ours is None or theirs == ours:
            return
        base = remote.repo.merge_base(ours, theirs)
        for stored in log.walk(theirs, stop=str(base) if base else None):
            if stored.event.type == "build.abort-requested":
                self.aborted.set()
                return

    def _beat(self, interval: float) -> None:
        """Renew the remote lease between boundaries; a refused renewal is checked first."""
        # pygit2 objects are not shared across threads: the beat uses its own handle.
        remote = Remote(pygit2.Repository(self.repo.path), self.name)
        while not self._stop.wait(interval):
            with self._lock:
                lease = self._held()
                oid, info = renewal(remote.repo, lease.info, self.ttl)
                ref = lease_ref(self.key)
                done = remote.push([RefUpdate(ref, oid, lease.oid)])
                if done is not None and done.returncode == 0:
                    lease.oid, lease.info = oid, info
                    self._watch_for_abort(remote)
                    continue
                try:
                    now = remote.ls(ref).get(ref)
                except SyncError:
                    continue  # the remote is out of reach: try again at the next beat
                if now != lease.oid:
                    self._lost("while a phase ran")
                    return
