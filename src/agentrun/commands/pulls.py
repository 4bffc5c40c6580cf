"""``git agentrun pulls``: the local forge's proposals (DESIGN §9).

Merging or closing a proposal also finishes its build: a ``proposal.closed`` event goes
into the build's log and the build is archived (DESIGN §12, "finished is not closed").
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from agentrun.errors import ConcurrentUpdateError, ForgeError, UnknownBuildError
from agentrun.events import BuildCreated, HumanActor, ImplementCompleted, ProposalClosed
from agentrun.forge.base import ProposalInfo
from agentrun.forge.branches import git_in, tracked_changes
from agentrun.forge.local import LocalForge
from agentrun.gitrepo import user_login
from agentrun.kernel.draft import Draft
from agentrun.secrets import scrub
from agentrun.store.append import append_decided
from agentrun.store.archive import archive
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import held
from agentrun.store.log import EventLog

PULL_BRANCHES = "pulls/"  # where `pulls checkout N` puts proposal N's head
STATUS_RULE = "\n\n---\n\n"  # the local forge's body: description, rule, status


def list_pulls(repo: pygit2.Repository) -> list[ProposalInfo]:
    """Every proposal of the local forge, newest first."""
    return LocalForge(repo).list()


def show_pull(repo: pygit2.Repository, number: int) -> tuple[ProposalInfo, list[tuple[str, str]]]:
    """One proposal and the (sha, subject) of its commits, oldest first."""
    forge = LocalForge(repo)
    return forge.get(number), forge.commits(number)


def diff_pull(repo: pygit2.Repository, number: int, stat: bool = False) -> str:
    """The proposal's change against its base (``git diff base...head``, or its ``--stat``)."""
    return LocalForge(repo).diff(number, stat)


def checkout_pull(repo: pygit2.Repository, number: int) -> str:
    """Check out a local branch ``pulls/N`` at the proposal's head; returns its name.

    Not the build branch itself: the build's worktree holds that one, and later rounds
    keep moving it. Checking out again moves ``pulls/N`` on to the new head, unless it
    has commits of its own (then it is refused, and nothing changes).
    """
    info = LocalForge(repo).get(number)
    ref = repo.references.get(f"refs/heads/{info.head}")
    head = str(ref.resolve().target) if ref is not None else info.head_sha
    if head is None or head not in repo:
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
    branch = f"{PULL_BRANCHES}{number}"
    mine = repo.references.get(f"refs/heads/{branch}")
    if mine is not None and not repo.descendant_of(head, mine.target) and str(mine.target) != head:
        raise ForgeError(
            f"{branch} has commits that proposal #{number} does not: rename or delete it "
            f"(`git branch -m {branch} mine`), then check out again"
        )
    git_in(workdir, "checkout", "--quiet", "-B", branch, head)
    return branch


def merge_pull(
    repo: pygit2.Repository, number: int, force: bool = False, squash: bool = True
) -> str:
    """Merge the proposal into its base, then finish its build; returns the new base sha.

    By default the change lands as one commit (``squash``): the proposal's title, the
    build's summary and an ``Agentrun-Build`` trailer. A draft is not merged without
    ``force``: its build has not passed verification.
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
    sha = forge.merge(number, squash_message(repo, info) if squash else None)
    _finish_build(repo, forge.get(number), merged=True)
    return sha


def squash_message(repo: pygit2.Repository, info: ProposalInfo) -> str:
    """Subject: the proposal's title. Body: the build's summary (its goal and what the
    implementing agent said it did), then the ``Agentrun-Build`` trailer."""
    title = info.title.strip() or f"Proposal #{info.number}"
    lines = [title, ""]
    summary = _summary(repo, info)
    if summary == title or summary.startswith(title + "\n"):  # the goal's first line is
        summary = summary[len(title) :].strip()  # the title already: not twice
    if summary:
        lines += [summary, ""]
    if info.build:
        lines.append(f"Agentrun-Build: {info.build}")
    return scrub("\n".join(lines).rstrip() + "\n")  # it goes into git: no secrets


def _summary(repo: pygit2.Repository, info: ProposalInfo) -> str:
    if info.build is None or EventLog(repo).tip_oid(info.build) is None:
        # No build here: the description, without the status the local forge mirrors.
        return info.body.split(STATUS_RULE, 1)[0].strip()
    events = [stored.event.payload for stored in EventLog(repo).read(info.build)]
    goal = next((e.goal for e in events if isinstance(e, BuildCreated)), "")
    said = [e.summary_text for e in events if isinstance(e, ImplementCompleted) and e.summary_text]
    parts = [goal.strip(), *([said[-1].strip()] if said and said[-1].strip() != goal else [])]
    return "\n\n".join(p for p in parts if p)


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
    runner = held(repo, info.build, remotes=())
    if runner is not None:
        raise ForgeError(
            f"build {info.build} of #{info.number} is running ({runner.info.holder} on "
            f"{runner.info.host}): pause or abort it (`git agentrun abort {info.build}`), "
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
    try:
        # A human command is a request: re-appending it on a new tip is safe.
        append_decided(log, slug, lambda state: [draft], what=f"build {slug}")
    except UnknownBuildError:
        if log.tip_oid(slug) is None:
            return  # already archived (or never logged here): nothing left to finish
        raise
    _, state = load_state(log, StateCache(repo), slug)
    try:
        archive(repo, slug, state.state_name)
    except ConcurrentUpdateError:
        if log.tip_oid(slug) is not None:
            raise
        # Someone else archived it between our append and now: the goal is reached.
