"""Paths an agent names, confined to its worktree.

No absolute paths, no ``..``, no symlink that leads out; judged by where a path leads
as well as by how it is spelled, so a symlink inside the worktree is no way round. The
API runtimes' tools also keep the agent out of git's own files and, for writes, out of
the maintainers' ``.agentrun/`` and ``.agentrun.toml`` (its scratch folder
``.agentrun/run/`` excepted). A refusal is a :class:`GuardError`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from agentrun.errors import GuardError


def confined(workdir: Path, relative: str, action: str = "write") -> Path:
    """``relative`` inside ``workdir``; refuses ``..``, absolute paths and symlink escapes."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise GuardError(f"refused to {action} outside the worktree: {relative}")
    root = workdir.resolve()
    target = (root / pure).resolve()
    if not target.is_relative_to(root):
        raise GuardError(
            f"refused to {action} outside the worktree: {relative} (through a symlink)"
        )
    return target


def readable(root: Path, relative: str, action: str = "read") -> Path:
    """``relative`` confined to the worktree at ``root``, and not inside ``.git``."""
    path = confined(root, relative, action)
    for parts in _spellings(root, relative, path):
        if parts[:1] == (".git",):
            raise GuardError(f"refused to {action} git's own files: {relative}")
    return path


def writable(root: Path, relative: str) -> Path:
    """A path the agent may write: readable, and not the maintainers' agentrun files."""
    path = readable(root, relative, "write")
    for parts in _spellings(root, relative, path):
        theirs = parts == (".agentrun.toml",) or (
            parts[:1] == (".agentrun",) and parts[:2] != (".agentrun", "run")
        )
        if theirs:
            raise GuardError(
                f"refused to write {relative}: .agentrun/ and .agentrun.toml belong to the "
                "maintainers (only the scratch folder .agentrun/run/ is yours)"
            )
    return path


def _spellings(root: Path, relative: str, path: Path) -> tuple[tuple[str, ...], ...]:
    """The path as the agent spelled it, and where it leads (through any symlink)."""
    return PurePosixPath(relative).parts, path.relative_to(root.resolve()).parts
