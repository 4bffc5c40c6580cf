"""Which machine and boot this is, and whether a process still runs (DESIGN §12).

Read from /proc the way psutil reads it on Linux — a start time is ``starttime`` of
``/proc/<pid>/stat`` over the clock ticks, plus ``btime`` of ``/proc/stat``, the same
float operations in the same order, so the figure agrees with psutil's to the bit — so
that ``status`` can judge a lease without importing psutil. Elsewhere (no /proc), and
for a pid psutil refuses, psutil answers. procs.py re-exports these: one home.
"""

from __future__ import annotations

import functools
import os
import sys

BOOT_ID = "/proc/sys/kernel/random/boot_id"
STAT = "/proc/stat"
ZOMBIE = b"Z"


def host() -> str:
    """``socket.gethostname()``: on Linux, glibc and musl answer it with uname's nodename
    (read here without importing socket)."""
    if sys.platform == "linux":
        return os.uname().nodename
    import socket

    return socket.gethostname()


@functools.cache
def boot_id() -> str:
    """This boot's id (it cannot change while this process runs)."""
    try:
        with open(BOOT_ID) as f:
            return f.read().strip()
    except OSError:
        import psutil

        return f"boot-{int(psutil.boot_time())}"


def start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None: it is gone, or not
    ours to see."""
    seen = _seen(pid)
    return None if seen is None else seen[1]


def is_alive(pid: int, start: float) -> bool:
    """Whether the process that had ``pid`` and started at ``start`` still runs."""
    seen = _seen(pid)
    if seen is None or seen[0]:
        return False
    return abs(seen[1] - start) < 1.0


def _seen(pid: int) -> tuple[bool, float] | None:
    """Whether ``pid`` is a zombie, and its start time; None when it is gone or hidden."""
    if pid <= 0 or not os.path.isfile(STAT):
        return _seen_by_psutil(pid)
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        btime = _boot_time()
    except OSError:
        return None
    # The name, in parentheses, may hold anything: the fields start after the last ")".
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0] == ZOMBIE, float(fields[19]) / os.sysconf("SC_CLK_TCK") + btime


def _boot_time() -> float:
    """``btime`` of /proc/stat, read anew each time as psutil does (the clock may move)."""
    with open(STAT, "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.strip().split()[1])
    raise OSError("no btime line in /proc/stat")


def _seen_by_psutil(pid: int) -> tuple[bool, float] | None:
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.status() == psutil.STATUS_ZOMBIE, proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
