"""Sync with a remote (DESIGN §2): the remote is the arbiter between machines.

Fetch (``store/transport.py``), reconcile each build log locally (fast-forward, or
re-parent the local-only events onto the remote tip), merge the notes and the archive,
then push explicit refs in one ``--atomic`` push, each compare-and-swap on the oid seen:
a writer that moved a ref since our fetch makes the whole push fail and nothing is
overwritten. Leases on the remote are claimed the same way (``store/remote_lease.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pygit2

from agentrun.errors import AgentrunError
from agentrun.events import encode
from agentrun.gitrepo import commit_at
from agentrun.kernel.graph import TASK_ID
from agentrun.kernel.tasks import branch_of
from agentrun.store.archive import ARCHIVE_REF, archived, merge_archives
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import TASK_LEASES, is_stale, lease_info, lease_ref
from agentrun.store.log import EventLog, build_ref, move_ref
from agentrun.store.notes import NOTES_REF
from agentrun.store.transport import BRANCHES, RefUpdate, Remote, SyncError, last_line

PULLS = "refs/agentrun/pulls/"  # the local forge's proposals (forge/local_store.py)


@dataclass
class BuildSync:
    """What sync did to one build's log and branch."""

    slug: str
    pulled: int = 0
    pushed: int = 0
    reparented: int = 0
    onto: int = 0
    branch: str = ""  # "", "pushed", "behind", "diverged"
    tasks: list[str] = field(default_factory=list)  # the task branches pushed
    conflict: str = ""

    def lines(self) -> list[str]:
        if self.conflict:
            what = [f"conflicts: {self.conflict}"]
        elif self.reparented:
            what = [
                f"re-parented {_n(self.reparented, 'local event')} onto "
                f"{_n(self.onto, 'remote one')}, pushed {_n(self.pushed, 'event')}"
            ]
        elif self.pulled:
            what = [f"pulled {_n(self.pulled, 'event')}"]
        elif self.pushed:
            what = [f"pushed {_n(self.pushed, 'event')}"]
        else:
            what = ["up to date"]
        branch = f"agentrun/{self.slug}"
        what += {
            "": [],
            "pushed": [f"branch {branch} pushed"],
            "behind": [f"the remote's branch {branch} is ahead of ours (left as it is)"],
            "diverged": [
                f"conflicts: the remote's branch {branch} has commits this clone lacks "
                "(not pushed; merge or rebase it, then sync again)"
            ],
        }[self.branch]
        if self.tasks:
            what.append(f"task branches pushed: {', '.join(self.tasks)}")
        return [f"build {self.slug}: " + "; ".join(what)]


@dataclass
class SyncResult:
    remote: str
    builds: list[BuildSync] = field(default_factory=list)
    notes: str = ""  # "", "pulled", "merged", "pushed", "merged and pushed"
    archive: str = ""  # the same, for refs/agentrun/archive
    memory: str = ""  # what happened to refs/agentrun/memory ("": up to date)

    def lines(self) -> list[str]:
        found = [line for build in self.builds for line in build.lines()]
        if self.archive:
            found.append(f"archive: {self.archive}")
        if self.notes:
            found.append(f"notes: {self.notes}")
        if self.memory:
            found.append(f"memory: {self.memory}")
        return found or [f"up to date with {self.remote}"]


def _sync_archive(remote: Remote, updates: list[RefUpdate] | None) -> tuple[str, set[str]]:
    """Bring both archives together and retire the live logs of archived builds.

    The archives fast-forward either way or, when both sides archived builds, are joined
    by an ``archive: merge`` commit (only when ``updates`` can carry it to the remote).
    A live log, here or there, whose events the archive holds is deleted (compare-and-swap
    on the remote); one that gained events after it was archived stays live. A retired
    build's task leases there that nobody holds any more (a task's job killed at the end)
    go with it; its branches stay, as a build branch on a remote always does. Returns what
    happened to the archive and the slugs retired.
    """
    repo = remote.repo

    def join(ours: str, theirs: str) -> str:
        merged = merge_archives(repo, ours, theirs)
        move_ref(repo, ARCHIVE_REF, merged, ours)
        return merged

    done = _join(remote, ARCHIVE_REF, updates, join)
    gone = set[str]()
    theirs_logs = remote.seen_under("builds/")
    theirs_tasks = remote.seen_under(TASK_LEASES.removeprefix("refs/agentrun/"))
    for slug, tip in archived(repo).items():
        ref = build_ref(slug)
        live = repo.references.get(ref)
        if live is not None and _holds(repo, tip, str(live.target)):
            live.delete()
        remote_tip = theirs_logs.get(slug)
        retired_there = remote_tip is None or _holds(repo, tip, remote_tip)
        if remote_tip is not None and retired_there and updates is not None:
            updates.append(RefUpdate(ref, "", remote_tip))
        if repo.references.get(ref) is None and retired_there:
            gone.add(slug)
            if updates is not None:
                updates.extend(_stale_task_leases(repo, slug, theirs_tasks))
    return done, gone


