"""Leases on a remote (DESIGN §2 "Leases and fencing"): two machines never run one build.

The lease ref is pushed with an empty expected value (the remote must not have it), or,
over an expired lease, with the oid seen; of two machines claiming at once, one wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pygit2

from agentrun.errors import LeaseHeldError, LeaseLostError
from agentrun.gitrepo import now_utc
from agentrun.store.lease import (
    TTL_SECONDS,
    LeaseInfo,
    claim_info,
    is_stale,
    lease_commit,
    lease_info,
    lease_ref,
    named,
    renewal,
    tracked,
)
from agentrun.store.transport import RefUpdate, Remote, SyncError, last_line


@dataclass
class RemoteLease:
    """A lease held on ``remote``: another machine's claim fails until it is released."""

    remote: Remote
    slug: str
    oid: str
    info: LeaseInfo
    ttl: float = TTL_SECONDS

    def renew(self, now: datetime | None = None) -> None:
        oid, info = renewal(self.remote.repo, self.info, self.ttl, now)
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
    where = Remote(repo, remote)
    ref = lease_ref(slug)
    seen, old = remote_lease(where, slug) or (None, None)
    info = claim_info(slug, old, holder, ttl, now or now_utc(), f", as {remote} says")
    oid = lease_commit(repo, info)
    done = where.push([RefUpdate(ref, oid, seen)])
    if done is None or done.returncode != 0:
        if where.ls(ref).get(ref) != seen:
            raise LeaseHeldError(
                f"another machine claimed {named(slug)} on {remote} at the same moment"
            )
        why = last_line(done.stderr if done else "") or "no answer"
        raise SyncError(f"could not claim {named(slug)} on {remote} ({why})")
    return RemoteLease(where, slug, oid, info, ttl)


def clear_stale_remote(where: Remote, slug: str, now: datetime | None = None) -> bool:
    """Delete ``slug``'s lease on the remote if nobody holds it any more.

    ``where`` was just fetched (``store.sync.pull``): the lease its fetch saw is judged,
    and deleted only if the remote still holds that one (compare-and-swap).
    """
    seen = where.seen(tracked(slug))
    if seen is None:
        return False
    if not is_stale(lease_info(where.repo, seen), now):
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
    kept = f"{where.tracking}{tracked(slug)}"
    where.git("fetch", "--no-tags", "--quiet", where.name, f"+{ref}:{kept}")
    return seen, lease_info(where.repo, seen)
