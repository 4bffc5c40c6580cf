"""How ``git agentrun action`` talks to the GitHub Actions runner: the job log and summary.

The runner reads every line a step prints for *workflow commands*: a line that starts,
after white space, with ``::`` (``::error::``, ``::add-mask::``, ``::stop-commands::``)
and any line holding ``##[`` (the older form). Agents, checks, issue text and error
messages all reach the job log through agentrun's output, so while an Action runs its
``sys.stdout`` and ``sys.stderr`` are ``Escaped``: every physical line (the runner ends
one at ``\\n`` and at a lone ``\\r``) that could be read as a command gets a backslash
that makes it plain text (``\\::error::x``, ``##\\[``). Only ``JobLog.command`` writes
agentrun's own commands, with their data encoded as the runner decodes it.

The runner compares with .NET's culture-aware ``StartsWith``/``IndexOf``, which skip
"ignorable" characters (format and control characters, combining marks): the patterns
skip them too, so ``:\\u00ad:error::`` is escaped as ``::error::`` would be.

When the job ends (however it ends) ``$GITHUB_STEP_SUMMARY`` gets the build, its state,
the pull request, and each phase's round and usage; a failed step says its one-line
reason with ``::error::``, and a pull request is announced with ``::notice::``.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click
import regex

from agentrun.errors import AgentrunError

if TYPE_CHECKING:
    from agentrun.hosted.result import JobResult
    from agentrun.kernel.state import BuildState

_IGNORABLE = r"[\p{Cc}\p{Cf}\p{Mn}\p{Me}]"
_COMMAND = regex.compile(rf"^(?:\s|{_IGNORABLE})*(?=:{_IGNORABLE}*:)")
_OLD_COMMAND = regex.compile(rf"#{_IGNORABLE}*#{_IGNORABLE}*(?=\[)")
# Where the runner ends a line. Other breaks (\x85, \u2028) end none: within a line
# they are white space or ignorable, which the patterns skip.
_LINE_END = regex.compile(r"(\r\n|\r|\n)")
PENDING_LIMIT = 8192  # a line longer than this is written without waiting for its end
# Where a session's rounds are counted: plan and its review loop on the plan round.
PLAN_PHASES = ("plan", "plan-review")


def escape_line(line: str) -> str:
    """One line (no line break in it) as the runner can only show it, never act on it."""
    line = _COMMAND.sub(lambda m: m.group() + "\\", line, count=1)
    return _OLD_COMMAND.sub(lambda m: m.group() + "\\", line)


def escape_text(text: str) -> str:
    """Every line of ``text`` escaped, its line breaks kept."""
    parts = _LINE_END.split(text)
    return "".join(p if i % 2 else escape_line(p) for i, p in enumerate(parts))


class Escaped(io.TextIOBase):
    """A text stream that writes whole lines, each escaped, to ``stream``."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self.lock = threading.RLock()  # the progress ticker writes from its own thread
        self._pending = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "errors", None) or "replace"

    def isatty(self) -> bool:
        return self.stream.isatty()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("a text stream")  # how click tells text streams from binary ones
        with self.lock:
            parts = _LINE_END.split(self._pending + text)
            self._pending = parts.pop()  # after the last line break: not a whole line yet
            whole = "".join(p if i % 2 else escape_line(p) for i, p in enumerate(parts))
            if len(self._pending) > PENDING_LIMIT:
                whole, self._pending = whole + escape_line(self._pending) + "\n", ""
            if whole:
                self.stream.write(whole)
        return len(text)

    def flush(self) -> None:
        with self.lock:
            self.stream.flush()

    def finish(self) -> None:
        """Write what is left of an unended line, ended."""
        with self.lock:
            if self._pending:
                self.stream.write(escape_line(self._pending) + "\n")
                self._pending = ""
            self.stream.flush()

    def raw(self, line: str) -> None:
        """Write ``line`` unescaped, after what was written before it."""
        with self.lock:
            self.finish()
            self.stream.write(line + "\n")
            self.stream.flush()


def command(name: str, message: str, **properties: str) -> str:
    """``::name key=value::message``, encoded as the runner decodes it (one line)."""

    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    props = ",".join(f"{key}={prop(value)}" for key, value in properties.items())
    return f"::{name}{' ' + props if props else ''}::{data(message)}"