def _stale_task_leases(
    repo: pygit2.Repository, slug: str, theirs: dict[str, str]
) -> list[RefUpdate]:
    """Deletions of build ``slug``'s task leases the remote holds (``theirs``: ``slug/id``
    -> oid, as fetched) that are stale, each compare-and-swap on the oid seen."""
    return [
        RefUpdate(lease_ref(key), "", oid)
        for key, oid in sorted(theirs.items())
        if key.partition("/")[0] == slug
        and TASK_ID.fullmatch(key.partition("/")[2])
        and is_stale(lease_info(repo, oid))
    ]


def _holds(repo: pygit2.Repository, archived_tip: str, log_tip: str) -> bool:
    """The archived log contains every event of ``log_tip``."""
    return archived_tip == log_tip or repo.descendant_of(archived_tip, log_tip)


def sync(repo: pygit2.Repository, remote_name: str) -> SyncResult:
    """Fetch, reconcile each build log, merge notes, push atomically; one attempt.

    A refused push (someone else pushed since our fetch) raises ``SyncError``: what was
    reconciled locally stays, and running sync again fetches their work and pushes ours.
    """
    remote = Remote(repo, remote_name)
    remote.check_namespaces()  # before anything here moves: a refusal leaves all as it was
    remote.fetch()
    result, updates = SyncResult(remote_name), list[RefUpdate]()
    result.archive, gone = _sync_archive(remote, updates)
    theirs_logs = {s: o for s, o in remote.seen_under("builds/").items() if s not in gone}
    theirs_branches = remote.seen_under("branches/")
    log = EventLog(repo)
    slugs = {s for s in log.slugs() if s not in gone} | set(theirs_logs)
    for slug in sorted(slugs):
        found = _sync_log(log, slug, theirs_logs.get(slug), updates)
        found.branch = _sync_branch(repo, slug, theirs_branches.get(slug), updates)
        found.tasks = _sync_task_branches(remote, slug, updates) if not found.conflict else []
        result.builds.append(found)
    result.notes = _sync_notes(remote, updates)
    result.memory = sync_memory(remote, updates)
    _sync_pulls(remote, updates)
    if updates:
        done = remote.push(updates)
        if done is None or done.returncode != 0:
            why = last_line(done.stderr if done else "") or "no answer"
            raise SyncError(
                f"{remote_name} refused the push ({why}); nothing there was overwritten "
                f"and this clone keeps what it merged: run `git agentrun sync {remote_name}` "
                "again"
            )
    return result


def build_updates(remote: Remote, slug: str) -> tuple[BuildSync, list[RefUpdate]]:
    """Reconcile one build with what ``remote`` held at the last fetch (or push).

    The local log is fast-forwarded, or its local-only events are re-parented onto the
    remote tip; the remote's notes are merged. Returns what happened and the updates a
    push needs (log, build branch, task branches, notes), each expecting the oid the
    remote was seen at.
    """
    updates = list[RefUpdate]()
    found = _sync_log(EventLog(remote.repo), slug, remote.seen(f"builds/{slug}"), updates)
    found.branch = _sync_branch(remote.repo, slug, remote.seen(f"branches/{slug}"), updates)
    found.tasks = _sync_task_branches(remote, slug, updates) if not found.conflict else []
    _sync_notes(remote, updates)
    sync_memory(remote, updates)
    _sync_pulls(remote, updates)
    return found, updates


