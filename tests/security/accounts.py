"""The account the isolation tests run a runner as: a CI user with passwordless sudo, as
GitHub's hosted runners have (created when missing, as scripts/check does as root)."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

CI_USER = "agentrun-ci"


def as_root(*argv: str) -> None:
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    subprocess.run([*prefix, *argv], check=True, capture_output=True)


def ensure_ci_user() -> str:
    """``agentrun-ci``: not root, with a NOPASSWD sudoers entry."""
    try:
        pwd.getpwnam(CI_USER)
    except KeyError:
        try:
            as_root("useradd", "--create-home", "--shell", "/bin/sh", CI_USER)
        except subprocess.CalledProcessError:
            pwd.getpwnam(CI_USER)  # a parallel test worker created it meanwhile
    # This venv's Python may live under root's HOME (pyenv): the CI user must run it.
    # The venv too: a clone made in `mktemp -d` (0700) shuts the CI user out of its bin.
    pythons = (Path(sys.executable).resolve(), Path(sys.executable).absolute())
    parents = {p for python in pythons for p in python.parents}
    closed = sorted(str(p) for p in parents if not p.stat().st_mode & stat.S_IXOTH)
    if closed:
        as_root("setfacl", "-m", f"u:{CI_USER}:x", *closed)
    sudoers = Path("/etc/sudoers.d") / CI_USER
    if not sudoers.exists():
        entry = f"{CI_USER} ALL=(ALL) NOPASSWD: ALL\n"
        as_root("sh", "-c", f"umask 0337; printf '%s' '{entry}' > {sudoers}")
    return CI_USER


def open_folder() -> Path:
    """A folder other accounts may enter (pytest's temporary folders are mode 0700)."""
    root = Path(tempfile.mkdtemp(prefix="agentrun-sudo-", dir="/tmp"))
    root.chmod(0o755)
    return root
