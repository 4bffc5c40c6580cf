"""GitLab's answers as the forge protocol's values: a merge request as ``ProposalInfo``,
a note as ``Comment``, and review feedback as ``Review``.

Reviews: GitLab has no review object with an id: a reviewer's verdict is a state on the reviewer
(``GET …/merge_requests/:iid/reviewers``: ``requested_changes``, ``approved``, …), and
inline feedback is a thread on the diff, open until someone resolves it. So, from the
notes newer than the cursor (note ids grow across the instance):

- every note in an unresolved thread on the diff is an inline comment
  (``path:line: text``) of its author;
- a reviewer whose state is ``requested_changes`` has their new notes off the diff (the
  review's summary, GitLab's system note of the verdict) taken as the review's body;

and each author with any of those is one ``changes_requested`` review whose id is their
newest such note. A verdict with no note newer than the cursor was taken before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from agentrun.forge.base import Access, Comment, Issue, ProposalInfo, Review
from agentrun.forge.gitlab_site import is_draft, proposal_number, ready_title
from agentrun.refs import BRANCH_PREFIX

CHANGES_REQUESTED = "changes_requested"
# GitLab's access levels on the forge-neutral scale: the one table of who may do what.
ACCESS_LEVELS: dict[int, Access] = {
    0: Access.NONE,  # no access
    5: Access.NONE,  # minimal access: sees nothing of the project
    10: Access.READ,  # Guest
    15: Access.READ,  # Planner
    20: Access.TRIAGE,  # Reporter
    30: Access.WRITE,  # Developer
    40: Access.MAINTAIN,  # Maintainer
    50: Access.ADMIN,  # Owner
}


@dataclass
class _Feedback:
    id: int = 0
    body: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


def reviews_of(
    reviewers: list[dict[str, Any]], threads: list[dict[str, Any]], after_id: int
) -> list[Review]:
    """The reviews in ``reviewers`` (the reviewers endpoint) and ``threads`` (the
    discussions endpoint) newer than ``after_id``, oldest first."""
    requested = {
        username(r.get("user")) for r in reviewers if r.get("state") == "requested_changes"
    }
    found: dict[str, _Feedback] = {}
    for thread in threads:
        notes = [n for n in thread.get("notes") or () if isinstance(n, dict)]
        on_diff = any(n.get("type") == "DiffNote" for n in notes)
        unresolved = any(n.get("resolvable") and not n.get("resolved") for n in notes)
        for note in notes:
            note_id, author = int(note["id"]), username(note.get("author"))
            if note_id <= after_id:
                continue
            if on_diff and unresolved and not note.get("system"):
                entry = found.setdefault(author, _Feedback())
                entry.comments.append(f"{_where(note)}: {note.get('body') or ''}")
            elif author in requested and not on_diff:
                entry = found.setdefault(author, _Feedback())
                if not note.get("system"):
                    entry.body.append(str(note.get("body") or ""))
            else:
                continue
            entry.id = max(entry.id, note_id)
    reviews = [
        Review(
            id=entry.id,
            author=author,
            state=CHANGES_REQUESTED,
            body="\n\n".join(entry.body),
            comments=tuple(entry.comments),
        )
        for author, entry in found.items()
    ]
    return sorted(reviews, key=lambda r: r.id)


def _where(note: dict[str, Any]) -> str:
    found = note.get("position")
    position: dict[str, Any] = found if isinstance(found, dict) else {}
    path = position.get("new_path") or position.get("old_path") or "?"
    return f"{path}:{position.get('new_line') or position.get('old_line') or 0}"


def username(user: Any) -> str:
    return str(user.get("username") or "ghost") if isinstance(user, dict) else "ghost"


def proposal_info(data: dict[str, Any]) -> ProposalInfo:
    head = str(data.get("source_branch") or "")
    title = str(data.get("title") or "")
    found = data.get("state")
    state: Literal["open", "merged", "closed"] = (
        "open" if found == "opened" else "merged" if found == "merged" else "closed"
    )  # closed, or locked
    return ProposalInfo(
        number=proposal_number(int(data["iid"])),
        title=ready_title(title),
        body=str(data.get("description") or ""),
        head=head,
        base=str(data.get("target_branch") or ""),
        state=state,
        draft=bool(data.get("draft", is_draft(title))),
        url=str(data.get("web_url") or ""),
        build=head[len(BRANCH_PREFIX) :] if head.startswith(BRANCH_PREFIX) else None,
        head_sha=str(data["sha"]) if data.get("sha") else None,
    )


def access_of(level: int) -> Access:
    """A member's ``access_level`` on the scale: the highest role at or under it."""
    return max((a for lvl, a in ACCESS_LEVELS.items() if lvl <= level), default=Access.NONE)


def issue_of(data: dict[str, Any], number: int, is_proposal: bool) -> Issue:
    """An issue (or a merge request seen as one) under its forge ``number``."""
    return Issue(
        number=number,
        title=ready_title(str(data.get("title") or "")),
        body=str(data.get("description") or ""),
        author=username(data.get("author")),
        labels=tuple(str(label) for label in data.get("labels") or ()),
        is_proposal=is_proposal,
    )


def comment_of(data: dict[str, Any]) -> Comment:
    created = time_of(data.get("created_at"))
    return Comment(
        id=int(data["id"]),
        author=username(data.get("author")),
        body=str(data.get("body") or ""),
        created_at=created,
        updated_at=time_of(data.get("updated_at")) if data.get("updated_at") else created,
    )


def time_of(text: Any) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