class JobLog:
    """agentrun's own workflow commands, written past the escaping of everything else."""

    def __init__(self, out: Escaped, err: Escaped) -> None:
        self.out, self.err = out, err

    def command(self, name: str, message: str, **properties: str) -> None:
        self.err.finish()
        self.out.raw(command(name, message, **properties))


@contextmanager
def job_log(environ: Mapping[str, str], result: JobResult) -> Iterator[JobLog | None]:
    """Inside a GitHub Actions job (``GITHUB_ACTIONS=true``): escaped output for the
    duration, then the job summary, ``::error::`` or ``::notice::`` however it ends."""
    if environ.get("GITHUB_ACTIONS") != "true":
        yield None
        return
    saved = sys.stdout, sys.stderr
    log = JobLog(Escaped(sys.stdout), Escaped(sys.stderr))
    sys.stdout, sys.stderr = log.out, log.err
    failure: str | None = None
    try:
        yield log
    except BaseException as exc:
        failure = _failure(exc, result)
        raise
    finally:
        with suppress(OSError, ValueError):  # a lost reader must not hide the job's outcome
            _report(log, environ, result, failure)
        sys.stdout, sys.stderr = saved


def _failure(exc: BaseException, result: JobResult) -> str | None:
    """Why the step fails, in one line; None when it does not (exit 0, or a build that
    waits for a person)."""
    if isinstance(exc, click.exceptions.Exit):
        build = result.build
        if exc.exit_code and build is not None and build.status == "failed":
            return f"build {result.slug} failed: {build.reason}"
        return None
    if isinstance(exc, AgentrunError):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return "internal error (a bug); the step's log says where the trace is"


def _report(
    log: JobLog, environ: Mapping[str, str], result: JobResult, failure: str | None
) -> None:
    summary = environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with Path(summary).open("a", encoding="utf-8") as out:
            out.write(render_summary(result, failure))
    if failure is not None:
        reason = " ".join(failure.split()) or "failed"  # one line, none of it cut
        log.command("error", f"agentrun: {reason}", title="agentrun")
    if result.pr_url:
        log.command("notice", f"build {result.slug}: {result.pr_url}", title="agentrun")
    log.out.finish()
    log.err.finish()


# --- the job summary ----------------------------------------------------------------


def render_summary(result: JobResult, failure: str | None = None) -> str:
    """The step's summary in Markdown: what the build is, where it is, what it cost."""
    from agentrun.view.render import cost_text

    lines = ["### agentrun", ""]
    state = result.build
    if result.slug:
        lines.append(
            f"Build `{result.slug}` · **{result.state or 'unknown'}**"
            + (f" at {state.phase_label}" if state is not None else "")
        )
    if result.pr_url:
        lines += ["", f"Pull request: {result.pr_url}"]
    if failure is not None:
        lines += ["", f"**Failed:** {_cell(failure)}"]
    if state is not None and state.phase_usage:
        lines += ["", "| phase | rounds | tokens | cost |", "| --- | --- | --- | --- |"]
        for phase, used in state.phase_usage.items():
            cost = f"${used.cost_usd:.4f}" if used.cost_usd is not None else "unknown"
            lines.append(f"| {phase} | {phase_rounds(state, phase)} | {used.tokens:,} | {cost} |")
        total = state.usage
        lines.append(
            f"| **total** | {state.sessions} sessions | {total.tokens:,} | {cost_text(state)} |"
        )
    if result.lines:
        lines += [""] + [f"- {_cell(line)}" for line in result.lines]
    return "\n".join(lines) + "\n\n"


def phase_rounds(state: BuildState, phase: str) -> int:
    """How many rounds a phase ran in: the plan round for planning, else the implement
    round (verify and finalize run once per implement round that reaches them)."""
    return state.plan_round if phase in PLAN_PHASES else state.impl_round


def _cell(text: str) -> str:
    """Text for a Markdown line of the summary: one line, no HTML, no table breaks."""
    flat = " ".join(text.split())
    return flat.replace("<", "&lt;").replace("|", "\\|")