def sync_memory(remote: Remote, updates: list[RefUpdate]) -> str:
    """``refs/agentrun/memory`` as a build's log is synced, its facts' ids kept unique
    (``store.memory.reparent``); what happened, in ``BuildSync``'s words ("": nothing)."""
    from agentrun.store.memory import NAME, MemoryLog
    from agentrun.store.memory import reparent as rejoin

    found = _sync_log(MemoryLog(remote.repo), NAME, remote.seen(NAME), updates, rejoin)
    line = found.lines()[0].removeprefix(f"build {NAME}: ")
    return "" if line == "up to date" else line


def _sync_pulls(remote: Remote, updates: list[RefUpdate]) -> None:
    """The local forge's proposals (chains of commits): fast-forward either way.

    A proposal both sides changed (or two clones that opened the same number) is left
    as it is on each side.
    """
    ours = {name[len(PULLS) :] for name in remote.repo.references if name.startswith(PULLS)}
    for number in sorted(ours | set(remote.seen_under("pulls/"))):
        _join(remote, PULLS + number, updates)


def pull(repo: pygit2.Repository, remote_name: str, slug: str | None = None) -> Remote:
    """Fetch, then bring the local logs (one build's, or every live one's) up to the remote.

    Nothing is pushed: local-only events wait, re-parented onto the remote tip, for the
    next sync or the runner's next phase boundary.
    """
    remote = Remote(repo, remote_name)
    remote.fetch()
    log = EventLog(repo)
    _, gone = _sync_archive(remote, None)
    if slug is not None:
        slugs = [slug]
    else:
        slugs = sorted((set(log.slugs()) | set(remote.seen_under("builds/"))) - gone)
    for name in slugs:
        theirs = remote.seen(f"builds/{name}")
        if theirs is not None or log.tip_oid(name) is not None:
            _sync_log(log, name, theirs, [])
    sync_memory(remote, [])
    _sync_pulls(remote, [])
    return remote


Rejoin = Callable[[EventLog, str, str, str, str], tuple[int, int, str]]


def _sync_log(
    log: EventLog,
    slug: str,
    theirs: str | None,
    updates: list[RefUpdate],
    rejoin: Rejoin | None = None,
) -> BuildSync:
    """Fast-forward either way, or re-parent our local-only events onto theirs (``rejoin``:
    how, by default ``reparent``); the push needed is queued in ``updates``."""
    repo, ref, found = log.repo, log.ref_of(slug), BuildSync(slug)
    ours = log.tip_oid(slug)
    if ours == theirs:
        return found
    if ours is None:
        assert theirs is not None
        move_ref(repo, ref, theirs, None)
        found.pulled = log.event_at(theirs).seq
        return found
    if theirs is None:
        found.pushed = log.event_at(ours).seq
        updates.append(RefUpdate(ref, ours, None))
        return found
    if repo.descendant_of(theirs, ours):
        move_ref(repo, ref, theirs, ours)
        found.pulled = log.event_at(theirs).seq - log.event_at(ours).seq
        return found
    if not repo.descendant_of(ours, theirs):
        base = repo.merge_base(ours, theirs)
        if base is None and rejoin is None:
            found.conflict = "the remote's log and this one share no history (left as they are)"
            return found
        # A rejoin takes logs begun apart on two clones (the memory's: anyone may start it).
        join = rejoin or reparent
        found.reparented, found.onto, ours = join(log, slug, ours, theirs, str(base or ""))
    found.pushed = log.event_at(ours).seq - log.event_at(theirs).seq
    updates.append(RefUpdate(ref, ours, theirs))
    return found


def reparent(log: EventLog, slug: str, ours: str, theirs: str, base: str) -> tuple[int, int, str]:
    """Re-create the events after ``base`` on ``ours`` on top of ``theirs``, seq renumbered.

    Each event keeps its actor, time, writer, payload and artifacts tree; the local ref
    moves compare-and-swap from ``ours`` to the new chain. Returns (local events moved,
    remote events they now follow, the new tip).
    """
    repo = log.repo
    parent, seq = theirs, log.event_at(theirs).seq
    mine = list(log.walk(ours, stop=base))
    for stored in mine:
        seq += 1
        commit = commit_at(repo, stored.oid)
        message = encode(stored.event.model_copy(update={"seq": seq}))
        new = repo.create_commit(
            None, commit.author, commit.committer, message, commit.tree_id, [pygit2.Oid(hex=parent)]
        )
        parent = str(new)
    move_ref(repo, log.ref_of(slug), parent, ours)
    return len(mine), log.event_at(theirs).seq - log.event_at(base).seq, parent


