"""What a hosted job did: its lines, and the build it showed last (the job's outputs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from agentrun.kernel.state import BuildState


@dataclass
class JobResult:
    """What a job did: its lines, and the build it showed last (its outputs)."""

    lines: list[str] = field(default_factory=list)
    slug: str = ""
    pr_url: str = ""
    state: str = ""
    build: BuildState | None = None  # the build as last shown (a job summary reads it)
    # A job that leaves a build's ready tasks to CI jobs (``HostedJob(fan_out=True)``):
    # their ids, empty when none wait. None: the job runs tasks itself (no output).
    tasks: tuple[str, ...] | None = None

    def show(self, state: BuildState, runner: str | None = None) -> None:
        """The build's outputs; ``runner``: who runs it now (none: it is stopped if running)."""
        from agentrun.commands.inspect import state_word

        self.slug, self.state = state.slug, state_word(state, runner)
        self.build = state
        self.pr_url = state.proposal.url if state.proposal else ""

    def outputs(self) -> list[tuple[str, str]]:
        found = [("slug", self.slug), ("pr-url", self.pr_url), ("state", self.state)]
        if self.tasks is not None:
            found.append(("tasks", json.dumps(list(self.tasks))))
        return found

    def write_outputs(self, path: Path) -> None:
        """Append ``key=value`` lines to a CI's outputs file (``$GITHUB_OUTPUT``)."""
        with path.open("a", encoding="utf-8") as out:
            for key, value in self.outputs():
                out.write(f"{key}={value}\n")

    def say(self, line: str) -> JobResult:
        self.lines.append(line)
        return self


@contextmanager
def outputs_written(path: str | None) -> Iterator[JobResult]:
    """The job's result, written to ``path`` (when set) however the job ends: on an error
    too, with what was known of the build by then (empty values before)."""
    result = JobResult()
    try:
        yield result
    finally:
        if path:
            result.write_outputs(Path(path))
