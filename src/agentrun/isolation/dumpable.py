"""The runner makes itself non-dumpable before it runs agents.

A non-dumpable process's ``/proc/<pid>/environ``, ``mem`` and ``fd`` belong to root and
it cannot be ptrace-attached by processes of the same user, so an agent running as the
runner's own user cannot read the runner's environment or memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

PR_SET_DUMPABLE = 4


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def make_undumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)``; False where the platform has no such call."""
    libc = _libc()
    return libc is not None and libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
