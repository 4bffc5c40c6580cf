"""``status``: every build's summary from the summary index (store/summary.py), who runs
it now from its leases, and only what moved read from its log.

With every tip in the index, ``status`` lists the refs with git's plumbing and reads one
file (and the lease commits, if any): no pygit2, no pydantic, no psutil, no event model
is imported. A build
the index lacks at its tip (appended to behind the index's back, new, re-parented by a
sync) is read through the state cache (commands/inspect.py) and its line written back.
A build with a lease ref, here or as a remote was last fetched, has its lease commits
read with ``git cat-file`` and judged by store/lease_rule.py, the rule store/lease.py
uses: ``runner`` and ``stopped`` are always read live (DESIGN §13). A lease in a form
only pydantic can judge is asked of store/lease.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agentrun.store import summary as index

if TYPE_CHECKING:
    import pygit2

    from agentrun.store import lease_rule

JSON_SCHEMA = 1
STOPPED = "stopped"
# The refs status reads (their homes: store/log.py, archive.py, lease.py, transport.py;
# tests/cli/test_status_index.py holds them equal).
BUILDS = "refs/agentrun/builds/"
ARCHIVE_REF = "refs/agentrun/archive"
LEASES = "refs/agentrun/leases/"
TASK_LEASES = "refs/agentrun/task-leases/"
TRACKED = "refs/agentrun-remotes/"
# Variables that point git at another repository than the one the current folder is in
# (the one pygit2 opens for every other command).
ELSEWHERE = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def live_word(pure: str, holder: str | None) -> str:
    """A state as ``status`` names it: ``stopped`` where the log says running but no live
    runner holds it, so ``resume`` or ``sweep`` would continue it (DESIGN §13)."""
    return STOPPED if pure == "running" and holder is None else pure


class Row:
    """One build as ``status`` shows it: its index entry (store/summary.py) and what is
    read live — the state word, the runner, and each task's — laid over it."""

    __slots__ = ("archived", "entry", "runner", "state", "tasks")

    def __init__(self, entry: index.Entry, archived: bool, holders: Holders) -> None:
        self.entry, self.archived = entry, archived
        self.state, self.runner = entry["state"], None
        self.tasks: list[tuple[str, str | None]] = [(t[1], None) for t in entry["tasks"]]
        if archived:
            return  # shown as it was archived
        slug = entry["cells"][0]
        self.runner = holders.name(slug)
        if entry["status"] == "running":  # a finished build's tasks are not looked for
            runners = [holders.name(f"{slug}/{t[0]}") for t in entry["tasks"]]
        else:
            runners = [None] * len(self.tasks)
        someone = self.runner or next((r for r in runners if r is not None), None)
        self.state = live_word(self.state, someone)
        self.tasks = [
            (live_word(word, runner or self.runner), runner)
            for (word, _), runner in zip(self.tasks, runners, strict=True)
        ]

    def json_text(self) -> str:
        """The build's object in ``status --json``, as ``json.dumps(indent=2)`` puts it."""
        values = [_text(self.state), _text(self.runner), "true" if self.archived else "false"]
        for word, runner in self.tasks:
            values += [_text(word), _text(runner)]
        return index.row_text(self.entry, values)

    def created(self) -> datetime:
        created = self.entry["created_at"]
        return EPOCH if created is None else datetime.fromisoformat(created)


def _text(value: str | None) -> str:
    return "null" if value is None else json.dumps(value, ensure_ascii=False)


class Listing:
    __slots__ = ("rows", "unreadable")

    def __init__(self, rows: list[Row], unreadable: list[tuple[str, str]]) -> None:
        self.rows, self.unreadable = rows, unreadable  # unreadable: (slug, what is wrong)


def status_text(listing: Listing) -> str:
    """``status --json``: ``{"schema": 1, "builds": […], "unreadable": […]}``, printed as
    ``json.dumps(…, indent=2, ensure_ascii=False)`` would, from the encoded rows."""
    rows = ",\n    ".join(r.json_text() for r in listing.rows)
    builds = f"[\n    {rows}\n  ]" if rows else "[]"
    unreadable = json.dumps(unreadable_json(listing.unreadable), indent=2, ensure_ascii=False)
    return (
        f'{{\n  "schema": {JSON_SCHEMA},\n  "builds": {builds},\n'
        f'  "unreadable": {unreadable.replace(chr(10), chr(10) + "  ")}\n}}'
    )


