"""How a command ends when something went wrong: one line on stderr and a fixed exit code.

Shared by the click application (:class:`agentrun.cli.app.AgentrunGroup`) and the agent
verbs' quick path (:mod:`agentrun.cli.quickverbs`), which runs without click: the same
failure says the same line and exits with the same code on either (errors.py's table).
"""

from __future__ import annotations

import os
import sys

from agentrun.errors import EXIT_BUG, EXIT_INTERRUPT, EXIT_USER, AgentrunError

TYPE_CHECKING = False  # not typing itself: the agent verbs' quick path loads this module
if TYPE_CHECKING:
    from pathlib import Path


def failure(exc: BaseException) -> int:
    """Say what ``exc`` means for the user and return the exit code to end with.

    A user error (``AgentrunError``) is its own line; Ctrl-C is "interrupted"; a reader
    that went away is not an error of ours; anything else is a bug, whose trace goes to a
    new file named in the line.
    """
    if isinstance(exc, AgentrunError):
        say_error(f"agentrun: {exc}")
        return EXIT_USER
    if isinstance(exc, KeyboardInterrupt):
        say_error("agentrun: interrupted")
        return EXIT_INTERRUPT
    if isinstance(exc, BrokenPipeError):
        # The reader went away (`git agentrun log X | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    import traceback

    path = crash_file()
    path.write_text("".join(traceback.format_exception(exc)))
    say_error(f"agentrun: internal error (a bug); the trace is in {path}")
    return EXIT_BUG


def say_error(line: str) -> None:
    if os.environ.get("GITHUB_ACTIONS") == "true":  # an error may quote what an agent wrote
        from agentrun.hosted.action_log import escape_text

        line = escape_text(line)
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:  # a stderr nobody reads must not turn an error into a crash
        pass


def crash_file() -> Path:
    """A new file for a bug's trace, never one an earlier crash wrote."""
    import tempfile
    from datetime import UTC, datetime
    from pathlib import Path

    stamp = f"{datetime.now(UTC):%Y%m%d-%H%M%S}"
    fd, name = tempfile.mkstemp(prefix=f"agentrun-crash-{stamp}-", suffix=".txt", dir=crash_dir())
    os.close(fd)
    return Path(name)


def crash_dir() -> Path:
    """Where a bug's trace goes: the temp folder, or, inside an agent's session, its scratch
    folder (a sandbox may make the temp folder the worktree, and a trace must not be
    committed with the agent's work)."""
    import tempfile
    from pathlib import Path

    scratch = Path(".agentrun") / "run"
    if os.environ.get("AGENTRUN_SESSION") and scratch.is_dir():
        return scratch
    return Path(tempfile.gettempdir())
