"""Retrying a compare-and-swap write: re-read, rebuild, try again (DESIGN §2).

A lost race (the ref moved, or its lock was held for a moment) raises
``ConcurrentUpdateError``; the write is rebuilt from a fresh read and tried again, a
bounded number of times, with a short pause that grows and is jittered so that two busy
writers do not retry in lockstep. Giving up raises a clear error: nothing is dropped
silently.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from agentrun.errors import ConcurrentUpdateError

T = TypeVar("T")
ATTEMPTS = 200
MAX_PAUSE = 0.05


def pause(attempt: int) -> None:
    time.sleep(random.uniform(0, min(0.002 * (attempt + 1), MAX_PAUSE)))


def retry(step: Callable[[], T], what: str, attempts: int = ATTEMPTS) -> T:
    """``step()`` until it does not lose a race; ``what`` names the write in the error."""
    for attempt in range(attempts):
        try:
            return step()
        except ConcurrentUpdateError:
            pause(attempt)
    raise ConcurrentUpdateError(f"{what}: other writers kept moving it; try again")
