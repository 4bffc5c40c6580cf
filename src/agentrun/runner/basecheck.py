"""Has the base branch moved so that the build no longer merges into it? (DESIGN §5)

Asked before a proposal is marked ready: a base that moved cleanly needs nothing (the
forge merges it); one that conflicts starts a ``reconcile`` phase, then verify again.
And, before a build a push started runs at all: is its base commit on the remote?
"""

from __future__ import annotations

import pygit2

from agentrun.errors import AgentrunError
from agentrun.events import BaseMoved
from agentrun.kernel.state import BuildState
from agentrun.store.transport import TRACKED, Remote, SyncError


def base_tip(repo: pygit2.Repository, base_ref: str, remote: str | None) -> str | None:
    """Where the base branch is now: on ``remote`` when given (fetched), else here."""
    if remote:
        tracking = f"{TRACKED}{remote}/base/{base_ref}"
        try:
            Remote(repo, remote).git(
                "fetch", "--no-tags", "--quiet", remote, f"+refs/heads/{base_ref}:{tracking}"
            )
            return str(repo.references[tracking].target)
        except (SyncError, KeyError, pygit2.InvalidSpecError):
            pass  # not a branch there, or no answer: judge by what this clone has
    found = repo.references.get(f"refs/heads/{base_ref}")
    return None if found is None else str(found.resolve().target)


def base_moved(repo: pygit2.Repository, state: BuildState, remote: str | None) -> BaseMoved | None:
    """A ``base.moved`` event when the base's tip conflicts with the build's head."""
    tip = base_tip(repo, state.base_ref, remote)
    if tip is None or tip in (state.base_sha, state.reconcile_base) or not state.head:
        return None
    if repo.descendant_of(state.head, tip):
        return None  # the build already holds the base's tip
    index = repo.merge_commits(state.head, tip)
    if not index.conflicts:
        return None
    paths = {entry.path for conflict in index.conflicts for entry in conflict if entry is not None}
    return BaseMoved(base_sha=tip, conflicts=tuple(sorted(paths)))


def base_unpushed(repo: pygit2.Repository, state: BuildState, remote: str | None) -> str | None:
    """Why a build a push started cannot start yet: its base commit is not on the remote's
    base branch (the push was refused, or not made); None when it is, or when there is no
    remote to ask (a clone of nothing).

    The remote is the runner's, else the base branch's upstream, else ``origin``.
    """
    name = remote or _upstream(repo, state.base_ref)
    if not name:
        return None
    tracking = f"{TRACKED}{name}/base/{state.base_ref}"
    short, branch = state.base_sha[:10], state.base_ref
    try:
        Remote(repo, name).git(
            "fetch", "--no-tags", "--quiet", name, f"+refs/heads/{branch}:{tracking}"
        )
        tip = str(repo.references[tracking].target)
    except (AgentrunError, KeyError, pygit2.InvalidSpecError) as exc:
        why = f"{name} has no branch {branch}, or could not be asked ({exc})"
    else:
        try:
            if tip == state.base_sha or repo.descendant_of(tip, state.base_sha):
                return None
        except (KeyError, ValueError, pygit2.GitError):
            pass  # the commit is not even here
        why = f"commit {short} is not on {name}'s {branch}"
    return (
        f"build {state.slug} waits for its base: {why} (was the push refused?); push "
        f"{branch} again, then `git agentrun resume {state.slug}` or `git agentrun sweep`"
    )


def _upstream(repo: pygit2.Repository, branch: str) -> str:
    names = [n for n in repo.remotes.names() if n]
    try:
        configured = str(repo.config[f"branch.{branch}.remote"])
    except (KeyError, ValueError):
        configured = ""
    if configured in names:
        return configured
    return "origin" if "origin" in names else ""
