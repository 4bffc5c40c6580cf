"""Live progress for the commands that run builds.

On a terminal: a status line (phase, elapsed time, the running session's or check's
latest output) under the events as they happen. Elsewhere (CI logs, pipes): one line
per event, and while a session or check runs, a line at least every
``AGENTRUN_PROGRESS_SECONDS`` (30) seconds saying it still runs, for how long, and its
latest output, so a quiet agent never looks like a hung job.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from agentrun.kernel.state import BuildState
from agentrun.runner.build import Observer
from agentrun.store.log import Stored
from agentrun.view.render import event_line

if TYPE_CHECKING:
    from rich.text import Text

PROGRESS_SECONDS = 30.0


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


class Work:
    """What runs now (a session or a check) and the latest line of its output.

    Every ``*.started`` event begins new work, so a line of the previous session is
    never shown as the current one's.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.label = ""  # "implement@2" while something runs, else ""
        self.started = time.monotonic()
        self.latest = ""

    def event(self, stored: Stored, state: BuildState) -> None:
        with self.lock:
            running = state.in_flight is not None or state.session is not None
            label = state.phase_label if running else ""
            if stored.event.type.endswith(".started") or label != self.label:
                self.started, self.latest = time.monotonic(), ""
            self.label = label

    def activity(self, text: str) -> None:
        if text.strip():
            with self.lock:
                self.latest = text.strip().splitlines()[-1]


class PlainProgress:
    """One line per event; a heartbeat line while work runs quietly."""

    def __init__(self, every: float) -> None:
        self.work = Work()
        self.every = every
        self.printed = time.monotonic()
        self._done = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)

    def event(self, stored: Stored, state: BuildState) -> None:
        self.work.event(stored, state)
        self._print(event_line(stored))

    def activity(self, text: str) -> None:
        self.work.activity(text)

    def warning(self, text: str) -> None:
        with self.work.lock:
            click.echo(f"agentrun: {text}", err=True)

    def _print(self, line: str) -> None:
        with self.work.lock:
            click.echo(line)
            self.printed = time.monotonic()

    def _tick(self) -> None:
        while not self._done.wait(min(self.every, 1.0)):
            with self.work.lock:
                label, started, latest = self.work.label, self.work.started, self.work.latest
                due = time.monotonic() - self.printed >= self.every
            if label and due:
                said = f": {latest}" if latest else ""
                self._print(f"     {label} running for {_clock(time.monotonic() - started)}{said}")

    def __enter__(self) -> PlainProgress:
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._ticker.join()


class LiveProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.work = Work()
        self.phase = "starting"
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=True)

    def __rich__(self) -> Text:
        """Re-rendered at every refresh, so the elapsed time ticks between events."""
        from rich.text import Text

        with self.work.lock:
            started, latest = self.work.started, self.work.latest
        latest = latest[: max(self.console.width - 40, 10)]
        line = Text(self.phase, style="bold")
        line.append(f"  {_clock(time.monotonic() - started)}  ")
        line.append(latest, style="dim")
        return line

    def event(self, stored: Stored, state: BuildState) -> None:
        self.work.event(stored, state)
        self.phase = f"{state.state_name} · {state.phase_label}"
        self.console.print(event_line(stored), markup=False, highlight=False)

    def activity(self, text: str) -> None:
        self.work.activity(text)

    def warning(self, text: str) -> None:
        click.echo(f"agentrun: {text}", err=True)


def progress_seconds() -> float:
    try:
        seconds = float(os.environ.get("AGENTRUN_PROGRESS_SECONDS", PROGRESS_SECONDS))
    except ValueError:
        return PROGRESS_SECONDS
    return seconds if seconds > 0 else PROGRESS_SECONDS


@contextmanager
def progress() -> Iterator[Observer]:
    if not sys.stdout.isatty():
        with PlainProgress(progress_seconds()) as plain:
            yield plain
        return
    live = LiveProgress()
    with live.live:
        yield live
