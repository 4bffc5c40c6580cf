"""The one error hierarchy, and the exit codes every command ends with (DESIGN §13).

Subclasses of AgentrunError are user errors (exit 1). The README's table lists the codes.
"""

from __future__ import annotations

EXIT_DONE = 0  # complete, or nothing to do
EXIT_USER = 1  # a user error; nothing changed
EXIT_USAGE = 2  # click's usage errors
EXIT_BUG = 3  # an internal error; the trace file is named
EXIT_WAITING = 4  # parked on a question, or waiting on a gate
EXIT_PAUSED = 5
EXIT_FAILED = 6  # failed or aborted
EXIT_NOT_NOW = 7  # stopped by --time-limit, or another runner holds the build or task
EXIT_INTERRUPT = 130  # Ctrl-C

EXIT_MEANINGS = {
    EXIT_DONE: "done: the build is complete, or there was nothing to do",
    EXIT_USER: "a user error, said in one line; nothing changed",
    EXIT_USAGE: "a usage error (an unknown option, a missing argument)",
    EXIT_BUG: "a bug: the line names the file that holds the trace",
    EXIT_WAITING: "parked or waiting: a question or a gate waits",
    EXIT_PAUSED: "paused",
    EXIT_FAILED: "failed or aborted",
    EXIT_NOT_NOW: "not now: stopped by --time-limit, or another runner holds the build or the "
    "task (or a task's session waits for other tasks' to end); resumable, nothing is wrong",
    EXIT_INTERRUPT: "interrupted (Ctrl-C); the build stays resumable",
}

_STATE_EXITS = {
    "complete": EXIT_DONE,
    "parked": EXIT_WAITING,
    "waiting": EXIT_WAITING,
    "paused": EXIT_PAUSED,
    "failed": EXIT_FAILED,
    "aborted": EXIT_FAILED,
    "stopped": EXIT_NOT_NOW,
    "running": EXIT_NOT_NOW,  # a command that ends while the build runs: another runner has it
}


def exit_for_state(state: str) -> int:
    """The exit code of a command that leaves a build in ``state`` (as ``status`` shows it)."""
    return _STATE_EXITS.get(state, EXIT_DONE)


class AgentrunError(Exception):
    """A user-facing error: one line that says what is wrong and what to do."""


class NotARepositoryError(AgentrunError):
    pass


class ConfigError(AgentrunError):
    pass


class UnknownBuildError(AgentrunError):
    pass


class MalformedEventError(AgentrunError):
    """A commit in a build log does not hold a valid event."""


class InvalidEventError(AgentrunError):
    """An event was refused at append: unknown type or a payload that does not validate."""


class DiskFullError(AgentrunError):
    """A write failed for want of space: nothing already recorded is lost."""


class ConcurrentUpdateError(AgentrunError):
    """A ref moved (or was locked) between our read and our write: re-read and re-decide."""


class LeaseHeldError(AgentrunError):
    pass


class LeaseLostError(AgentrunError):
    pass


class EscalationError(AgentrunError):
    pass


class VerbError(AgentrunError):
    """An agent verb that does not fit the open session or phase."""


class GuardError(AgentrunError):
    """A phase's work broke a rule (it wrote outside the worktree, changed .agentrun/)."""


class ForgeError(AgentrunError):
    pass


class RuntimeSetupError(AgentrunError):
    pass
