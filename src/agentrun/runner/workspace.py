"""The build's workspace: a git worktree on ``agentrun/<slug>`` (DESIGN §4, §12).

It lives in the user's cache folder (``gitrepo.worktrees_dir``), so the user's own
working tree and index are never touched. Its git dir is private (``isolation.gitdir``):
it borrows the repository's objects read-only, so agents commit without write access to
the repository's ``.git``. Each phase ends with exactly one phase commit whose parent is
the previous phase commit; commits the agent made itself are folded in.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun import gitcli
from agentrun.agent.context import SCRATCH, ensure_scratch
from agentrun.config import Config
from agentrun.errors import GuardError, RuntimeSetupError
from agentrun.gitrepo import (
    WALK_NEWEST_FIRST,
    blob_data,
    common_dir,
    signature,
    tree_at,
    worktrees_dir,
)
from agentrun.isolation import gitdir
from agentrun.runner.guards import (
    Rules,
    check_commit,
    check_diff,
    check_workdir,
    snapshot_rules,
    summary,
)
from agentrun.secrets import scrub

# The maintainers' own: agentrun's config and prompts steer every later build.
MAINTAINERS = (".agentrun/", ".agentrun.toml")
DISCARDED = "refs/agentrun/discarded/"
SCRATCH_PREFIX = SCRATCH.as_posix() + "/"


@dataclass(frozen=True)
class PhaseMark:
    """What the trailers of a phase commit say."""

    build: str
    phase: str
    round: int
    session: str | None
    subject: str
    task: str | None = None

    def message(self) -> str:
        subject = " ".join(scrub(self.subject).split())[:72] or "no changes"
        trailers = [
            f"Agentrun-Build: {self.build}",
            f"Agentrun-Phase: {self.phase}",
            f"Agentrun-Round: {self.round}",
        ]
        if self.task:
            trailers.append(f"Agentrun-Task: {self.task}")
        if self.session:
            trailers.append(f"Agentrun-Session: {self.session}")
        task = f" ({self.task})" if self.task else ""
        return f"{self.phase}@{self.round}{task}: {subject}\n\n" + "\n".join(trailers) + "\n"


class Workspace:
    def __init__(
        self, repo: pygit2.Repository, slug: str, branch: str, name: str | None = None
    ) -> None:
        """``name``: the worktree's own name, when it is not the build's (a task's)."""
        self.repo = repo
        self.slug = slug
        self.name = name or slug
        self.branch = branch
        self.branch_ref = f"refs/heads/{branch}"
        self.path = worktrees_dir(repo) / self.name
        self.gitdir = gitdir.path_of(repo, self.name)

    def prepare(self, head: str) -> Path:
        """Reset the branch and worktree to ``head``, discarding what a dead session left.

        Commits on the branch that the log does not know (a dead session's, or a
        person's) are not lost: the tip they were on is kept in
        ``refs/agentrun/discarded/<slug>``.
        """
        try:
            self._keep_unknown_tip(head)
            current = self.repo.references.get(self.branch_ref)
            if current is None or str(current.target) != head:
                self.repo.references.create(self.branch_ref, pygit2.Oid(hex=head), force=True)
            if not self.path.is_dir():
                self._add_worktree()
            elif (common_dir(self.repo) / "worktrees" / self.name).exists():
                self._forget_registration()
            gitdir.reset(self.repo, self.gitdir, self.path, self.branch_ref, head)
            if not self._untouched(head):
                self._git("reset", "-q", "--hard", head)
                self._git("clean", "-q", "-f", "-d")
        except (pygit2.GitError, OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            raise RuntimeSetupError(f"cannot prepare the worktree {self.path}: {detail}") from None
        ensure_scratch(self.path)
        return self.path

    def _untouched(self, head: str) -> bool:
        """Whether the worktree is already what ``git reset --hard HEAD`` and ``git clean
        -f -d`` would leave, so that neither needs to run (the phase before changed
        nothing, or committed all it changed): HEAD at ``head``, nothing staged, changed
        or untracked, and no folder for ``clean -d`` to remove. Anything else, or any
        doubt, is left to git."""
        try:
            wt = pygit2.Repository(str(self.gitdir))
            if str(wt.head.target) != head or wt.status(untracked_files="normal"):
                return False
            tracked = {""}
            for entry in wt.index:
                parts = entry.path.split("/")[:-1]
                tracked.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
            return not any(self._removable_below(wt, folder, tracked) for folder in tracked)
        except (pygit2.GitError, OSError, KeyError, ValueError):
            return False

    def _removable_below(self, wt: pygit2.Repository, folder: str, tracked: set[str]) -> bool:
        """Whether ``git clean -f -d`` could remove a folder below ``folder``: an untracked
        one that is not ignored and holds no file (status saw no untracked file, so any
        file in an untracked folder is ignored), or a nested repository."""
        with os.scandir(self.path / folder) as found:
            entries = list(found)
        if folder not in tracked and not entries:
            return True  # an empty untracked folder: `clean -d` removes it
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            below = f"{folder}/{entry.name}" if folder else entry.name
            if entry.name == ".git":
                return True
            if below in tracked or wt.path_is_ignored(below):
                continue
            if self._removable_below(wt, below, tracked):
                return True
        return False

    def _keep_unknown_tip(self, head: str) -> None:
        """Keep the branch's tip when it holds commits the log does not know.

        Not when one of those commits carries a secret by the build's guards (an agent's
        commit the guard refused, or anyone's): a ref would keep the secret, and carry it
        wherever ``refs/agentrun/`` goes. Nothing is kept then; the commits are left
        unreferenced for git's garbage collection.
        """
        current = self.repo.references.get(self.branch_ref)
        if current is None or str(current.target) == head:
            return
        if self.repo.descendant_of(head, current.target):
            return  # behind the log's head: nothing of its own to keep
        rules = snapshot_rules(self.repo, self.slug, os.environ) or Rules.of(Config(), os.environ)
        walker = self.repo.walk(current.target, WALK_NEWEST_FIRST)
        walker.hide(pygit2.Oid(hex=head))
        for commit in walker:
            if any(f.line is not None for f in check_commit(self.repo, commit, rules)):
                return
        kept = f"{DISCARDED}{self.name}"
        self.repo.references.create(kept, current.target, force=True)

    def _add_worktree(self) -> None:
        # Whatever stands at the path goes: a folder, a file, a symlink (the worktree is
        # re-made from the log's head, so nothing of value is lost).
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path)
        elif self.path.exists() or self.path.is_symlink():
            self.path.unlink()
        self._forget_registration()
        self.path.mkdir(parents=True)

    def _forget_registration(self) -> None:
        """A worktree of an earlier release was registered with `git worktree add`."""
        with contextlib.suppress(KeyError, pygit2.GitError):
            self.repo.lookup_worktree(self.name).prune(True)

    def _git(self, *args: str) -> str:
        return gitcli.run(args, cwd=self.path, check=True).stdout

    def start_merge(self, base: str) -> tuple[str, ...]:
        """Merge ``base`` into the worktree without committing; the paths left in conflict."""
        try:
            self._git("merge", "--no-commit", "--no-ff", "--no-edit", base)
        except subprocess.CalledProcessError as exc:
            unmerged = ("diff", "--no-ext-diff", "--name-only", "--diff-filter=U")
            conflicted = self._git(*unmerged).split()
            if not conflicted:
                detail = (exc.stderr or exc.stdout or "").strip()
                raise RuntimeSetupError(
                    f"cannot merge {base[:10]} into {self.path}: {detail}"
                ) from None
            return tuple(sorted(conflicted))
        return ()

    def commit_phase(
        self, parent: str, mark: PhaseMark, *, config: Config, merge: str | None = None
    ) -> str:
        """The phase commit: the worktree as ``git add -A`` sees it, minus the scratch folder.

        Raises ``GuardError`` (nothing committed) when the work changes ``.agentrun/``,
        plants a symlink that points outside the worktree, touches a protected path or
        adds a secret (``config``'s ``protect`` and ``secrets``: the build's snapshot).
        With ``merge`` (reconcile), the commit also has that base as a parent, the work is
        judged against the base (whose own changes are the maintainers'), and conflict
        markers left in the tree refuse it.
        """
        rules = Rules.of(config, os.environ)
        # The agent may have planted hooks, `core.fsmonitor` or another `.git` file: the
        # runner's own git below must run none of it.
        gitdir.rearm(self.repo, self.gitdir, self.path)
        # Sees the agent's own objects (private) and the repository's (borrowed).
        wt = pygit2.Repository(str(self.gitdir))
        against = merge or parent
        try:
            self._check_agent_commits(wt, parent, rules, also_hide=merge)
            found = check_workdir(wt, tree_at(wt, against), rules, skip=(SCRATCH_PREFIX,))
            if found:
                raise GuardError(summary("the worktree", found))
            scratch: list[str] = []
            if merge is None and self._untouched(parent):
                tree = tree_at(wt, parent).id  # the phase changed nothing: its tree is the last
            else:
                self._git("add", "-A")
                index = wt.index
                index.read(True)
                scratch = [e.path for e in index if e.path.startswith(SCRATCH_PREFIX)]
                for path in scratch:
                    index.remove(path)
                tree = index.write_tree()
            self._check_tree(against, tree, "the worktree", rules, wt)
            if merge:
                self._check_resolved(against, tree, wt)
        except GuardError:
            # The agent may have moved the branch with commits of its own: a refused
            # phase leaves nothing of its work where it could be published.
            self.prepare(parent)
            raise
        # Only now, and only what the phase commit holds, enters the repository's objects.
        gitdir.copy_tree(wt, self.repo, tree)
        sig = signature()
        parents = [pygit2.Oid(hex=parent)] + ([pygit2.Oid(hex=merge)] if merge else [])
        oid = self.repo.create_commit(None, sig, sig, mark.message(), tree, parents)
        self.repo.references.create(self.branch_ref, oid, force=True)
        gitdir.reset(self.repo, self.gitdir, self.path, self.branch_ref, str(oid))
        if scratch or merge:
            # The index on disk is not the commit's tree: make it so. Otherwise the
            # `git add -A` above left it exactly the commit's tree already.
            self._git("reset", "-q", str(oid))
        return str(oid)

    def commit_empty(self, parent: str, mark: PhaseMark) -> str:
        """A phase commit that changes nothing (checks), so every phase ends with one."""
        sig = signature()
        tree = tree_at(self.repo, parent).id
        oid = self.repo.create_commit(
            None, sig, sig, mark.message(), tree, [pygit2.Oid(hex=parent)]
        )
        self.repo.references.create(self.branch_ref, oid, force=True)
        return str(oid)

    def _check_agent_commits(
        self, wt: pygit2.Repository, parent: str, rules: Rules, also_hide: str | None = None
    ) -> None:
        if wt.head_is_unborn:
            return
        head = wt.head.target
        if str(head) == parent:
            return
        walker = wt.walk(head, WALK_NEWEST_FIRST)
        walker.hide(pygit2.Oid(hex=parent))
        if also_hide:
            walker.hide(pygit2.Oid(hex=also_hide))  # the base's own commits are not the agent's
        for commit in walker:
            base = commit.parents[0].tree_id if commit.parents else tree_at(wt, parent).id
            self._check_tree(str(base), commit.tree_id, f"commit {str(commit.id)[:10]}", rules, wt)

    def _check_tree(
        self, parent: str, tree: pygit2.Oid, where: str, rules: Rules, wt: pygit2.Repository
    ) -> None:
        """``wt`` (the private git dir) holds the agent's objects as well as the repository's."""
        diff = tree_at(wt, parent).diff_to_tree(tree_at(wt, tree))
        for delta in diff.deltas:
            for side in (delta.old_file, delta.new_file):
                if side.path == MAINTAINERS[1] or side.path.startswith(MAINTAINERS[0]):
                    raise GuardError(
                        f"{where} changes {side.path}: agents may not change .agentrun/ or "
                        ".agentrun.toml (they belong to the maintainers)"
                    )
            new = delta.new_file
            if new.mode == pygit2.GIT_FILEMODE_LINK and delta.status != pygit2.GIT_DELTA_DELETED:
                target = blob_data(wt, new.id).decode("utf-8", "replace")
                joined = posixpath.normpath(posixpath.join(posixpath.dirname(new.path), target))
                if posixpath.isabs(target) or joined == ".." or joined.startswith("../"):
                    raise GuardError(
                        f"{where} adds {new.path}, a symlink pointing outside the worktree "
                        f"({target})"
                    )
        found = check_diff(wt, diff, rules)
        if found:
            raise GuardError(summary(where, found))

    def _check_resolved(self, base: str, tree: pygit2.Oid, wt: pygit2.Repository) -> None:
        """A merge commit must not keep conflict markers in what it changes."""
        diff = tree_at(wt, base).diff_to_tree(tree_at(wt, tree))
        for delta in diff.deltas:
            new = delta.new_file
            if delta.status == pygit2.GIT_DELTA_DELETED or new.mode == pygit2.GIT_FILEMODE_LINK:
                continue
            for line in blob_data(wt, new.id).splitlines():
                if line.startswith((b"<<<<<<< ", b">>>>>>> ")):
                    raise GuardError(
                        f"{new.path} still holds conflict markers: resolve every conflict "
                        "before `git agentrun agent done`"
                    )

    def changed_paths(self, base: str, head: str) -> tuple[str, ...]:
        diff = tree_at(self.repo, base).diff_to_tree(tree_at(self.repo, head))
        paths = {d.new_file.path for d in diff.deltas} | {d.old_file.path for d in diff.deltas}
        return tuple(sorted(paths))

    def scratch(self) -> Path:
        return self.path / SCRATCH
