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
import stat
from pathlib import Path

import pygit2

from agentrun.gitrepo import agentrun_dir, common_dir

KEEP = ("index",)  # survives a reset: a fresh index would make `git reset --hard` rewrite all
TAGS = "refs/tags"


def path_of(repo: pygit2.Repository, slug: str) -> Path:
    return (agentrun_dir(repo) / "gitdirs" / slug).resolve()


def reset(
    repo: pygit2.Repository, gitdir: Path, worktree: Path, branch_ref: str, head: str
) -> None:
    """A fresh private git dir on ``branch_ref`` at ``head``; all an agent left is gone.

    What is already as it should be stays (most phases leave it so): a file is kept only
    when it is a plain file with the very text it must hold, a folder only when it is a
    real folder; anything else goes and is written afresh.
    """
    _folder(gitdir)
    refs = {branch_ref: f"{head}\n"}
    for entry in _entries(gitdir):
        if entry.name == "refs" and _is_folder(entry):
            _tidy_refs(entry, "refs", refs)
        elif entry.name == "objects" and _is_folder(entry):
            _tidy_objects(entry)
        elif entry.name not in (*KEEP, "HEAD", "config"):
            _remove(entry)
    _folder(gitdir / "refs")
    _folder(gitdir / TAGS)
    rearm(repo, gitdir, worktree)
    point(gitdir, branch_ref, head)


def rearm(repo: pygit2.Repository, gitdir: Path, worktree: Path) -> None:
    """Rewrite what decides which code git runs and where it looks; keep refs and objects."""
    for name in ("hooks", "info", "config.worktree", "commondir"):
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
    _folder(objects / "info")
    _holding(objects / "info" / "alternates", f"{common_dir(repo).resolve() / 'objects'}\n")
    _holding(
        gitdir / "config",
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
        f"\tlogallrefupdates = false\n\tworktree = {worktree}\n",
    )
    _holding(worktree / ".git", f"gitdir: {gitdir}\n")


def point(gitdir: Path, branch_ref: str, oid: str) -> None:
    """HEAD on ``branch_ref`` at ``oid``; only right after ``reset`` (no planted symlinks)."""
    ref = gitdir / branch_ref
    ref.parent.mkdir(parents=True, exist_ok=True)
    _holding(ref, f"{oid}\n")
    _holding(gitdir / "HEAD", f"ref: {branch_ref}\n")


def _tidy_refs(folder: Path, name: str, wanted: dict[str, str]) -> None:
    """Keep under ``folder`` (the ref path ``name``) only the ``wanted`` refs ({name:
    text}), the folders that lead to them, and an empty ``refs/tags``."""
    for entry in _entries(folder):
        below = f"{name}/{entry.name}"
        if below == TAGS and _is_folder(entry):
            for tag in _entries(entry):
                _remove(tag)
        elif any(ref.startswith(below + "/") for ref in wanted) and _is_folder(entry):
            _tidy_refs(entry, below, wanted)
        elif below not in wanted or not _holds(entry, wanted[below]):
            _remove(entry)


def _tidy_objects(objects: Path) -> None:
    """Keep only ``objects/info`` (its ``alternates`` is rewritten by ``rearm``): the
    objects an agent (or the runner's ``git add``) wrote here go."""
    for entry in _entries(objects):
        if entry.name == "info" and _is_folder(entry):
            for inner in _entries(entry):
                if inner.name != "alternates":
                    _remove(inner)
        else:
            _remove(entry)


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


def _is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _folder(path: Path) -> None:
    """``path`` is a real folder (whatever stood there goes)."""
    if not _is_folder(path):
        _remove(path)
        path.mkdir(parents=True)


def _holds(path: Path, text: str) -> bool:
    """Whether ``path`` is a plain file (no symlink) holding exactly ``text``."""
    try:
        mode = path.lstat().st_mode
        return stat.S_ISREG(mode) and path.read_bytes() == text.encode()
    except OSError:
        return False


def _holding(path: Path, text: str) -> None:
    """``path`` is a plain file holding ``text``: kept when it is, else written afresh
    (never through what stands there)."""
    if not _holds(path, text):
        _remove(path)
        path.write_text(text, encoding="utf-8")


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
