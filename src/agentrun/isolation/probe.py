"""What this machine allows, asked once per process (each answer is cached).

``namespace`` runs a trivial sandbox with the same flags as a real one. Where it fails
because AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later, GitHub's
hosted runners), the answer says so and ``auto`` falls back to ``user``.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

APPARMOR_KNOB = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
PROBE_TIMEOUT = 20.0
# The namespaces and hardening every namespace sandbox uses (not the network: agents need
# their model's API).
BWRAP_FLAGS = (
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
)


@dataclass(frozen=True)
class Found:
    ok: bool
    detail: str


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    return done.returncode, said[-1] if said else ""


def apparmor_restricts() -> bool:
    """Whether AppArmor keeps unprivileged processes from creating user namespaces."""
    try:
        return APPARMOR_KNOB.read_text().strip() == "1"
    except OSError:
        return False


@functools.cache
def namespace() -> Found:
    """Whether bubblewrap can start a sandbox here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Found(False, "bwrap not found (install bubblewrap: apt-get install bubblewrap)")
    argv = [bwrap, *BWRAP_FLAGS, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    code, said = _run([*argv, "--tmpfs", "/tmp", "--", "true"])
    if code == 0:
        return Found(True, f"bubblewrap works ({bwrap})")
    why = f"bwrap failed: {said or f'exit {code}'}"
    if apparmor_restricts() and os.geteuid() != 0:
        why += f" (AppArmor restricts unprivileged user namespaces: {APPARMOR_KNOB} is 1)"
    return Found(False, why)


@functools.cache
def sudo() -> bool:
    """Whether this (non-root) process may run commands as root without a password."""
    if shutil.which("sudo") is None:
        return False
    return _run(["sudo", "-n", "true"])[0] == 0


def as_root() -> list[str] | None:
    """How to run a command as root: directly ([]), through ``sudo -n`` or not at all."""
    if os.geteuid() == 0:
        return []
    return ["sudo", "-n", "-E", "--"] if sudo() else None


@functools.cache
def account(name: str) -> Found:
    """Whether agents can run as the account ``name`` (created when missing)."""
    root = as_root()
    if root is None:
        return Found(False, "needs root or passwordless sudo (sudo -n true failed)")
    missing = [tool for tool in ("setpriv", "setfacl") if shutil.which(tool) is None]
    try:
        pwd.getpwnam(name)
    except KeyError:
        if shutil.which("useradd") is None:
            missing.append("useradd")
    if missing:
        return Found(
            False, f"{', '.join(missing)} not found (apt-get install util-linux acl passwd)"
        )
    how = "as root" if not root else "through sudo -n"
    return Found(True, f"agents run as the unprivileged account {name} ({how})")
