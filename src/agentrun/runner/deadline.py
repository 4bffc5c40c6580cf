"""A time limit for a runner (a CI job's): stop at a phase boundary, or cut the phase short.

When the limit passes while a phase runs, the main thread gets the very interrupt Ctrl-C
would give it: the session's process tree is ended and the phase is recorded as
interrupted (not a failed attempt), so the build resumes from its last boundary.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

TIME_LIMIT = "time-limit"


class Deadline:
    """``stop_at`` is a ``time.monotonic()`` value; ``None`` never stops."""

    def __init__(self, stop_at: float | None) -> None:
        self.stop_at = stop_at
        self.fired = False  # the interrupt was sent
        self._busy = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # Only the main thread can be interrupted, and only where SIGINT raises
        # KeyboardInterrupt; elsewhere the limit holds at phase boundaries.
        self._can_interrupt = (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        )
        self._thread = threading.Thread(target=self._watch, name="agentrun-deadline", daemon=True)

    def __enter__(self) -> Deadline:
        if self.stop_at is not None and self._can_interrupt:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self._lock:
            self._busy = False
        if self._thread.is_alive():
            self._thread.join()

    @property
    def reached(self) -> bool:
        return self.stop_at is not None and (self.fired or time.monotonic() >= self.stop_at)

    @contextmanager
    def phase(self) -> Iterator[None]:
        """While this runs, reaching the limit interrupts the main thread."""
        with self._lock:
            self._busy = True
        try:
            yield
        finally:
            with self._lock:
                self._busy = False

    def _watch(self) -> None:
        assert self.stop_at is not None
        while not self._stop.wait(min(max(self.stop_at - time.monotonic(), 0.0), 1.0)):
            if time.monotonic() < self.stop_at:
                continue
            with self._lock:
                if self._busy:
                    self.fired = True
                    # A real signal, so that a blocking wait in the main thread wakes up.
                    main = threading.main_thread().ident
                    assert main is not None
                    signal.pthread_kill(main, signal.SIGINT)
                    return
            # Between phases the loop checks the limit itself; keep watching for the next.
            if self._stop.wait(0.05):
                return
