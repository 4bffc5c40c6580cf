"""Opening the repository and the small pygit2 helpers every part shares."""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pygit2

from agentrun.errors import NotARepositoryError

AGENTRUN_NAME = "agentrun"
AGENTRUN_EMAIL = "agentrun@localhost"


def open_repo(start: Path | str | None = None) -> pygit2.Repository:
    """The repository containing ``start`` (the current directory by default).

    Inside a linked worktree (an agent's workspace) this is still the one repository:
    refs are shared, so the log and the leases are the same.
    """
    where = str(start or Path.cwd())
    try:
        found = pygit2.discover_repository(where)
        if found is None:
            raise NotARepositoryError(
                f"{where} is not inside a git repository: run this in a repository "
                "(or `git init` one)"
            )
        return pygit2.Repository(found)
    except pygit2.GitError as exc:
        if "owned by" not in str(exc):
            raise
        # git's own safe.directory check: a repository another account owns (an unpacked
        # archive keeps its owner) is not opened until its owner is trusted.
        raise NotARepositoryError(
            f"{where} is in a repository owned by another account, which git does not open: "
            f"if you trust it, run `git config --global --add safe.directory <its folder>` "
            "(or chown it to yourself)"
        ) from None


def require_commits(repo: pygit2.Repository) -> None:
    if repo.head_is_unborn:
        raise NotARepositoryError(
            "this repository has no commits yet: commit something first "
            "(a build starts from a commit)"
        )


def common_dir(repo: pygit2.Repository) -> Path:
    """The main ``.git`` folder, also when ``repo`` was opened through a linked worktree."""
    gitdir = Path(repo.path)
    marker = gitdir / "commondir"
    if marker.exists():
        return (gitdir / marker.read_text().strip()).resolve()
    return gitdir


def agentrun_dir(repo: pygit2.Repository) -> Path:
    return common_dir(repo) / "agentrun"


def worktrees_dir(repo: pygit2.Repository) -> Path:
    """Where this repository's build worktrees live: outside ``.git`` and the user's tree.

    Agents treat anything under a ``.git`` folder as off limits (Claude Code refuses to
    edit there), so worktrees go to the user's cache folder, one folder per repository:
    ``$AGENTRUN_WORKTREES`` or ``$XDG_CACHE_HOME/agentrun/worktrees`` (``~/.cache/…``).
    The folder is keyed by the repository's path and by an id kept in its ``.git``, so
    a repository deleted and made again at the same path never meets the worktrees the
    old one left in the cache (they point at git metadata that is gone).
    """
    common = common_dir(repo).resolve()
    root = os.environ.get("AGENTRUN_WORKTREES")
    if not root:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(cache) / "agentrun" / "worktrees")
    name = common.parent.name if common.name == ".git" else common.name
    key = hashlib.sha1(f"{common}\0{_repository_id(common)}".encode()).hexdigest()[:10]
    return Path(root) / f"{name}-{key}"


def _repository_id(common: Path) -> str:
    """A random id made once per repository (``.git/agentrun/id``); empty when the
    ``.git`` folder cannot be written (an agent's sandbox), which keys by path alone."""
    path = common / "agentrun" / "id"
    with contextlib.suppress(OSError):
        return path.read_text().strip()
    made = uuid.uuid4().hex
    spare = path.with_name(f"id.{made}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        spare.write_text(made + "\n")
        # A hard link appears whole or not at all: no reader sees a half-written id.
        os.link(spare, path)
    except FileExistsError:
        return path.read_text().strip()  # another process made it a moment ago
    except OSError:
        return ""
    finally:
        with contextlib.suppress(OSError):
            spare.unlink()
    return made


def signature(now: datetime | None = None) -> pygit2.Signature:
    """The identity of agentrun's own commits (events, leases, phase commits)."""
    name = os.environ.get("AGENTRUN_COMMITTER_NAME", AGENTRUN_NAME)
    email = os.environ.get("AGENTRUN_COMMITTER_EMAIL", AGENTRUN_EMAIL)
    when = now or datetime.now(UTC)
    return pygit2.Signature(name, email, int(when.timestamp()), 0)


def user_login(repo: pygit2.Repository) -> str:
    """Who a human command is from: git's configured user, else the OS user."""
    for key in ("user.email", "user.name"):
        try:
            value = repo.config[key]
        except KeyError:
            continue
        if value:
            return str(value)
    return os.environ.get("USER", "unknown")


# Variables that point git at another repository; a child process must not inherit them
# (``gitcli.environment`` passes none of them to git).
LOCATING_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


def commit_at(repo: pygit2.Repository, oid: str | pygit2.Oid) -> pygit2.Commit:
    obj = repo[oid]
    if not isinstance(obj, pygit2.Commit):
        raise KeyError(f"{oid} is not a commit")
    return obj


def tree_at(repo: pygit2.Repository, oid: str | pygit2.Oid) -> pygit2.Tree:
    obj = repo[oid]
    if isinstance(obj, pygit2.Commit):
        return obj.tree
    if not isinstance(obj, pygit2.Tree):
        raise KeyError(f"{oid} is not a tree")
    return obj


def blob_data(repo: pygit2.Repository, oid: str | pygit2.Oid) -> bytes:
    obj = repo[oid]
    if not isinstance(obj, pygit2.Blob):
        raise KeyError(f"{oid} is not a blob")
    return bytes(obj.data)


WALK_NEWEST_FIRST = pygit2.enums.SortMode.TOPOLOGICAL
WALK_OLDEST_FIRST = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE


# git's empty tree, the same object in every repository.
EMPTY_TREE = pygit2.Oid(hex="4b825dc642cb6eb9a060e54bf8d69288fbee4904")


def empty_tree(repo: pygit2.Repository) -> pygit2.Oid:
    """The empty tree, written into the repository (only a writer needs to call this)."""
    return repo.TreeBuilder().write()


def now_utc() -> datetime:
    return datetime.now(UTC)
