"""The ``user`` level: agents run as an unprivileged account that has no sudo rights.

As codex-action's ``unprivileged-user`` strategy does, the account is a system account
(created by ``useradd --system`` when missing, never added to sudoers). The runner enters
it with ``setpriv`` (no new privileges, every capability dropped), directly as root or
through ``sudo -n`` on a runner with passwordless sudo (GitHub's hosted runners). The
account reaches the build's files through POSIX ACLs (``setfacl``), not ``chown``: the
files stay the runner's, and a default ACL keeps what the agent creates usable by both.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from agentrun.isolation.levels import IsolationError
from agentrun.isolation.probe import as_root

SUDO_VARIABLES = ("SUDO_COMMAND", "SUDO_USER", "SUDO_UID", "SUDO_GID", "SUDO_HOME")


def _root() -> list[str]:
    prefix = as_root()
    if prefix is None:
        raise IsolationError('[isolation] mode = "user" needs root or passwordless sudo')
    return prefix


def ensure(name: str) -> tuple[int, int]:
    """The account's uid and gid; a missing account is created (a system account)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _sh(
            [
                *_root(),
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ],
            f"cannot create the account {name}",
        )
        entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def grant(uid: int, writable: Iterable[Path], readable: Iterable[Path]) -> None:
    """Let ``uid`` write ``writable`` (recursively) and reach both sets' folders."""
    writable = [p for p in writable if p.exists()]
    spec = f"u:{uid}:rwX,d:u:{uid}:rwX"
    if os.geteuid() != 0:
        # What the agent creates stays the runner's to change and delete.
        me = os.geteuid()
        spec += f",u:{me}:rwX,d:u:{me}:rwX"
    _sh(["setfacl", "-R", "-m", spec, *map(str, writable)], "cannot share the worktree")
    passes = sorted({a for p in [*writable, *readable] for a in _closed_ancestors(p)})
    if passes:
        _sh(["setfacl", "-m", f"u:{uid}:x", *map(str, passes)], "cannot open the way")


def _closed_ancestors(path: Path) -> list[Path]:
    """The folders above ``path`` that others may not pass through (e.g. a 0700 HOME)."""
    closed = []
    for folder in path.resolve().parents:
        try:
            mode = folder.stat().st_mode
        except OSError:
            continue
        if not mode & stat.S_IXOTH:
            closed.append(folder)
    return closed


def wrap(argv: list[str], env: dict[str, str], uid: int, gid: int) -> list[str]:
    """``argv`` run as ``uid``: no new privileges, no capabilities, no supplementary groups."""
    unset = [arg for name in SUDO_VARIABLES for arg in ("-u", name)]
    return [
        *_root(),
        "setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
        "env",
        *unset,
        # sudo's secure_path would replace the agent's PATH.
        f"PATH={env.get('PATH', '/usr/bin:/bin')}",
        *argv,
    ]


def signal_via() -> tuple[str, ...]:
    """How the runner signals the agent's processes: itself as root, else through sudo."""
    return () if os.geteuid() == 0 else ("sudo", "-n")


def _sh(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IsolationError(f"{what}: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
        raise IsolationError(f"{what}: {argv[0]} exited with {done.returncode}: {said[0]}")
