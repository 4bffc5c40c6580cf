"""``git agentrun gc``: tidy up after finished builds (DESIGN §2 "Housekeeping", §9).

An archived build no longer needs its worktree, its build branch, the commits set
aside under ``refs/agentrun/discarded/<slug>``, its session slots or a stale lease. An
aborted or failed build (still live: ``retry`` may re-open it) gives up its worktree and
a merged branch; a runner makes both again if it runs on. A branch is merged when its
proposal was merged at that tip (squashed or not), or when its commits are on another
branch or remote-tracking ref. Any other branch (a proposal closed without merging,
never pushed) is kept and named: deleting it would lose work. Then refs are packed and
``git maintenance run --auto`` runs, because libgit2 never packs by itself.

The tasks of a build's task graph go the same way, each under its name
``<slug>--<id>``: its worktree and git dir, its branch (merged too when its proposal
was merged with the task's work in it), its discarded commits, its stale lease and,
once archived, the task processes' logs. The tasks are the graph's and every task the
log says started (a graph a later plan replaced); a task's name that another build
could have (its slug, or one of its tasks' names) is left alone.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from agentrun import gitcli
from agentrun.errors import AgentrunError
from agentrun.events import TaskStarted
from agentrun.gitrepo import common_dir, worktrees_dir
from agentrun.isolation import gitdir
from agentrun.isolation.homes import home_path
from agentrun.kernel.graph import TASK_ID
from agentrun.kernel.state import BuildState
from agentrun.kernel.tasks import branch_of
from agentrun.runner.candidates import CANDIDATES
from agentrun.runner.setup import marker_of
from agentrun.runner.slots import build_slots
from agentrun.runner.tasks import logs_dir
from agentrun.runner.workspace import DISCARDED
from agentrun.store.archive import archived, task_lease_keys
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import clear_stale, is_stale, lease_ref, read_lease
from agentrun.store.log import EventLog
from agentrun.store.transport import TRACKED

BRANCHES = "refs/heads/agentrun/"
# Where else a build branch's commits may live, so that deleting it loses nothing.
ELSEWHERE = ("refs/heads/", "refs/remotes/", TRACKED)


@dataclass
class GcResult:
    lines: list[str] = field(default_factory=list)
    kept: int = 0


@dataclass(frozen=True)
class _Build:
    """A build gc tidies: its slug, state (None: unreadable) and its tasks' names."""

    slug: str
    state: BuildState | None
    tasks: tuple[str, ...]  # <slug>--<id>: each task's worktree, git dir and branch


def gc(repo: pygit2.Repository, dry_run: bool = False) -> GcResult:
    """Remove what finished builds left behind; with ``dry_run``, only say what."""
    result = GcResult()
    log, cache = EventLog(repo), StateCache(repo)
    live = set(log.slugs())
    done = archived(repo)
    slugs = live | set(done)
    for slug, tip in sorted(done.items()):
        if slug not in live:
            state = _state(log, cache, slug, tip, result)
            build = _build(log, slug, tip, state, slugs, result)
            _tidy(repo, build, result, dry_run, archived_build=True)
    for slug in sorted(live):
        state = _state(log, cache, slug, None, result)
        if state is not None and state.status in ("aborted", "failed"):
            build = _build(log, slug, None, state, slugs, result)
            _tidy(repo, build, result, dry_run, archived_build=False)
        if state is not None and state.status != "running":
            _leases(repo, slug, result, dry_run)
    if not dry_run:
        _git(repo, "pack-refs", "--all")
        _git(repo, "maintenance", "run", "--auto")
        result.lines.append("packed refs")
    if not result.lines:
        result.lines.append("nothing to tidy")
    return result


def _state(
    log: EventLog, cache: StateCache, slug: str, tip: str | None, result: GcResult
) -> BuildState | None:
    try:
        return load_state(log, cache, slug, tip)[1]
    except AgentrunError as exc:
        result.lines.append(f"skipped build {slug}: {exc}")
        return None


def _build(
    log: EventLog,
    slug: str,
    tip: str | None,
    state: BuildState | None,
    slugs: set[str],
    result: GcResult,
) -> _Build:
    """The build and the names of its tasks: its graph's, and every task its log says
    started. A name that is another build's slug is that build's (left alone)."""
    ids = set[str]() if state is None else set(state.tasks)
    if state is not None:  # best-of-N candidates run in worktrees named the same way
        ids |= set(state.candidates) | {c.id for c in state.candidate_history}
    start = tip or log.tip_oid(slug)
    if state is not None and start is not None:
        with contextlib.suppress(AgentrunError):
            ids.update(
                s.event.payload.task
                for s in log.walk(start)
                if isinstance(s.event.payload, TaskStarted)
            )
    names = []
    for task in sorted(t for t in ids if TASK_ID.fullmatch(t)):
        name = branch_of(slug, task)
        other = _claimant(name, slug, slugs)
        if other is None:
            names.append(name)
        else:
            result.lines.append(
                f"left agentrun/{name} alone: build {other} may have it, not task {task} of {slug}"
            )
    return _Build(slug, state, tuple(names))


_CANDIDATE = re.compile(r"--c[0-9]+$")


def _always(tip: str) -> bool:
    return True


def _claimant(name: str, slug: str, slugs: set[str]) -> str | None:
    """Another build whose own name, or a task's, ``name`` could be (slugs may hold
    "--", task ids too: ``a``'s task ``b--c`` and ``a--b``'s task ``c`` share a name)."""
    for other in sorted(slugs - {slug}):
        rest = name.removeprefix(f"{other}--")
        if name == other or (rest != name and TASK_ID.fullmatch(rest)):
            return other
    return None


