"""The local forge: proposals as git refs, the embedded default (DESIGN §8).

Proposals live under ``refs/agentrun/pulls/<n>`` (see ``local_store``). Branches need no
publishing: they already live in this repository. ``merge`` and ``close`` stand in for
the buttons of a hosted forge, for ``git agentrun pulls``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

import pygit2
from pygit2.enums import SortMode

from agentrun.errors import ConcurrentUpdateError, ForgeError
from agentrun.forge.base import Comment, ProposalInfo, register
from agentrun.forge.branches import checked_out_in, git_in, tracked_changes
from agentrun.forge.local_store import (
    Record,
    StoredComment,
    create,
    numbers,
    read,
    to_comment,
    update,
)
from agentrun.gitrepo import common_dir, now_utc, signature
from agentrun.store.log import move_ref

STATUS_AUTHOR = "agentrun"


class LocalForge:
    """Proposals stored in the repository itself; no network, no account."""

    name = "local"

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo

    # --- the Forge protocol ------------------------------------------------

    def push_branch(self, branch: str, sha: str) -> None:
        """The branch is already here: check it is at ``sha`` and note it on its proposals."""
        tip = self._tip(branch)
        if tip is None:
            raise ForgeError(
                f"no branch {branch!r} in this repository: create it before publishing"
            )
        if tip != sha:
            raise ForgeError(
                f"branch {branch} is at {tip[:10]}, not {sha[:10]}: move it there first"
            )
        for record in self._records():
            if record.state == "open" and record.head == branch and record.head_sha != sha:
                update(self.repo, record.number, _with_head(branch, sha), f"pushed {sha[:10]}")

    def find_open(self, head: str) -> ProposalInfo | None:
        """The newest open proposal of branch ``head``."""
        for record in reversed(self._records()):
            if record.state == "open" and record.head == head:
                return record.info()
        return None

    def open_draft(
        self, title: str, body: str, head: str, base: str, build: str | None
    ) -> ProposalInfo:
        """Open a draft proposal of ``head`` into ``base``; both branches must exist here."""
        if head == base:
            raise ForgeError(f"a proposal needs two branches; head and base are both {head!r}")
        head_sha = self._tip(head)
        for branch, sha in ((head, head_sha), (base, self._tip(base))):
            if sha is None:
                raise ForgeError(f"no branch {branch!r} in this repository: create it first")
        existing = self.find_open(head)
        if existing is not None:
            # Hosted forges refuse a second open proposal for one head; so do we.
            raise ForgeError(f"proposal #{existing.number} is already open for {head}")
        now = now_utc()

        def make(number: int) -> Record:
            return Record(
                number=number,
                title=title,
                body=body,
                head=head,
                base=base,
                build=build,
                head_sha=head_sha,
                created_at=now,
                updated_at=now,
            )

        return create(self.repo, make).info()

    def get(self, number: int) -> ProposalInfo:
        """One proposal; ``ForgeError`` when there is none."""
        return read(self.repo, number)[1].info()

    def list(self) -> builtins.list[ProposalInfo]:
        """All proposals, newest first."""
        return [record.info() for record in reversed(self._records())]

    def update_body(self, number: int, body: str) -> None:
        """Replace the proposal's description."""

        def change(record: Record) -> Record:
            if record.body == body:
                return record
            return record.model_copy(update={"body": body, "updated_at": now_utc()})

        update(self.repo, number, change, "body updated")

    def upsert_status_comment(self, number: int, body: str) -> Comment:
        """Create the proposal's status comment once; afterwards edit it in place."""

        def change(record: Record) -> Record:
            now = now_utc()
            comments = builtins.list(record.comments)
            for i, old in enumerate(comments):
                if old.id == record.status_comment_id:
                    if old.body == body:
                        return record
                    comments[i] = old.model_copy(update={"body": body, "updated_at": now})
                    return record.model_copy(
                        update={"comments": tuple(comments), "updated_at": now}
                    )
            new = _new_comment(record, STATUS_AUTHOR, body)
            return record.model_copy(
                update={
                    "comments": (*record.comments, new),
                    "status_comment_id": new.id,
                    "updated_at": now,
                }
            )

        record = update(self.repo, number, change, "status comment")
        return next(to_comment(c) for c in record.comments if c.id == record.status_comment_id)

    def comment(self, number: int, body: str, author: str = "agentrun") -> Comment:
        """Add a comment; ids count up from 1 within a proposal."""

        def change(record: Record) -> Record:
            new = _new_comment(record, author, body)
            return record.model_copy(
                update={"comments": (*record.comments, new), "updated_at": new.created_at}
            )

        # The write is compare-and-swap on the record it was made from, so the last
        # comment of the stored record is ours.
        return to_comment(update(self.repo, number, change, f"comment by {author}").comments[-1])

    def comments_since(self, number: int, after_id: int) -> builtins.list[Comment]:
        """Comments with an id greater than ``after_id``, oldest first."""
        _, record = read(self.repo, number)
        return [
            to_comment(c) for c in sorted(record.comments, key=lambda c: c.id) if c.id > after_id
        ]

    def mark_ready(self, number: int) -> None:
        """Take an open proposal out of draft."""
        self._set_draft(number, False)

    def mark_draft(self, number: int) -> None:
        """Put an open proposal back into draft (while its build works on it again)."""
        self._set_draft(number, True)

    def _set_draft(self, number: int, draft: bool) -> None:
        def change(record: Record) -> Record:
            _require_open(record, "marked draft" if draft else "marked ready")
            if record.draft == draft:
                return record
            return record.model_copy(update={"draft": draft, "updated_at": now_utc()})

        update(self.repo, number, change, "back to draft" if draft else "ready for review")

    # --- what a hosted forge's buttons do ------------------------------------

    def merge(self, number: int, squash: str | None = None) -> str:
        """Merge the proposal's head into its base the way a forge would; returns the new base sha.

        Fast-forward when the base is an ancestor of the head, else a merge commit; with
        ``squash`` (the commit message), one commit on the base holding the merged tree.
        On a conflict, or when the checked-out base has uncommitted changes, nothing
        changes.
        """
        _, record = read(self.repo, number)
        _require_open(record, "merged")
        head = self._require_tip(record.head, number)
        base = self._require_tip(record.base, number)
        new = self._merged(record, base, head, squash)
        if new != base:
            self._advance(record.base, base, new)

        def change(current: Record) -> Record:
            _require_open(current, "merged")
            return current.model_copy(
                update={
                    "state": "merged",
                    "head_sha": head,
                    "merge_base": base,
                    "updated_at": now_utc(),
                }
            )

        update(self.repo, number, change, f"merged into {record.base} at {new[:10]}")
        return new

    def close(self, number: int) -> None:
        """Close the proposal without merging it."""

        def change(record: Record) -> Record:
            _require_open(record, "closed")
            return record.model_copy(update={"state": "closed", "updated_at": now_utc()})

        update(self.repo, number, change, "closed")

    def commits(self, number: int) -> builtins.list[tuple[str, str]]:
        """(sha, subject) of the commits in base..head, oldest first."""
        _, record = read(self.repo, number)
        head = self._tip(record.head, tracked=True) or record.head_sha
        if head is None or head not in self.repo:
            return []  # merged, its branch deleted and its commits pruned since
        walker = self.repo.walk(head, SortMode.TOPOLOGICAL | SortMode.REVERSE)
        base = self._tip(record.base, tracked=True)
        if base is not None:
            walker.hide(base)
        return [(str(c.id), c.message.split("\n", 1)[0]) for c in walker]

    # --- helpers -------------------------------------------------------------

    def _records(self) -> builtins.list[Record]:
        """Every proposal, oldest first."""
        return [read(self.repo, n)[1] for n in numbers(self.repo)]

    def _tip(self, branch: str, tracked: bool = False) -> str | None:
        """The branch's commit; ``tracked`` (to read, never to write): else as a remote's
        tracking branch has it, in a clone that never checked the branch out."""
        names = [f"refs/heads/{branch}"]
        names += [f"refs/remotes/{r}/{branch}" for r in self.repo.remotes.names() if tracked]
        found = next((r for n in names if (r := self.repo.references.get(n)) is not None), None)
        return None if found is None else str(found.resolve().target)

    def _require_tip(self, branch: str, number: int) -> str:
        tip = self._tip(branch)
        if tip is None:
            raise ForgeError(f"proposal #{number}: branch {branch!r} no longer exists")
        return tip

    def _merged(self, record: Record, base: str, head: str, squash: str | None) -> str:
        """The commit the base branch should point at once ``head`` is merged."""
        if base == head or self.repo.descendant_of(base, head):
            return base  # everything is in the base already
        sig = self._merger()
        if self.repo.descendant_of(head, base):
            if squash is None:
                return head
            tree = self.repo[head].peel(pygit2.Commit).tree_id
        else:
            index = self.repo.merge_commits(base, head)
            if index.conflicts is not None:
                raise ForgeError(_conflict_message(record, index))
            tree = index.write_tree(self.repo)
        if squash is not None:
            if tree == self.repo[base].peel(pygit2.Commit).tree_id:
                return base  # the proposal changes nothing: no empty commit
            return str(self.repo.create_commit(None, sig, sig, squash, tree, [base]))
        message = f"Merge proposal #{record.number} from {record.head}\n\n{record.title}\n"
        return str(self.repo.create_commit(None, sig, sig, message, tree, [base, head]))

    def diff(self, number: int, stat: bool = False) -> str:
        """The proposal's change against its base, as ``git diff base...head`` prints it
        (for a merged proposal: against the base it was merged into)."""
        _, record = read(self.repo, number)
        head = self._tip(record.head, tracked=True) if record.state == "open" else None
        head = head or record.head_sha
        merged = record.state == "merged"
        base = record.merge_base if merged else self._tip(record.base, tracked=True)
        if head is None or base is None:
            raise ForgeError(f"proposal #{number}: its branches are gone; nothing to compare")
        if gone := [sha for sha in (base, head) if sha not in self.repo]:
            raise ForgeError(
                f"proposal #{number}: commit {gone[0][:10]} is no longer in this repository "
                "(its branch was deleted and the commit pruned); nothing to compare"
            )
        args = ["diff", "--no-color", "--no-ext-diff", *(["--stat"] if stat else [])]
        return git_in(common_dir(self.repo), *args, f"{base}...{head}", "--", git_dir=True)

    def _merger(self) -> pygit2.Signature:
        """The user's identity, as a forge credits the person who pressed merge."""
        try:
            return self.repo.default_signature
        except (KeyError, pygit2.GitError):
            return signature()

    def _advance(self, branch: str, old: str, new: str) -> None:
        """Move ``branch`` from ``old`` to ``new``, and the working tree that has it checked out."""
        worktree = checked_out_in(self.repo, branch)
        if worktree is None:
            try:
                move_ref(self.repo, f"refs/heads/{branch}", new, old)
            except ConcurrentUpdateError:
                raise ForgeError(f"{branch} moved while merging; try again") from None
            return
        changed = tracked_changes(worktree)
        if changed:
            raise ForgeError(
                f"{branch} is checked out in {worktree} with uncommitted changes "
                f"({', '.join(changed[:3])}): commit or stash them, then merge again"
            )
        # git itself moves the branch, index and files together, and refuses (changing
        # nothing) when an untracked file is in the way.
        git_in(worktree, "merge", "--ff-only", "--quiet", new)


def _conflict_message(record: Record, index: pygit2.Index) -> str:
    conflicts = index.conflicts or ()
    paths = sorted({entry.path for triple in conflicts for entry in triple if entry is not None})
    fix = (
        f"`git agentrun reconcile {record.build}` merges it for you"
        if record.build
        else f"merge {record.base} into {record.head}, resolve, and retry"
    )
    return f"proposal #{record.number} conflicts with {record.base} in {', '.join(paths)}: {fix}"


def _require_open(record: Record, verb: str) -> Record:
    if record.state != "open":
        raise ForgeError(
            f"proposal #{record.number} is {record.state}: only an open one can be {verb}"
        )
    return record


def _new_comment(record: Record, author: str, body: str) -> StoredComment:
    now = now_utc()
    next_id = max((c.id for c in record.comments), default=0) + 1
    return StoredComment(id=next_id, author=author, body=body, created_at=now, updated_at=now)


def _with_head(branch: str, sha: str) -> Callable[[Record], Record]:
    def change(record: Record) -> Record:
        if record.state != "open" or record.head != branch:
            return record
        return record.model_copy(update={"head_sha": sha, "updated_at": now_utc()})

    return change


register("local", lambda repo, _stop_at: LocalForge(repo))  # nothing local waits