def _sync_branch(
    repo: pygit2.Repository, slug: str, theirs: str | None, updates: list[RefUpdate]
) -> str:
    """Push the build branch when the remote lacks it or has an ancestor of ours."""
    ref = BRANCHES + slug
    local = repo.references.get(ref)
    ours = None if local is None else str(local.resolve().target)
    if ours is None or ours == theirs:
        return ""
    if theirs is not None and not repo.descendant_of(ours, theirs):
        return "behind" if repo.descendant_of(theirs, ours) else "diverged"
    updates.append(RefUpdate(ref, ours, theirs))
    return "pushed"


def _sync_task_branches(remote: Remote, slug: str, updates: list[RefUpdate]) -> list[str]:
    """Push each task's branch (``agentrun/<slug>--<id>``) at the head the log gives it.

    A task may run on another machine than the one that lands it (a CI matrix job): the
    lander merges the commit the log names, so the branch goes in the same atomic push
    as the events that name it. The log decides where the branch is, not the local ref
    (which a session in flight moves, and a reset after a crash moves back); the
    compare-and-swap on the oid seen keeps whatever another writer pushed meanwhile.
    Returns the tasks whose branch is pushed.
    """
    repo = remote.repo
    try:
        state = load_state(EventLog(repo), StateCache(repo), slug)[1]
    except AgentrunError:
        return []  # the runner, or status, says what is wrong with this log
    pushed = []
    for task in state.tasks.values():
        if not task.head or pygit2.Oid(hex=task.head) not in repo:
            continue  # not started yet (or its commit never reached this clone)
        ref = f"refs/heads/{branch_of(state.branch, task.id)}"
        theirs = _oid(repo, remote.tracking_ref(ref))
        if theirs != task.head:
            updates.append(RefUpdate(ref, task.head, theirs))
            pushed.append(task.id)
    return pushed


def _sync_notes(remote: Remote, updates: list[RefUpdate]) -> str:
    """Merge the remote's notes into ours (``cat_sort_uniq``), then push ours if they differ."""

    def join(ours: str, theirs: str) -> str:
        tracked = remote.tracking_ref(NOTES_REF)
        remote.git("notes", "--ref", NOTES_REF, "merge", "-q", "-s", "cat_sort_uniq", tracked)
        return str(remote.repo.references[NOTES_REF].target)

    return _join(remote, NOTES_REF, updates, join)


def _join(
    remote: Remote,
    ref: str,
    updates: list[RefUpdate] | None,
    merge: Callable[[str, str], str] | None = None,
) -> str:
    """Bring a ref that only grows together with the remote's, as the last fetch saw it.

    Theirs fast-forwards ours; when both moved, ``merge(ours, theirs)`` joins them and
    moves the ref (only when ``updates`` can carry the join to the remote, and never
    without ``merge``); ours, when it is ahead, is queued in ``updates``. Returns what
    happened: "", "pulled", "merged", "pushed" or "pulled and pushed", "merged and pushed".
    """
    repo = remote.repo
    theirs, ours = _oid(repo, remote.tracking_ref(ref)), _oid(repo, ref)
    done = ""
    if theirs is not None and ours != theirs:
        if ours is None or repo.descendant_of(theirs, ours):
            move_ref(repo, ref, theirs, ours)
            done, ours = "pulled", theirs
        elif not repo.descendant_of(ours, theirs) and merge is not None and updates is not None:
            done, ours = "merged", merge(ours, theirs)
    ahead = ours is not None and (theirs is None or repo.descendant_of(ours, theirs))
    if ours is not None and ours != theirs and updates is not None and ahead:
        updates.append(RefUpdate(ref, ours, theirs))
        done = f"{done} and pushed" if done else "pushed"
    return done


def _oid(repo: pygit2.Repository, ref: str) -> str | None:
    found = repo.references.get(ref)
    return None if found is None else str(found.target)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
