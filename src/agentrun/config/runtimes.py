"""``[runtimes.NAME]`` and ``[prices."MODEL"]``: the agents a build may run, and what
their tokens cost."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agentrun.config.base import Table

RuntimeKind = Literal["script", "command", "claude", "codex", "aider", "openai", "anthropic"]


BUILTIN_RUNTIMES: tuple[RuntimeKind, ...] = ("claude", "codex", "aider", "openai", "anthropic")


# The output tokens one model response may take, unless ``max_output_tokens`` says: what
# the API runtimes send as the request's cap, and Claude Code's own default
# (CLAUDE_CODE_MAX_OUTPUT_TOKENS); for Codex and aider, which set no cap of their own, a
# response of today's models at its common largest. ``script`` and ``command`` agents
# are programs, not one model: their output is not capped. A role's first session is
# estimated at its prompt plus this (DESIGN §4).
DEFAULT_MAX_OUTPUT_TOKENS: dict[RuntimeKind, int] = {
    "anthropic": 8192,
    "openai": 16384,
    "claude": 32000,
    "codex": 32000,
    "aider": 8192,
    "script": 0,
    "command": 0,
}


class RuntimeConfig(Table):
    """One named runtime (DESIGN §7).

    ``script`` plays a scripted agent; ``command`` runs any program; ``claude``,
    ``codex`` and ``aider`` run those CLIs; ``openai`` (any OpenAI-compatible
    chat-completions endpoint) and ``anthropic`` talk to model APIs over HTTP.
    The built-in kinds may be named in ``roles`` without a table of their own.
    """

    kind: RuntimeKind
    script: str | None = None
    command: tuple[str, ...] | None = None
    prompt: Literal["stdin", "arg"] = "stdin"
    env: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    binary: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    allowed_tools: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    shell: bool = False
    max_retries: int = Field(default=3, ge=0)
    request_timeout_seconds: float = Field(default=300, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)  # per model response
    pass_env: tuple[str, ...] = ()  # more variables (fnmatch patterns) for this runtime

    @model_validator(mode="after")
    def _needs_its_input(self) -> RuntimeConfig:
        if self.kind == "script" and not self.script:
            raise ValueError('a script runtime needs `script = "path/to/script.toml"`')
        if self.kind == "command" and not self.command:
            raise ValueError('a command runtime needs `command = ["program", "arg", ...]`')
        return self

    @property
    def output_cap(self) -> int:
        """The output tokens one model response may take: ``max_output_tokens``, else the
        kind's default (DEFAULT_MAX_OUTPUT_TOKENS)."""
        return self.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS[self.kind]


class Price(Table):
    """US dollars per million tokens: input billed at the full rate, output, and input read
    from or written to a prompt cache. A cache rate left out is priced as
    ``agentrun.prices.cost_of`` says (never below what a provider charges)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)
