"""Has the base branch moved so that the build no longer merges into it? (DESIGN §5)

Asked before a proposal is marked ready: a base that moved cleanly needs nothing (the
forge merges it); one that conflicts starts a ``reconcile`` phase, then verify again.
"""

from __future__ import annotations

import pygit2

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