def unreadable_json(unreadable: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The builds whose log cannot be read, as ``status --json`` and ``sweep --json`` list them."""
    return [{"slug": slug, "error": error} for slug, error in unreadable]


class Refs:
    """The refs of ``refs/agentrun`` and the remotes' leases, and the repository's
    common git folder; the pygit2 repository is opened only when something needs it."""

    def __init__(
        self, gitdir: str, tips: dict[str, str], cwd: str, opened: pygit2.Repository | None = None
    ) -> None:
        self.gitdir, self.cwd, self.opened = gitdir, cwd, opened
        self.tips = tips  # ref name -> oid

    def repo(self) -> pygit2.Repository:
        if self.opened is None:
            from agentrun.gitrepo import open_repo

            self.opened = open_repo(self.cwd)
        return self.opened


def read_refs(cwd: str) -> Refs:
    """The refs, from ``git for-each-ref``: a subprocess costs less than importing pygit2.

    Both commands are read-only plumbing that run no program a repository's config can
    name (no hook, pager, filter or network), so they go without gitcli's hardening, which
    reads the config through pygit2. Where git cannot list them (not a repository, one
    git does not trust), pygit2 opens the repository and says why in one line.
    """
    patterns = ["refs/agentrun", f"{TRACKED}*/leases/*", f"{TRACKED}*/task-leases/*/*"]
    try:  # both at once: the two processes overlap
        where = git(cwd, "rev-parse", "--path-format=absolute", "--git-common-dir")
        listed = git(cwd, "for-each-ref", "--format=%(objectname) %(refname)", *patterns)
        gitdir = where.communicate()[0].decode().strip()
        out = listed.communicate()[0].decode()
    except (OSError, UnicodeDecodeError):
        return _refs_of_repo(cwd)
    if where.returncode or listed.returncode or not gitdir:
        return _refs_of_repo(cwd)
    tips = {}
    for line in out.splitlines():
        oid, _, name = line.partition(" ")
        tips[name] = oid
    return Refs(gitdir, tips, cwd)


def git(cwd: str, *args: str, stdin: bool = False) -> subprocess.Popen[bytes]:
    """A git plumbing command that reads the repository of ``cwd`` (see ``read_refs``)."""
    return subprocess.Popen(
        ["git", *args],
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k not in ELSEWHERE},
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def _refs_of_repo(cwd: str) -> Refs:
    from agentrun.gitrepo import common_dir, open_repo

    repo = open_repo(cwd)
    tips = {
        name: str(repo.references[name].target)
        for name in repo.references
        if name.startswith(("refs/agentrun/", TRACKED))
    }
    return Refs(str(common_dir(repo)), tips, cwd, repo)


def leased(names: list[str]) -> set[str]:
    """The lease keys (``slug``, ``slug/task``) that some lease ref names, here or as a
    remote was last fetched; whether it is live is for ``Holders`` to say."""
    found = set()
    for name in names:
        if name.startswith(LEASES):
            found.add(name[len(LEASES) :])
        elif name.startswith(TASK_LEASES):
            found.add(name[len(TASK_LEASES) :])
        elif name.startswith(TRACKED):
            for kind in ("/task-leases/", "/leases/"):
                if kind in name:
                    found.add(name.rpartition(kind)[2])
                    break
    return found


Place = tuple[str, str, bool]  # slug, tip of its log, archived


def listing(cwd: str, include_archived: bool = True) -> Listing:
    """Every build (live ones, then archived ones), newest first, as ``status`` lists it."""
    refs = read_refs(cwd)
    folder = os.path.join(refs.gitdir, "agentrun")
    found = index.load(folder)
    live = sorted((n[len(BUILDS) :], oid) for n, oid in refs.tips.items() if n.startswith(BUILDS))
    places: list[Place] = [(slug, tip, False) for slug, tip in live]
    archive_tip = refs.tips.get(ARCHIVE_REF)
    archived = found.archived_at(archive_tip) if include_archived else []
    moved = archived is None
    if archived is None:
        from agentrun.store.archive import archived as archived_builds

        archived = list(archived_builds(refs.repo()).items())
    places += [(slug, tip, True) for slug, tip in archived]

    entries: list[tuple[str, index.Entry] | str] = []
    stale = []
    for n, (slug, tip, _) in enumerate(places):
        entry = found.entry(slug, tip)
        if entry is None:
            stale.append(n)
        entries.append("" if entry is None else (tip, entry))
    if stale:
        from agentrun.commands.logs import entries_of

        wanted = [(places[n][0], places[n][1] if places[n][2] else None) for n in stale]
        for n, read in zip(stale, entries_of(refs.repo(), wanted), strict=True):
            entries[n] = read
        fresh = [(places[n][0], *e) for n in stale if not isinstance(e := entries[n], str)]
    else:
        fresh = []
    if not include_archived:
        index.add(folder, fresh)  # the archived set was not read: keep it as it is
    elif fresh or moved or found.records > 2 * len(places) + 2:
        kept = [(p[0], *e) for p, e in zip(places, entries, strict=True) if not isinstance(e, str)]
        old = [(slug, tip) for slug, tip, was in places if was]
        index.rewrite(folder, kept, None if archive_tip is None else (archive_tip, old))

    holders = Holders(refs)
    rows, unreadable = [], []
    for (slug, _, was), read in zip(places, entries, strict=True):
        if isinstance(read, str):
            unreadable.append((slug, read))
        else:
            rows.append(Row(read[1], was, holders))
    rows.sort(key=Row.created, reverse=True)
    return Listing(rows, unreadable)


class Holders:
    """Who holds each lease key now. Only keys with a lease ref are looked for; their
    lease commits are read with one ``git cat-file`` and judged by store/lease_rule.py,
    as ``lease.held`` would: the lease here, then each remote's, remotes in the order
    pygit2 lists them. A key with a lease only pydantic can judge goes to ``held``."""

    def __init__(self, refs: Refs) -> None:
        self.refs = refs
        self.keys = leased([n for n in refs.tips if n.startswith((LEASES, TASK_LEASES, TRACKED))])
        self.remotes: list[str] | None = None  # None: not known (and read on first need)
        self.claims: dict[str, lease_rule.Seen | lease_rule.Unsure | None] = {}
        self.read = False

    def name(self, key: str) -> str | None:
        if key not in self.keys:
            return None
        from agentrun.store import lease_rule

        if not self.read:
            self._read()
        if self.remotes is None:
            return self._held(key)
        now = datetime.now(UTC)
        own = f"{TASK_LEASES if '/' in key else LEASES}{key}"
        tail = own.removeprefix("refs/agentrun/")
        places = [(own, ""), *((f"{TRACKED}{r}/{tail}", r) for r in self.remotes)]
        for ref, remote in places:
            oid = self.refs.tips.get(ref)
            if oid is None:
                continue
            claim = self.claims.get(oid, lease_rule.Unsure("not read"))
            if isinstance(claim, lease_rule.Unsure):
                return self._held(key)
            if claim is not None and not lease_rule.is_stale(claim, now):
                where = f" (on {remote})" if remote else ""
                return f"{claim.holder}@{claim.host}{where}"
        return None

    def _held(self, key: str) -> str | None:
        from agentrun.store.lease import held

        holder = held(self.refs.repo(), key)
        return None if holder is None else holder.name()

    def _read(self) -> None:
        """The remotes (when a remote's lease is there) and every lease commit."""
        self.read = True
        names = [n for n in self.refs.tips if n.startswith((LEASES, TASK_LEASES))]
        if any(n.startswith(TRACKED) for n in self.refs.tips):
            self.remotes = remote_names(self.refs.cwd)
            for remote in self.remotes or []:
                names += [n for n in self.refs.tips if n.startswith(f"{TRACKED}{remote}/")]
        else:
            self.remotes = []
        oids = sorted({self.refs.tips[n] for n in names})
        with contextlib.suppress(OSError, ValueError):  # unread: store/lease.py reads them
            self.claims.update(zip(oids, claims(self.refs.cwd, oids), strict=True))


def remote_names(cwd: str) -> list[str] | None:
    """The repository's remotes as pygit2 lists them (libgit2's ``git_remote_list``: every
    ``remote.<name>.url`` or ``.pushurl`` of the config, sorted, each once); None when git
    cannot say."""
    listed = git(cwd, "config", "-z", "--get-regexp", r"^remote\..*\.(push)?url$")
    out = listed.communicate()[0]
    if listed.returncode not in (0, 1):  # 1: no remote at all
        return None
    names = set()
    for item in out.split(b"\0"):
        key = item.partition(b"\n")[0].decode("utf-8", "surrogateescape")
        if key:
            names.add(key.removeprefix("remote.").rpartition(".")[0])
    return sorted(names)


def claims(cwd: str, oids: list[str]) -> list[lease_rule.Seen | lease_rule.Unsure | None]:
    """What each lease commit holds, from one ``git cat-file --batch``: a lease, None (it
    holds none: it protects nothing), or ``Unsure`` (for pydantic to say)."""
    from agentrun.store import lease_rule

    if not oids:
        return []
    batch = git(cwd, "cat-file", "--batch", stdin=True)
    out = batch.communicate("".join(f"{oid}\n" for oid in oids).encode())[0]
    if batch.returncode:
        raise OSError(f"git cat-file exited {batch.returncode}")
    found: list[lease_rule.Seen | lease_rule.Unsure | None] = []
    at = 0
    for _ in oids:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if header[-1] == b"missing":
            kind, raw, at = "missing", None, end + 1
        else:
            size = int(header[2])
            kind, raw, at = header[1].decode(), out[end + 1 : end + 1 + size], end + 2 + size
        try:
            found.append(lease_rule.read_claim(kind, raw))
        except lease_rule.Unsure as unsure:
            found.append(unsure)
    return found
