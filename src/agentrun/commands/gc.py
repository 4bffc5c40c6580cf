"""``git agentrun gc``: tidy up after finished builds (DESIGN §2 "Housekeeping", §9).

An archived build no longer needs its worktree, its build branch, the commits set
aside under ``refs/agentrun/discarded/<slug>`` or a stale lease. An aborted or failed
build (still live: ``retry`` may re-open it) gives up its worktree and a merged branch;
a runner makes both again if it runs on. A branch is merged when its proposal was
merged at that tip (squashed or not), or when its commits are on another branch or
remote-tracking ref. Any other branch (a proposal closed without merging, never
pushed) is kept and named: deleting it would lose work. Then refs are packed and
``git maintenance run --auto`` runs, because libgit2 never packs by itself.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from agentrun import gitcli
from agentrun.errors import AgentrunError
from agentrun.gitrepo import common_dir, worktrees_dir
from agentrun.isolation import gitdir
from agentrun.isolation.homes import home_path
from agentrun.kernel.state import BuildState
from agentrun.runner.setup import marker_of
from agentrun.runner.workspace import DISCARDED
from agentrun.store.archive import archived
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


def gc(repo: pygit2.Repository, dry_run: bool = False) -> GcResult:
    """Remove what finished builds left behind; with ``dry_run``, only say what."""
    result = GcResult()
    log, cache = EventLog(repo), StateCache(repo)
    live = set(log.slugs())
    for slug, tip in sorted(archived(repo).items()):
        if slug not in live:
            state = _state(log, cache, slug, tip, result)
            _tidy(repo, slug, state, result, dry_run, archived_build=True)
    for slug in sorted(live):
        state = _state(log, cache, slug, None, result)
        if state is not None and state.status in ("aborted", "failed"):
            _tidy(repo, slug, state, result, dry_run, archived_build=False)
        if state is not None and state.status != "running":
            _lease(repo, slug, result, dry_run)
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


def _tidy(
    repo: pygit2.Repository,
    slug: str,
    state: BuildState | None,
    result: GcResult,
    dry_run: bool,
    archived_build: bool,
) -> None:
    verb = "would remove" if dry_run else "removed"
    path = worktrees_dir(repo) / slug
    if path.exists():
        if not dry_run:
            _remove_worktree(repo, path)
        result.lines.append(f"{verb} worktree {path}")
    if not dry_run:
        marker_of(path).unlink(missing_ok=True)  # what [setup] noted of that worktree
    # The worktree's private git dir and the build's HOME (isolation) go with it.
    for kind, folder in (("git dir", gitdir.path_of(repo, slug)), ("home", home_path(repo, slug))):
        if folder.exists():
            if not dry_run:
                shutil.rmtree(folder, ignore_errors=True)
            result.lines.append(f"{verb} {kind} {folder}")
    branch = repo.references.get(BRANCHES + slug)
    if branch is not None:
        tip = str(branch.resolve().target)
        if _merged_at(state, tip) or _kept_elsewhere(repo, BRANCHES + slug, tip):
            if not dry_run:
                branch.delete()
            result.lines.append(f"{verb} branch agentrun/{slug} (was {tip[:10]})")
        else:
            result.kept += 1
            result.lines.append(
                f"kept branch agentrun/{slug}: its commits are on no other branch or "
                f"remote (delete it with `git branch -D agentrun/{slug}`)"
            )
    if not archived_build:
        return  # a live build's own refs stay: `retry` may need them
    ref = repo.references.get(DISCARDED + slug)
    if ref is not None:
        if not dry_run:
            ref.delete()
        result.lines.append(f"{verb} {DISCARDED + slug}")
    _lease(repo, slug, result, dry_run)


def _merged_at(state: BuildState | None, tip: str) -> bool:
    """The build's proposal was merged (a squash leaves no commit of the branch in the
    base) and the branch is still where the build left it."""
    proposal = None if state is None else state.proposal
    if state is None or proposal is None or not proposal.merged:
        return False
    return tip in (state.head, state.published_head)


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


def _lease(repo: pygit2.Repository, slug: str, result: GcResult, dry_run: bool) -> None:
    """A finished build's lease that nobody holds any more (a runner killed at the end)."""
    held = read_lease(repo, slug)
    if held is None or not is_stale(held[1]):
        return
    if dry_run:
        result.lines.append(f"would remove {lease_ref(slug)}")
    elif clear_stale(repo, slug):
        result.lines.append(f"removed {lease_ref(slug)}")


def _remove_worktree(repo: pygit2.Repository, path: Path) -> None:
    done = _git(repo, "worktree", "remove", "--force", str(path))
    if done.returncode != 0:
        shutil.rmtree(str(path), ignore_errors=True)
    _git(repo, "worktree", "prune")


def _git(repo: pygit2.Repository, *args: str) -> subprocess.CompletedProcess[str]:
    where = common_dir(repo)
    return gitcli.run([f"--git-dir={where}", *args], cwd=where)
