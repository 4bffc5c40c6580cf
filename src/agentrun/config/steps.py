"""``[[verify]]``, ``[[finalize]]`` and ``[setup]``: the commands a build runs itself."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from agentrun.config.base import Table


class VerifyStep(Table):
    """A deterministic ``command`` run in the worktree, or an ``agent`` verify (a role name)."""

    name: str
    command: str | None = None
    agent: str | None = None
    paths: tuple[str, ...] = ()
    pass_env: tuple[str, ...] = ()  # more variables (fnmatch patterns) for this step

    @model_validator(mode="after")
    def _one_kind(self) -> VerifyStep:
        if (self.command is None) == (self.agent is None):
            raise ValueError(f"step {self.name!r} needs exactly one of `command` or `agent`")
        if not (self.command or self.agent or "").strip():
            raise ValueError(f"step {self.name!r} has an empty `command` or `agent`")
        return self

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value or any(c in value for c in " /@:\t\n"):
            raise ValueError("a step name must be a plain word (no spaces, '/', '@' or ':')")
        return value


class FinalizeStep(VerifyStep):
    """Failure-tolerant: a failure is recorded as an observation, never turns a build red."""


class SetupStep(Table):
    """A command that prepares each build worktree (dependencies, a virtualenv): run before
    the first session or check there, and again when a file ``inputs`` matches changed."""

    command: str | tuple[str, ...] | None = None  # a string runs in bash, a list as is
    timeout_seconds: float = Field(default=1800, gt=0)
    inputs: tuple[str, ...] = ()  # gitignore-style patterns: "requirements*.txt", ...
    pass_env: tuple[str, ...] = ()

    @field_validator("command")
    @classmethod
    def _something(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        if value is not None and not (value if isinstance(value, str) else "".join(value)).strip():
            raise ValueError("the setup command is empty: leave it out, or say what to run")
        return value
