"""Installing the pre-push hook into the repository's hooks folder, and removing it.

The folder is the one git runs hooks from: ``git rev-parse --git-path hooks`` honours
``core.hooksPath`` and linked worktrees. A pre-push hook that is not agentrun's (git-lfs
installs one) is never disabled: it moves to ``pre-push.agentrun-chained``, which the shim
runs first with the same arguments and input (its refusal stops the push), and
``uninstall`` puts it back as it was, bytes and mode.
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
CHAINED = HOOK + ".agentrun-chained"  # the shim (templates/pre-push) runs this name
OLD_BACKUP = HOOK + ".agentrun-backup"  # where `install --force` of 0.1.0 set a hook aside


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


def install(cwd: Path) -> Done:
    """Write the shim as the pre-push hook, chaining the hook that was there; an older
    copy of ours is simply replaced (an upgrade), and a hook an older agentrun set aside
    is chained from now on."""
    folder = hooks_dir(cwd)
    path, chained = folder / HOOK, folder / CHAINED
    said = ""
    if _present(path) and not is_ours(path):
        if _present(chained):
            raise HookInstallError(
                f"{path} is not agentrun's hook, and {chained} already holds the hook "
                "agentrun chains: move one of them away first, so that neither is lost"
            )
        path.rename(chained)
        hint = _alternative(chained)
        said = f"; the earlier hook runs first, from {chained}" + (f". {hint}" if hint else "")
    elif _present(folder / OLD_BACKUP) and not _present(chained):
        (folder / OLD_BACKUP).rename(chained)
        said = f"; the hook an earlier install set aside runs first again, from {chained}"
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f".{HOOK}.agentrun-{os.getpid()}"
    temp.write_text(template(), encoding="utf-8")
    temp.chmod(0o755)
    temp.replace(path)
    return Done(path, f"installed the agentrun pre-push hook at {path}{said}")


def uninstall(cwd: Path) -> Done:
    """Remove our hook and put back the one it chained."""
    folder = hooks_dir(cwd)
    path = folder / HOOK
    if not _present(path):
        return Done(path, f"no pre-push hook at {path}; nothing to remove")
    if not is_ours(path):
        raise HookInstallError(f"{path} is not agentrun's pre-push hook; left as it is")
    for kept in (folder / CHAINED, folder / OLD_BACKUP):
        if _present(kept):
            kept.replace(path)
            return Done(
                path, f"removed the agentrun pre-push hook; put back the earlier hook {path}"
            )
    path.unlink()
    return Done(path, f"removed the agentrun pre-push hook from {path}")


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _alternative(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    if "pre-commit" in text:
        return (
            "It looks like pre-commit's: you may rather add agentrun's hook to "
            ".pre-commit-config.yaml (see the README)"
        )
    return ""
