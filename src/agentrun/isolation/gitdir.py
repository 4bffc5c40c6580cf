"""The worktree's private git directory: the agent's commits never touch the shared ``.git``.

Each build worktree's ``.git`` file points at ``.git/agentrun/gitdirs/<slug>``, a git
directory of its own that borrows the repository's objects read-only (``alternates``).
An agent commits there as in any repository; the runner resets it before every phase,
rewrites its configuration before each of its own git commands (an agent may have
planted hooks or ``core.fsmonitor`` there), and copies into the repository only the
objects of a phase commit that passed the guards. So a refused commit, and whatever it
carried, never reaches the repository's object store.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2

from agentrun.gitrepo import agentrun_dir, common_dir

KEEP = ("index",)  # survives a reset: a fresh index would make `git reset --hard` rewrite all


def path_of(repo: pygit2.Repository, slug: str) -> Path:
    return (agentrun_dir(repo) / "gitdirs" / slug).resolve()


def reset(
    repo: pygit2.Repository, gitdir: Path, worktree: Path, branch_ref: str, head: str
) -> None:
    """A fresh private git dir on ``branch_ref`` at ``head``; all an agent left is gone."""
    if gitdir.exists():
        for entry in gitdir.iterdir():
            if entry.name not in KEEP:
                _remove(entry)
    gitdir.mkdir(parents=True, exist_ok=True)
    (gitdir / "refs" / "tags").mkdir(parents=True)
    rearm(repo, gitdir, worktree)
    point(gitdir, branch_ref, head)


def rearm(repo: pygit2.Repository, gitdir: Path, worktree: Path) -> None:
    """Rewrite what decides which code git runs and where it looks; keep refs and objects."""
    for name in ("hooks", "info", "config.worktree", "commondir", "config"):
        _remove(gitdir / name)
    # The runner's own git writes the index and loose objects here: through a symlink an
    # agent planted, it would write wherever that points.
    index = gitdir / "index"
    if index.is_symlink() or index.is_dir():
        _remove(index)
    objects = gitdir / "objects"
    if objects.is_symlink() or (objects.exists() and not objects.is_dir()):
        objects.unlink()
    objects.mkdir(exist_ok=True)
    for entry in objects.iterdir():
        if entry.is_symlink() or (entry.is_dir() and any(p.is_symlink() for p in entry.iterdir())):
            _remove(entry)
    (objects / "info").mkdir(exist_ok=True)
    alternates = objects / "info" / "alternates"
    alternates.write_text(f"{common_dir(repo).resolve() / 'objects'}\n", encoding="utf-8")
    (gitdir / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
        f"\tlogallrefupdates = false\n\tworktree = {worktree}\n",
        encoding="utf-8",
    )
    gitfile = worktree / ".git"
    _remove(gitfile)
    gitfile.write_text(f"gitdir: {gitdir}\n", encoding="utf-8")


def point(gitdir: Path, branch_ref: str, oid: str) -> None:
    """HEAD on ``branch_ref`` at ``oid``; only right after ``reset`` (no planted symlinks)."""
    ref = gitdir / branch_ref
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(f"{oid}\n", encoding="utf-8")
    (gitdir / "HEAD").write_text(f"ref: {branch_ref}\n", encoding="utf-8")


def copy_tree(source: pygit2.Repository, target: pygit2.Repository, tree: pygit2.Oid) -> int:
    """Copy the objects of ``tree`` that ``target`` lacks from ``source``; returns how many.

    A tree ``target`` already has is complete there, so only new subtrees are walked.
    """
    copied = 0
    todo = [tree]
    while todo:
        oid = todo.pop()
        if oid in target:
            continue
        kind, data = source.odb.read(oid)[:2]
        target.odb.write(kind, data)
        copied += 1
        obj = source[oid]
        if isinstance(obj, pygit2.Tree):
            todo.extend(entry.id for entry in obj if entry.filemode != pygit2.GIT_FILEMODE_COMMIT)
    return copied


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
