"""Live progress for ``run`` and ``resume``.

On a terminal: a status line (phase, round, elapsed time, the session's latest
activity) under the events as they happen. Elsewhere (CI logs): one line per event.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from agentrun.cli.render import event_line
from agentrun.kernel.state import BuildState
from agentrun.runner.build import Observer
from agentrun.store.log import Stored

if TYPE_CHECKING:
    from rich.text import Text


class PlainProgress:
    def event(self, stored: Stored, state: BuildState) -> None:
        click.echo(event_line(stored))

    def activity(self, text: str) -> None:
        pass


class LiveProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.started = time.monotonic()
        self.phase = "starting"
        self.latest = ""
        self.live = Live(self, console=self.console, refresh_per_second=4, transient=True)

    def __rich__(self) -> Text:
        """Re-rendered at every refresh, so the elapsed time ticks between events."""
        from rich.text import Text

        elapsed = int(time.monotonic() - self.started)
        latest = self.latest[: max(self.console.width - 40, 10)]
        line = Text(self.phase, style="bold")
        line.append(f"  {elapsed // 60}:{elapsed % 60:02d}  ")
        line.append(latest, style="dim")
        return line

    def event(self, stored: Stored, state: BuildState) -> None:
        self.phase = f"{state.state_name} · {state.phase_label}"
        self.console.print(event_line(stored), markup=False, highlight=False)

    def activity(self, text: str) -> None:
        if text.strip():
            self.latest = text.strip()


@contextmanager
def progress() -> Iterator[Observer]:
    if not sys.stdout.isatty():
        yield PlainProgress()
        return
    live = LiveProgress()
    with live.live:
        yield live
