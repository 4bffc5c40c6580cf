"""Build logs: one event per commit under ``refs/agentrun/builds/<slug>`` (DESIGN §2).

Appends are compare-and-swap: the ref is created with ``force=False`` or moved with
``Reference.set_target`` from the tip the caller saw; a moved tip or a held lock raises
``ConcurrentUpdateError`` and the caller re-reads and re-decides.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import pygit2

from agentrun import gitcli
from agentrun.errors import (
    ConcurrentUpdateError,
    DiskFullError,
    InvalidEventError,
    MalformedEventError,
    UnknownBuildError,
)
from agentrun.events import Event, check_payload, decode, encode
from agentrun.gitrepo import (
    EMPTY_TREE,
    WALK_NEWEST_FIRST,
    WALK_OLDEST_FIRST,
    blob_data,
    commit_at,
    common_dir,
    empty_tree,
    now_utc,
    signature,
    tree_at,
)
from agentrun.kernel.draft import Draft
from agentrun.secrets import scrub, scrub_bytes

BUILDS = "refs/agentrun/builds/"
ARTIFACTS = "artifacts"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
_ARTIFACT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")


def check_slug(slug: str) -> str:
    # No "--": a task's branch and worktree are <slug>--<task>, which another build's
    # slug must never be.
    bad = ".." in slug or "--" in slug or slug.endswith((".lock", "."))
    if not _SLUG.fullmatch(slug) or bad:
        raise UnknownBuildError(
            f"{slug!r} is not a build slug (lower-case letters, digits, '.', '_' and '-'; no '..' "
            "or '--')"
        )
    return slug


def build_ref(slug: str) -> str:
    return BUILDS + check_slug(slug)


def default_writer() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Tip:
    oid: str
    seq: int


@dataclass(frozen=True)
class Stored:
    oid: str
    event: Event


class EventLog:
    """Reads and appends the event logs of one repository."""

    def __init__(self, repo: pygit2.Repository, writer: str | None = None) -> None:
        self.repo = repo
        self.writer = writer or default_writer()
        # Not written here: a reader may sit where git metadata is read-only (a sandbox).
        self._empty_written = False

    # --- reading ---------------------------------------------------------

    def slugs(self) -> list[str]:
        return sorted(
            name[len(BUILDS) :] for name in self.repo.references if name.startswith(BUILDS)
        )

    def ref_of(self, slug: str) -> str:
        """The ref holding the log called ``slug`` (a build's; the memory's overrides it)."""
        return build_ref(slug)

    def tip_oid(self, slug: str) -> str | None:
        name = self.ref_of(slug)
        ref = self.repo.references.get(name)
        if ref is None:
            return None
        return event_commit(self.repo, name, ref.target)

    def tip(self, slug: str) -> Tip | None:
        oid = self.tip_oid(slug)
        if oid is None:
            return None
        return Tip(oid, self.event_at(oid).seq)

    def event_at(self, oid: str) -> Event:
        return decode(commit_at(self.repo, oid).message, oid[:12])

    def walk(self, tip: str, stop: str | None = None) -> Iterator[Stored]:
        """Events from the root (or after ``stop``) up to ``tip``, oldest first."""
        walker = self.repo.walk(tip, WALK_OLDEST_FIRST)
        walker.simplify_first_parent()
        previous = 0
        if stop is not None:
            walker.hide(stop)
            previous = self.event_at(stop).seq
        for commit in walker:
            oid = str(commit.id)
            event = decode(commit.message, oid[:12])
            if event.seq != previous + 1:
                # seq is the parent's + 1 (DESIGN §2): anything else was not appended here.
                raise MalformedEventError(
                    f"commit {oid[:12]} has seq {event.seq} after seq {previous}: "
                    "the build log was not written by agentrun"
                )
            previous = event.seq
            yield Stored(oid, event)

    def read(self, slug: str, tip: str | None = None) -> list[Stored]:
        start = tip or self.tip_oid(slug)
        if start is None:
            raise UnknownBuildError(
                f"no build named {slug!r}: `git agentrun status` lists the builds"
            )
        return list(self.walk(start))

    def artifact(self, tip: str, name: str) -> bytes | None:
        """The newest artifact called ``name`` in the chain ending at ``tip``."""
        walker = self.repo.walk(tip, WALK_NEWEST_FIRST)
        walker.simplify_first_parent()
        for commit in walker:
            if commit.tree_id == EMPTY_TREE:
                continue
            try:
                entry = commit.tree[f"{ARTIFACTS}/{name}"]
            except KeyError:
                continue
            return blob_data(self.repo, entry.id)
        return None

    def text(self, tip: str, name: str | None) -> str | None:
        """An artifact as text (``None`` when there is no such artifact, or no name)."""
        data = self.artifact(tip, name) if name else None
        return None if data is None else data.decode("utf-8", "replace")

    def artifact_names(self, tip: str) -> list[str]:
        names: list[str] = []
        for stored in self.walk(tip):
            tree = commit_at(self.repo, stored.oid).tree
            if ARTIFACTS in tree:
                names.extend(e.name or "" for e in tree_at(self.repo, tree[ARTIFACTS].id))
        return names

    # --- appending -------------------------------------------------------

    def append(
        self,
        slug: str,
        drafts: Sequence[Draft],
        expected: Tip | None,
        now: datetime | None = None,
    ) -> tuple[Tip, list[Stored]]:
        """Append ``drafts`` as one chain of commits and move the ref once, atomically.

        ``expected`` is the tip the caller decided from (``None``: the build must not exist).
        """
        name = self.ref_of(slug)
        ts = now or now_utc()
        sig = signature(ts)
        parent = expected.oid if expected else None
        seq = expected.seq if expected else 0
        stored: list[Stored] = []
        for draft in drafts:
            check_payload(draft.payload)
            seq += 1
            event = Event(
                seq=seq,
                ts=ts,
                actor=draft.actor,
                writer=self.writer,
                payload=draft.payload,
                task=draft.task,
            )
            tree = self._tree(draft.artifacts)
            parents = [pygit2.Oid(hex=parent)] if parent else []
            message = encode(event)
            clean = scrub(message)
            if clean != message:
                # A secret never becomes a git object; the caller sees what was stored.
                message, event = clean, decode(clean, "being appended")
            oid = self.repo.create_commit(None, sig, sig, message, tree, parents)
            parent = str(oid)
            stored.append(Stored(parent, event))
        if parent is None:
            raise InvalidEventError("nothing to append")
        self._move(name, parent, expected.oid if expected else None)
        return Tip(parent, seq), stored

    def _tree(self, artifacts: Mapping[str, bytes]) -> pygit2.Oid:
        if not artifacts:
            if not self._empty_written:
                empty_tree(self.repo)
                self._empty_written = True
            return EMPTY_TREE
        inner = self.repo.TreeBuilder()
        for art_name, data in sorted(artifacts.items()):
            if not _ARTIFACT.match(art_name):
                raise InvalidEventError(f"bad artifact name {art_name!r}")
            blob = self.repo.create_blob(scrub_bytes(data))
            inner.insert(art_name, blob, pygit2.GIT_FILEMODE_BLOB)
        outer = self.repo.TreeBuilder()
        outer.insert(ARTIFACTS, inner.write(), pygit2.GIT_FILEMODE_TREE)
        return outer.write()

    def _move(self, name: str, new: str, old: str | None) -> None:
        move_ref(self.repo, name, new, old)


def event_commit(repo: pygit2.Repository, name: str, target: pygit2.Oid | str) -> str:
    """``target`` of the ref ``name``, refused in one line unless it is a commit here."""
    oid = str(target)
    found = repo.get(oid)
    if isinstance(found, pygit2.Commit):
        return oid
    what = "a missing object" if found is None else f"a {found.type_str}"
    raise MalformedEventError(
        f"{name} points at {what} ({oid[:12]}), not at a commit: remove it with "
        f"`git update-ref -d {name}` (a remote's copy comes back with `git agentrun sync`)"
    )


NO_SPACE = "No space left on device"
# libgit2 may report a full disk only as a missing object or an unwritable lock file.
LOW_SPACE_BYTES = 64 * 1024


def disk_full(repo: pygit2.Repository, name: str, detail: object) -> DiskFullError | None:
    """The error to raise when a failed write of ``name`` came from a full disk."""
    said = (isinstance(detail, OSError) and detail.errno == errno.ENOSPC) or NO_SPACE in str(detail)
    if not said:
        try:
            said = shutil.disk_usage(common_dir(repo)).free < LOW_SPACE_BYTES
        except OSError:
            return None
    if not said:
        return None
    return DiskFullError(
        f"no space left on the device while writing {name}: nothing already recorded is "
        "lost; free some space and run the command again (`git agentrun resume SLUG` "
        "continues a build)"
    )


def move_ref(repo: pygit2.Repository, name: str, new: str, old: str | None) -> None:
    """Compare-and-swap a ref from ``old`` (None: it must not exist yet) to ``new``."""
    if old is None:
        _create_ref(repo, name, new)
        return
    try:
        ref = repo.references.get(name)
        if ref is None or str(ref.target) != old:
            raise ConcurrentUpdateError(f"{name} moved since it was read")
        ref.set_target(pygit2.Oid(hex=new))
    except (pygit2.GitError, OSError) as exc:
        full = disk_full(repo, name, exc)
        if full is not None:
            raise full from None
        # libgit2 reports a moved ref ("old reference value does not match") and a
        # held lock ("failed to lock file") alike: someone else is writing.
        raise ConcurrentUpdateError(f"{name}: {exc}") from None


def delete_ref(repo: pygit2.Repository, name: str, old: str) -> None:
    """Delete ``name`` only if it still points at ``old`` (checked under the ref's lock)."""
    where = common_dir(repo)
    done = gitcli.run([f"--git-dir={where}", "update-ref", "-d", name, old], cwd=where)
    if done.returncode != 0:
        full = disk_full(repo, name, done.stderr)
        if full is not None:
            raise full
        raise ConcurrentUpdateError(f"{name}: {done.stderr.strip() or 'moved'}")


def _create_ref(repo: pygit2.Repository, name: str, new: str) -> None:
    """Create ``name`` only if it does not exist, checked under the ref's lock.

    Not ``references.create(force=False)``: libgit2 checks that the ref is absent
    before it takes the lock, so two processes can both "create" it and the later
    write silently wins. git's ``update-ref`` with an empty old value checks under
    the lock. Creation is rare (a new build, lease or proposal), so the process is
    affordable here and nowhere else.
    """
    where = common_dir(repo)
    done = gitcli.run([f"--git-dir={where}", "update-ref", name, new, ""], cwd=where)
    if done.returncode != 0:
        full = disk_full(repo, name, done.stderr)
        if full is not None:
            raise full
        raise ConcurrentUpdateError(f"{name}: {done.stderr.strip() or 'already exists'}")
