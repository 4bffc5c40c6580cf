"""Installing the pre-push hook into the repository's hooks folder, and removing it.

The folder is the one git runs hooks from: ``git rev-parse --git-path hooks`` honours
``core.hooksPath`` and linked worktrees. A pre-push hook that is not agentrun's is
replaced only with ``--force``, and then kept as ``pre-push.agentrun-backup``, which
``uninstall`` puts back.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from agentrun import gitcli
from agentrun.errors import AgentrunError, NotARepositoryError

HOOK = "pre-push"
MARKER = "agentrun-pre-push-hook"
BACKUP_SUFFIX = ".agentrun-backup"


class HookInstallError(AgentrunError):
    """The hook cannot be installed or removed without losing someone's hook."""


@dataclass(frozen=True)
class Done:
    path: Path
    message: str


def template() -> str:
    """The shim, as shipped (``hooks/pre-push`` at the repository root is the same file)."""
    return files("agentrun").joinpath("templates", HOOK).read_text(encoding="utf-8")


def hooks_dir(cwd: Path) -> Path:
    """Where git looks for hooks when run in ``cwd``."""
    try:
        # The allow-listed environment, not gitcli.run: its core.hooksPath would hide the
        # very setting this asks about (and rev-parse runs no program anyway).
        done = subprocess.run(
            ["git", "rev-parse", "--git-path", "hooks"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            env=gitcli.environment(),
        )
    except OSError as exc:
        raise NotARepositoryError(f"cannot run git: {exc.strerror}") from None
    if done.returncode != 0:
        raise NotARepositoryError(
            f"{cwd} is not inside a git repository: run this in the repository to protect"
        )
    return (cwd / done.stdout.strip()).resolve()


def is_ours(path: Path) -> bool:
    try:
        return not path.is_symlink() and MARKER in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def install(cwd: Path, force: bool = False) -> Done:
    """Write the shim as the pre-push hook; an older copy of ours is simply replaced."""
    folder = hooks_dir(cwd)
    path = folder / HOOK
    backup = folder / (HOOK + BACKUP_SUFFIX)
    kept = ""
    if (path.exists() or path.is_symlink()) and not is_ours(path):
        if not force:
            raise HookInstallError(
                f"{path} is a pre-push hook that is not agentrun's; left as it is. "
                + _alternative(path)
                + f"Rerun with --force to replace it (it is kept as {backup.name})"
            )
        if backup.exists() or backup.is_symlink():
            raise HookInstallError(
                f"{backup} already holds an earlier hook; move it away first, so that "
                "neither hook is lost"
            )
        path.rename(backup)
        kept = f"; the previous hook is kept as {backup}"
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f".{HOOK}.agentrun-{os.getpid()}"
    temp.write_text(template(), encoding="utf-8")
    temp.chmod(0o755)
    temp.replace(path)
    return Done(path, f"installed the agentrun pre-push hook at {path}{kept}")


def uninstall(cwd: Path) -> Done:
    """Remove our hook and put back the one ``install --force`` kept."""
    folder = hooks_dir(cwd)
    path = folder / HOOK
    backup = folder / (HOOK + BACKUP_SUFFIX)
    if not (path.exists() or path.is_symlink()):
        return Done(path, f"no pre-push hook at {path}; nothing to remove")
    if not is_ours(path):
        raise HookInstallError(f"{path} is not agentrun's pre-push hook; left as it is")
    if backup.exists() or backup.is_symlink():
        backup.replace(path)
        return Done(path, f"removed the agentrun pre-push hook; put back the earlier hook {path}")
    path.unlink()
    return Done(path, f"removed the agentrun pre-push hook from {path}")


def _alternative(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    if "pre-commit" in text:
        return (
            "It looks like pre-commit's: add agentrun's hook to .pre-commit-config.yaml "
            "instead (see the README). "
        )
    return ""
