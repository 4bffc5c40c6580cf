"""Archiving finished builds (DESIGN §2).

``refs/agentrun/archive`` gains a merge commit per archived build whose second parent
is the build's last event, so the log stays reachable after its own ref is deleted and
the number of refs stays small.
"""

from __future__ import annotations

import json

import pygit2

from agentrun.errors import ConcurrentUpdateError
from agentrun.gitrepo import empty_tree, signature
from agentrun.kernel.graph import TASK_ID
from agentrun.store.cas import retry
from agentrun.store.lease import TASK_LEASES, clear_stale, task_key
from agentrun.store.log import build_ref, move_ref

ARCHIVE_REF = "refs/agentrun/archive"
MERGE_SUBJECT = "archive: merge"


def archive(repo: pygit2.Repository, slug: str, state_name: str) -> str:
    """Move build ``slug`` to the archive; returns its last event's oid."""
    ref = repo.references.get(build_ref(slug))
    if ref is None:
        raise ConcurrentUpdateError(f"build {slug} is not live (already archived?)")
    tip = str(ref.target)

    def step() -> None:
        current = repo.references.get(ARCHIVE_REF)
        sig = signature()
        # The chain starts at a root of its own, so that its first parents are all
        # archive commits and never wander into a build's log.
        first = (
            current.target
            if current is not None
            else repo.create_commit(None, sig, sig, "archive: root\n\n{}", empty_tree(repo), [])
        )
        parents = [first, pygit2.Oid(hex=tip)]
        message = f"archive: {slug}\n\n" + json.dumps(
            {"slug": slug, "tip": tip, "state": state_name}
        )
        oid = repo.create_commit(None, sig, sig, message, empty_tree(repo), parents)
        move_ref(repo, ARCHIVE_REF, str(oid), str(current.target) if current else None)

    retry(step, "the archive")
    live = repo.references.get(build_ref(slug))
    if live is not None and str(live.target) == tip:
        live.delete()
    # A live runner's lease (a task job's) is its to release; a stale one goes.
    for key in (slug, *task_lease_keys(repo, slug)):
        clear_stale(repo, key)
    return tip


def task_lease_keys(repo: pygit2.Repository, slug: str) -> list[str]:
    """The lease keys (``store.lease.task_key``) of build ``slug``'s task leases here."""
    folder = f"{TASK_LEASES}{slug}/"
    tasks = (name[len(folder) :] for name in repo.references if name.startswith(folder))
    return [task_key(slug, task) for task in sorted(tasks) if TASK_ID.fullmatch(task)]


def archived(repo: pygit2.Repository) -> dict[str, str]:
    """Archived builds: slug -> the oid of its last event.

    An archive commit's first parent is the archive before it (its second, the build's
    log); a merge of two machines' archives (``archive: merge``) follows both.
    """
    ref = repo.references.get(ARCHIVE_REF)
    if ref is None:
        return {}
    found: dict[str, str] = {}
    pending, seen = [str(ref.target)], set[str]()
    while pending:
        oid = pending.pop()
        if oid in seen:
            continue
        seen.add(oid)
        commit = repo.get(oid)
        if not isinstance(commit, pygit2.Commit):
            continue
        if commit.message.startswith(MERGE_SUBJECT):
            pending.extend(str(p) for p in commit.parent_ids)
            continue
        pending.extend(str(p) for p in commit.parent_ids[:1])
        _, _, body = commit.message.partition("\n\n")
        try:
            info = json.loads(body)
        except ValueError:
            continue
        if isinstance(info, dict) and "slug" in info and "tip" in info:
            found.setdefault(str(info["slug"]), str(info["tip"]))
    return found


def merge_archives(repo: pygit2.Repository, ours: str, theirs: str) -> str:
    """One archive holding both machines' archived builds (not moved onto any ref)."""
    sig = signature()
    parents = [pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)]
    return str(
        repo.create_commit(None, sig, sig, f"{MERGE_SUBJECT}\n\n{{}}", empty_tree(repo), parents)
    )
