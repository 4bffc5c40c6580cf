"""Proposals of the local forge as refs: ``refs/agentrun/pulls/<n>`` (DESIGN §2, §8).

Each proposal is a chain of commits whose tree holds one blob, ``proposal.json``; every
change is a new commit on top of the last one. Writes are compare-and-swap through
``move_ref``: a lost race re-reads the proposal and applies the change again, so two
processes never overwrite each other's comments or get the same number.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal

import pygit2
from pydantic import BaseModel, ConfigDict, ValidationError

from agentrun.errors import ConcurrentUpdateError, ForgeError
from agentrun.forge.base import Comment, ProposalInfo
from agentrun.gitrepo import commit_at, signature
from agentrun.store.cas import retry
from agentrun.store.log import event_commit, move_ref

PULLS = "refs/agentrun/pulls/"
BLOB = "proposal.json"


class StoredComment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    author: str
    body: str
    created_at: datetime
    updated_at: datetime


class Record(BaseModel):
    """What ``proposal.json`` holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int
    title: str
    body: str
    head: str
    base: str
    state: Literal["open", "merged", "closed"] = "open"
    draft: bool = True
    build: str | None = None
    head_sha: str | None = None
    created_at: datetime
    updated_at: datetime
    status_comment_id: int | None = None
    comments: tuple[StoredComment, ...] = ()
    merge_base: str | None = None  # where the base was when the proposal was merged

    def info(self) -> ProposalInfo:
        return ProposalInfo(
            number=self.number,
            title=self.title,
            body=self.body,
            head=self.head,
            base=self.base,
            state=self.state,
            draft=self.draft,
            url=pull_url(self.number),
            build=self.build,
            head_sha=self.head_sha,
            comments=tuple(to_comment(c) for c in self.comments),
        )


def to_comment(stored: StoredComment) -> Comment:
    return Comment(stored.id, stored.author, stored.body, stored.created_at, stored.updated_at)


def pull_ref(number: int) -> str:
    return f"{PULLS}{number}"


def pull_url(number: int) -> str:
    return f"agentrun:pulls/{number}"


def numbers(repo: pygit2.Repository) -> list[int]:
    """The numbers of all proposals, ascending."""
    found = []
    for name in repo.references:
        if name.startswith(PULLS) and name[len(PULLS) :].isdigit():
            found.append(int(name[len(PULLS) :]))
    return sorted(found)


def read(repo: pygit2.Repository, number: int) -> tuple[str, Record]:
    """The proposal's tip commit id and record; ``ForgeError`` when there is none."""
    ref = repo.references.get(pull_ref(number))
    if ref is None:
        raise ForgeError(f"no proposal #{number}: `git agentrun pulls` lists them")
    commit = commit_at(repo, event_commit(repo, pull_ref(number), ref.target))
    try:
        blob = repo[commit.tree[BLOB].id].peel(pygit2.Blob)
        return str(commit.id), Record.model_validate_json(blob.data)
    except (KeyError, ValidationError):
        raise ForgeError(f"{pull_ref(number)} does not hold a proposal ({BLOB})") from None


def _commit(repo: pygit2.Repository, record: Record, parent: str | None, what: str) -> str:
    blob = repo.create_blob(record.model_dump_json(indent=2) + "\n")
    tree = repo.TreeBuilder()
    tree.insert(BLOB, blob, pygit2.GIT_FILEMODE_BLOB)
    sig = signature(record.updated_at)
    parents = [pygit2.Oid(hex=parent)] if parent else []
    message = f"pull #{record.number}: {what}\n"
    return str(repo.create_commit(None, sig, sig, message, tree.write(), parents))


def create(repo: pygit2.Repository, make: Callable[[int], Record]) -> Record:
    """Store a new proposal under the next free number (max existing + 1).

    The ref is created only if it does not exist yet (``move_ref`` with no old value),
    so two processes racing for a number cannot both win: the loser re-reads and takes
    the next one.
    """

    def claim() -> Record:
        number = max(numbers(repo), default=0) + 1
        record = make(number)
        move_ref(
            repo, pull_ref(number), _commit(repo, record, None, f"opened: {record.title}"), None
        )
        return record

    try:
        return retry(claim, "a new proposal number")
    except ConcurrentUpdateError as exc:
        raise ForgeError(f"{exc} (too many concurrent writers)") from None


def update(
    repo: pygit2.Repository, number: int, change: Callable[[Record], Record], what: str
) -> Record:
    """Apply ``change`` to the newest record and append it; re-read and re-apply on a race.

    ``change`` may raise (e.g. ``ForgeError`` for a proposal that is no longer open): it
    sees the current record every time, so its checks hold for what is written.
    """

    def step() -> Record:
        tip, current = read(repo, number)
        record = change(current)
        if record == current:
            return current  # nothing to record: keep the chain free of empty changes
        move_ref(repo, pull_ref(number), _commit(repo, record, tip, what), tip)
        return record

    try:
        return retry(step, f"proposal #{number}")
    except ConcurrentUpdateError as exc:
        raise ForgeError(str(exc)) from None
