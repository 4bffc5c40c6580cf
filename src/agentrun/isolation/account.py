"""The ``user`` level: agents run as an unprivileged account that has no sudo rights.

As codex-action's ``unprivileged-user`` strategy does, the account is a system account
(created by ``useradd --system`` when missing, never added to sudoers). The runner enters
it with ``setpriv`` (no new privileges, every capability dropped), directly as root or
through ``sudo -n`` on a runner with passwordless sudo (GitHub's hosted runners). The
account reaches the build's files through POSIX ACLs (``setfacl``), not ``chown``: the
files stay the runner's, and a default ACL keeps what the agent creates usable by both.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from agentrun.isolation.levels import IsolationError
from agentrun.isolation.probe import as_root

LOCK_FOLDER = Path("/run/lock")  # world-writable, like /tmp, and emptied at boot
SUDO_VARIABLES = ("SUDO_COMMAND", "SUDO_USER", "SUDO_UID", "SUDO_GID", "SUDO_HOME")


def _root() -> list[str]:
    prefix = as_root()
    if prefix is None:
        raise IsolationError('[isolation] mode = "user" needs root or passwordless sudo')
    return prefix


def ensure(name: str) -> tuple[int, int]:
    """The account's uid and gid; a missing account is created (a system account)."""
    with suppress(KeyError):
        return _ids(name)
    with _one_creator():
        with suppress(KeyError):
            return _ids(name)  # another runner created it while this one waited
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
    return _ids(name)


@contextmanager
def _one_creator() -> Iterator[None]:
    """One account creation at a time on this machine.

    useradd looks the name up before it locks /etc/passwd, so two runners starting at once
    would both add the account (two entries, two uids). Runners of different users share
    the lock file: it is opened read-only (flock needs no more), and created once.
    """
    folder = LOCK_FOLDER if LOCK_FOLDER.is_dir() else Path(tempfile.gettempdir())
    path = folder / "agentrun-accounts.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise IsolationError(f"cannot lock {path} to create the agent's account: {exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _ids(name: str) -> tuple[int, int]:
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
