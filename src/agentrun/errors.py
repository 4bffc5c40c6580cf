"""The one error hierarchy. Subclasses of AgentrunError are user errors (exit 1)."""

from __future__ import annotations


class AgentrunError(Exception):
    """A user-facing error: one line that says what is wrong and what to do."""

    exit_code = 1


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
