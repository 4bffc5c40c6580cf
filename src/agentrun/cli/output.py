"""Output that outlives its reader: a closed stdout or stderr never stops a build.

``git agentrun run … | head -1`` closes the pipe after one line. A command that runs
builds must still reach the end it would have reached, so its streams are swapped for
guarded ones: once a write fails, the rest of that stream's output goes to the build's
log file, ``.git/agentrun/logs/<slug>.log`` (or nowhere, until a build is named).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

import pygit2

from agentrun.gitrepo import agentrun_dir


def log_path(repo: pygit2.Repository, slug: str) -> Path:
    """Where a build's console output goes once the console is gone."""
    return agentrun_dir(repo) / "logs" / f"{slug}.log"


class Guarded(io.TextIOBase):
    """A text stream that turns a failed write into a switch to the spill file."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self._stream = stream
        self._spill: Path | None = None
        self._pending: list[str] = []  # written after the reader left, before a file was named

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "errors", None) or "replace"

    @property
    def closed_reader(self) -> bool:
        return self._stream is None

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def writable(self) -> bool:
        return True

    def spill_to(self, path: Path) -> None:
        """From now on, what the lost reader would have got goes to ``path``."""
        self._spill = path
        if self._pending:
            self._append("".join(self._pending))
            self._pending.clear()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("a text stream")  # how click tells text streams from binary ones
        if self._stream is not None:
            try:
                self._stream.write(text)
                return len(text)
            except (OSError, ValueError):
                self._lose_reader()
        if self._spill is not None:
            self._append(text)
        else:
            self._pending.append(text)
        return len(text)

    def flush(self) -> None:
        if self._stream is not None:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._lose_reader()

    def _lose_reader(self) -> None:
        stream, self._stream = self._stream, None
        # Point the descriptor at /dev/null, so that the interpreter's last flush of
        # what is still buffered neither fails nor turns the exit code into 120.
        with suppress(OSError, ValueError, AttributeError):
            assert stream is not None
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)

    def _append(self, text: str) -> None:
        assert self._spill is not None
        with suppress(OSError):
            self._spill.parent.mkdir(parents=True, exist_ok=True)
            with self._spill.open("a", encoding="utf-8") as out:
                out.write(text)


class Streams:
    """The guarded stdout and stderr of one command."""

    def __init__(self, out: Guarded, err: Guarded) -> None:
        self.out, self.err = out, err

    def spill_to(self, path: Path) -> None:
        self.out.spill_to(path)
        self.err.spill_to(path)


@contextmanager
def outliving_readers() -> Iterator[Streams]:
    """Guard ``sys.stdout`` and ``sys.stderr`` for the duration of a command."""
    saved = sys.stdout, sys.stderr
    streams = Streams(Guarded(sys.stdout), Guarded(sys.stderr))
    sys.stdout, sys.stderr = streams.out, streams.err
    try:
        yield streams
    finally:
        sys.stdout, sys.stderr = saved
        if streams.out.closed_reader:
            sys.stdout = streams.out
        if streams.err.closed_reader:
            sys.stderr = streams.err
