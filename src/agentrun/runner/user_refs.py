"""The user's own branches while agents run: agentrun never writes there, but without
isolation an agent can. A branch or HEAD that moved is said, and kept in the log, not
stopped: the person may have committed meanwhile themselves."""

from __future__ import annotations

import pygit2
from pygit2.enums import ReferenceFilter

from agentrun.events import ObservationRecorded
from agentrun.kernel.draft import Draft
from agentrun.runner.build import BuildHandle, Observer


def user_refs(repo: pygit2.Repository) -> dict[str, str]:
    """The user's own branches (outside ``agentrun/``) and what HEAD points at."""
    found = {}
    # Branches only: the log, lease and proposal refs (one of each per build) and tags
    # are not listed at all.
    for ref in repo.references.iterator(ReferenceFilter.BRANCHES):
        name = ref.name
        if name.startswith("refs/heads/") and not name.startswith("refs/heads/agentrun/"):
            found[name] = str(ref.target)
    head = repo.references.get("HEAD")
    if head is not None:
        found["HEAD"] = str(head.target)
    return found


def _short(target: str | None) -> str:
    if target is None:
        return "deleted"
    return target.removeprefix("refs/heads/") if target.startswith("refs/") else target[:10]


def report_moved(
    repo: pygit2.Repository,
    build: BuildHandle,
    observer: Observer,
    before: dict[str, str],
    phase: str,
) -> None:
    """A user branch or HEAD that moved while agents ran: said, and kept in the log.

    agentrun never writes there; without isolation an agent can. Not stopped: the
    person may have committed meanwhile themselves.
    """
    after = user_refs(repo)
    moved = [
        f"{name.removeprefix('refs/heads/')} ({_short(before.get(name))} -> "
        f"{_short(after.get(name))})"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]
    if not moved:
        return
    text = (
        f"during {phase}, {', '.join(moved)} moved; agentrun never writes there: "
        "check that the change is yours"
    )
    observer.warning(f"build {build.slug}: {text}")
    build.append([Draft(ObservationRecorded(phase=phase, text=text))])
