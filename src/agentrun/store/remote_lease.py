"""Leases on a remote (DESIGN §2 "Leases and fencing"): two machines never run one build.

The lease ref is pushed with an empty expected value (the remote must not have it), or,
over an expired lease, with the oid seen; of two machines claiming at once, one wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pygit2

from agentrun import procs
from agentrun.errors import LeaseHeldError, LeaseLostError
from agentrun.gitrepo import empty_tree, now_utc, signature
from agentrun.store.lease import TTL_SECONDS, LeaseInfo, is_stale, lease_info, lease_ref
from agentrun.store.sync import RefUpdate, Remote, SyncError, last_line


@dataclass
class RemoteLease:
    """A lease held on ``remote``: another machine's claim fails until it is released."""

    remote: Remote
    slug: str
    oid: str
    info: LeaseInfo
    ttl: float = TTL_SECONDS

    def renew(self, now: datetime | None = None) -> None:
        info = self.info.model_copy(
            update={
                "generation": self.info.generation + 1,
                "expires_at": (now or now_utc()) + timedelta(seconds=self.ttl),
            }
        )
        oid = lease_commit(self.remote.repo, info)
        done = self.remote.push([RefUpdate(lease_ref(self.slug), oid, self.oid)])
        if done is None or done.returncode != 0:
            raise LeaseLostError(
                f"the lease on {self.slug} at {self.remote.name} was taken by another "
                "machine (or the remote could not be reached); stopping"
            )
        self.oid, self.info = oid, info

    def release(self) -> bool:
        """Delete the lease on the remote if it is still ours; False if it was not."""
        done = self.remote.push([RefUpdate(lease_ref(self.slug), "", self.oid)])
        return done is not None and done.returncode == 0


def claim_remote(
    repo: pygit2.Repository,
    remote: str,
    slug: str,
    holder: str,
    ttl: float = TTL_SECONDS,
    now: datetime | None = None,
) -> RemoteLease:
    """Claim build ``slug`` on ``remote``, or raise ``LeaseHeldError`` naming the holder.

    The lease ref is pushed with an empty expected value (it must not exist there), or,
    over an expired lease, with the oid seen: of two machines claiming at once, one wins.
    """
    now = now or now_utc()
    where = Remote(repo, remote)
    ref = lease_ref(slug)
    found = remote_lease(where, slug)
    seen = found[0] if found else None
    if found is not None:
        old = found[1]
        if not is_stale(old, now):
            raise LeaseHeldError(
                f"build {slug} is being run by {old.holder} on {old.host} (pid {old.pid}), "
                f"as {remote} says; its lease expires at {old.expires_at:%Y-%m-%d %H:%M:%S} "
                "UTC. Wait for it, or stop that runner."
            )
    me = procs.me()
    generation = lease_info(repo, seen).generation + 1 if seen else 1
    info = LeaseInfo(
        holder=holder,
        host=me.host,
        boot_id=me.boot_id,
        pid=me.pid,
        pid_start=me.start,
        generation=generation,
        expires_at=now + timedelta(seconds=ttl),
    )
    oid = lease_commit(repo, info)
    done = where.push([RefUpdate(ref, oid, seen)])
    if done is None or done.returncode != 0:
        if where.ls(ref).get(ref) != seen:
            raise LeaseHeldError(
                f"another machine claimed build {slug} on {remote} at the same moment"
            )
        why = last_line(done.stderr if done else "") or "no answer"
        raise SyncError(f"could not claim build {slug} on {remote} ({why})")
    return RemoteLease(where, slug, oid, info, ttl)


def clear_stale_remote(where: Remote, slug: str, now: datetime | None = None) -> bool:
    """Delete ``slug``'s lease on the remote if nobody holds it any more.

    ``where`` was just fetched (``store.sync.pull``): the lease its fetch saw is judged,
    and deleted only if the remote still holds that one (compare-and-swap).
    """
    seen = where.seen(f"leases/{slug}")
    if seen is None:
        return False
    old = lease_info(where.repo, seen)
    if not is_stale(old, now):
        return False
    update = RefUpdate(lease_ref(slug), "", seen)
    done = where.push([update])
    if done is None or done.returncode != 0:
        return False
    where.record([update])
    return True


def remote_lease(where: Remote, slug: str) -> tuple[str, LeaseInfo] | None:
    """The lease ``where`` holds for ``slug`` (its commit fetched to read it), if any."""
    ref = lease_ref(slug)
    seen = where.ls(ref).get(ref)
    if seen is None:
        return None
    where.git("fetch", "--no-tags", "--quiet", where.name, f"+{ref}:{where.tracking}leases/{slug}")
    return seen, lease_info(where.repo, seen)


def lease_commit(repo: pygit2.Repository, info: LeaseInfo) -> str:
    sig = signature()
    return str(repo.create_commit(None, sig, sig, info.model_dump_json(), empty_tree(repo), []))
