"""Watching a build's log from a thread while the runner waits on a session or check."""

from __future__ import annotations

import threading

import pygit2

from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

POLL_SECONDS = 0.25


class AbortWatcher:
    """Cancels the running session as soon as someone asks the build to abort."""

    def __init__(
        self,
        repo: pygit2.Repository,
        slug: str,
        cancel: threading.Event,
        remote_abort: threading.Event | None = None,
        seen: str | None = None,
    ) -> None:
        """``remote_abort``: set when an abort request arrived through the remote.
        ``seen``: a tip the caller already knows asks for no abort (the one the session
        or check started on): it is looked at again only once the log moves on."""
        self.path = repo.path
        self.slug = slug
        self.cancel = cancel
        self.remote_abort = remote_abort
        self.seen = seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="agentrun-abort")
        self._thread.start()

    def _run(self) -> None:
        repo = pygit2.Repository(self.path)
        log, cache = EventLog(repo), StateCache(repo)
        seen = self.seen
        while not self._stop.wait(POLL_SECONDS):
            if self.remote_abort is not None and self.remote_abort.is_set():
                self.cancel.set()
                return
            tip = log.tip_oid(self.slug)
            if tip is None or tip == seen:
                continue
            seen = tip
            if load_state(log, cache, self.slug, tip)[1].abort_requested:
                self.cancel.set()
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
