"""``git agentrun pulls``: the local forge's proposals (DESIGN §9).

Merging or closing a proposal also finishes its build: a ``proposal.closed`` event goes
into the build's log and the build is archived (DESIGN §12, "finished is not closed").
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from agentrun.errors import ConcurrentUpdateError, ForgeError
from agentrun.events import HumanActor, ProposalClosed
from agentrun.forge.base import ProposalInfo
from agentrun.forge.local import LocalForge, git_in, tracked_changes
from agentrun.gitrepo import now_utc, user_login
from agentrun.store.archive import archive
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import read_lease
from agentrun.store.log import Draft, EventLog

_ATTEMPTS = 20


def list_pulls(repo: pygit2.Repository) -> list[ProposalInfo]:
    """Every proposal of the local forge, newest first."""
    return LocalForge(repo).list()


def show_pull(repo: pygit2.Repository, number: int) -> tuple[ProposalInfo, list[tuple[str, str]]]:
    """One proposal and the (sha, subject) of its commits, oldest first."""
    forge = LocalForge(repo)
    return forge.get(number), forge.commits(number)


def checkout_pull(repo: pygit2.Repository, number: int) -> str:
    """Check the proposal's head branch out in this working tree; returns the branch name."""
    info = LocalForge(repo).get(number)
    if repo.references.get(f"refs/heads/{info.head}") is None:
        raise ForgeError(f"proposal #{number}: branch {info.head!r} no longer exists")
    if repo.workdir is None:
        raise ForgeError("this repository has no working tree (bare): nothing to check out into")
    workdir = Path(repo.workdir)
    changed = tracked_changes(workdir)
    if changed:
        raise ForgeError(
            f"uncommitted changes to tracked files ({', '.join(changed[:3])}): "
            "commit or stash them, then check out again"
        )
    git_in(workdir, "checkout", "--quiet", info.head)
    return info.head


def merge_pull(repo: pygit2.Repository, number: int, force: bool = False) -> str:
    """Merge the proposal into its base, then finish its build; returns the new base sha.

    A draft is not merged without ``force``: its build has not passed verification.
    """
    forge = LocalForge(repo)
    info = forge.get(number)
    if info.state == "merged" and _build_live(repo, info):
        # An earlier merge stopped before its build was archived: finish that instead.
        _finish_build(repo, info, merged=True)
        return _branch_tip(repo, info.base)
    _refuse_while_running(repo, info, "merge")
    if info.state == "open" and info.draft and not force:
        raise ForgeError(
            f"#{number} is still a draft: its build has not passed verification "
            "(`git agentrun pulls merge --force` merges it anyway)"
        )
    sha = forge.merge(number)
    _finish_build(repo, forge.get(number), merged=True)
    return sha


def close_pull(repo: pygit2.Repository, number: int) -> None:
    """Close the proposal without merging, then finish its build."""
    forge = LocalForge(repo)
    info = forge.get(number)
    if info.state == "closed" and _build_live(repo, info):
        _finish_build(repo, info, merged=False)
        return
    _refuse_while_running(repo, info, "close")
    forge.close(number)
    _finish_build(repo, forge.get(number), merged=False)


def _refuse_while_running(repo: pygit2.Repository, info: ProposalInfo, verb: str) -> None:
    """A build a runner is executing right now is not finished under its feet."""
    if info.build is None:
        return
    held = read_lease(repo, info.build)
    if held is not None and not held[1].expired(now_utc()) and not held[1].holder_dead_here():
        raise ForgeError(
            f"build {info.build} of #{info.number} is running ({held[1].holder} on "
            f"{held[1].host}): pause or abort it (`git agentrun abort {info.build}`), "
            f"then {verb} again"
        )


def _build_live(repo: pygit2.Repository, info: ProposalInfo) -> bool:
    return info.build is not None and EventLog(repo).tip_oid(info.build) is not None


def _branch_tip(repo: pygit2.Repository, branch: str) -> str:
    ref = repo.references.get(f"refs/heads/{branch}")
    if ref is None:
        raise ForgeError(f"branch {branch!r} no longer exists")
    return str(ref.resolve().target)


def _finish_build(repo: pygit2.Repository, info: ProposalInfo, merged: bool) -> None:
    if info.build is not None:
        finish_build(repo, info.build, info.number, merged, user_login(repo))


def finish_build(repo: pygit2.Repository, slug: str, number: int, merged: bool, login: str) -> None:
    """Record that the build's proposal was merged or closed, then archive the build.

    Finished is not closed (DESIGN §12): this is what closes it. Nothing happens when
    the build is no longer live here.
    """
    log = EventLog(repo)
    draft = Draft(ProposalClosed(number=number, merged=merged), actor=HumanActor(login=login))
    for _ in range(_ATTEMPTS):
        tip = log.tip(slug)
        if tip is None:
            return  # already archived (or never logged here): nothing left to finish
        try:
            log.append(slug, [draft], tip)
            break
        except ConcurrentUpdateError:
            # A human command is a request: re-appending on the new tip is safe.
            continue
    else:
        raise ConcurrentUpdateError(f"build {slug} kept moving; run this again")
    _, state = load_state(log, StateCache(repo), slug)
    try:
        archive(repo, slug, state.state_name)
    except ConcurrentUpdateError:
        if log.tip_oid(slug) is not None:
            raise
        # Someone else archived it between our append and now: the goal is reached.