def _tidy(
    repo: pygit2.Repository, build: _Build, result: GcResult, dry_run: bool, archived_build: bool
) -> None:
    verb = "would remove" if dry_run else "removed"
    slug, state = build.slug, build.state
    for name in (slug, *build.tasks):
        _worktree(repo, name, result, dry_run)
    folder = home_path(repo, slug)  # the build's HOME (isolation), its tasks' too
    if folder.exists():
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
        result.lines.append(f"{verb} home {folder}")
    for name in build.tasks:
        # Before the build branch: while it is there, it holds a landed task's commits.
        merged = _landed_in_merged(repo, state)
        if archived_build and _CANDIDATE.search(name):
            merged = _always  # what no candidate ref keeps, once archived, nobody wants
        _branch(repo, name, merged, result, dry_run)
    _branch(repo, slug, lambda tip: _merged_at(state, tip), result, dry_run)
    if not archived_build:
        return  # a live build's own refs stay: `retry` may need them
    for name in (slug, *build.tasks):
        ref = repo.references.get(DISCARDED + name)
        if ref is not None:
            if not dry_run:
                ref.delete()
            result.lines.append(f"{verb} {DISCARDED + name}")
    kept = f"{CANDIDATES}{slug}/"
    for name in sorted(r for r in repo.references if r.startswith(kept)):
        if not dry_run:
            repo.references[name].delete()
        result.lines.append(f"{verb} {name}")
    for kind, folder in (("task logs", logs_dir(repo, slug)), ("slots", build_slots(repo, slug))):
        if folder.exists():
            if not dry_run:
                shutil.rmtree(folder, ignore_errors=True)
            result.lines.append(f"{verb} {kind} {folder}")
    _leases(repo, slug, result, dry_run)


def _worktree(repo: pygit2.Repository, name: str, result: GcResult, dry_run: bool) -> None:
    """A build's or task's worktree, what [setup] noted of it, and its private git dir."""
    verb = "would remove" if dry_run else "removed"
    path = worktrees_dir(repo) / name
    if path.exists():
        if not dry_run:
            _remove_worktree(repo, path)
        result.lines.append(f"{verb} worktree {path}")
    if not dry_run:
        marker_of(path).unlink(missing_ok=True)
    folder = gitdir.path_of(repo, name)
    if folder.exists():
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
        result.lines.append(f"{verb} git dir {folder}")


def _branch(
    repo: pygit2.Repository,
    name: str,
    merged: Callable[[str], bool],
    result: GcResult,
    dry_run: bool,
) -> None:
    """Delete ``agentrun/<name>`` if its tip is ``merged`` or kept elsewhere; else name it."""
    branch = repo.references.get(BRANCHES + name)
    if branch is None:
        return
    tip = str(branch.resolve().target)
    if merged(tip) or _kept_elsewhere(repo, BRANCHES + name, tip):
        if not dry_run:
            branch.delete()
        verb = "would remove" if dry_run else "removed"
        result.lines.append(f"{verb} branch agentrun/{name} (was {tip[:10]})")
    else:
        result.kept += 1
        result.lines.append(
            f"kept branch agentrun/{name}: its commits are on no other branch or "
            f"remote (delete it with `git branch -D agentrun/{name}`)"
        )


def _merged_at(state: BuildState | None, tip: str) -> bool:
    """The build's proposal was merged (a squash leaves no commit of the branch in the
    base) and the branch is still where the build left it."""
    proposal = None if state is None else state.proposal
    if state is None or proposal is None or not proposal.merged:
        return False
    return tip in (state.head, state.published_head)


def _landed_in_merged(repo: pygit2.Repository, state: BuildState | None) -> Callable[[str], bool]:
    """Whether a task branch's tip is in what the build's merged proposal took in."""

    def merged(tip: str) -> bool:
        proposal = None if state is None else state.proposal
        if state is None or proposal is None or not proposal.merged:
            return False
        heads = {h for h in (state.head, state.published_head) if h}
        return tip in heads or any(repo.descendant_of(h, tip) for h in heads)

    return merged


def _kept_elsewhere(repo: pygit2.Repository, own: str, tip: str) -> bool:
    """Another branch or remote-tracking ref holds ``tip`` (the same, or a descendant)."""
    target = pygit2.Oid(hex=tip)
    for name in repo.references:
        if name == own or not name.startswith(ELSEWHERE) or name.endswith("/HEAD"):
            continue
        ref = repo.references[name]
        with contextlib.suppress(pygit2.GitError, ValueError):
            other = ref.resolve().target
            if isinstance(other, pygit2.Oid) and (
                other == target or repo.descendant_of(other, target)
            ):
                return True
    return False


def _leases(repo: pygit2.Repository, slug: str, result: GcResult, dry_run: bool) -> None:
    """A finished build's lease and its tasks' that nobody holds any more (a runner or
    a task's job killed at the end); a live holder's stays."""
    for key in (slug, *task_lease_keys(repo, slug)):
        held = read_lease(repo, key)
        if held is None or not is_stale(held[1]):
            continue
        if dry_run:
            result.lines.append(f"would remove {lease_ref(key)}")
        elif clear_stale(repo, key):
            result.lines.append(f"removed {lease_ref(key)}")


def _remove_worktree(repo: pygit2.Repository, path: Path) -> None:
    done = _git(repo, "worktree", "remove", "--force", str(path))
    if done.returncode != 0:
        shutil.rmtree(str(path), ignore_errors=True)
    _git(repo, "worktree", "prune")


def _git(repo: pygit2.Repository, *args: str) -> subprocess.CompletedProcess[str]:
    where = common_dir(repo)
    return gitcli.run([f"--git-dir={where}", *args], cwd=where)
