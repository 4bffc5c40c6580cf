"""``[mcp.servers.NAME]`` and ``[mcp.roles]``: the user's MCP servers for agents."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from agentrun.config.base import ENV_NAME, Table

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class McpServer(Table):
    """One MCP server the user's agents may call (``[mcp.servers.NAME]``).

    Either a program started over stdio (``command`` and ``args``; ``env`` set as written,
    ``pass_env`` copied from the runner's environment, scrubbed like every credential), or a
    streamable-HTTP server at ``url``. ``timeout_seconds`` bounds its start and each call.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    url: str | None = None
    timeout_seconds: float = Field(default=60, gt=0)

    @field_validator("command", mode="before")
    @classmethod
    def _program_alone(cls, value: object) -> object:
        if isinstance(value, list):
            raise ValueError(
                "`command` is the program alone (a string); its arguments go in `args`"
            )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                'a server is `command = "program"` (stdio) or `url = "https://…"` '
                "(streamable HTTP): exactly one"
            )
        if self.url is not None:
            if self.args or self.env or self.pass_env:
                raise ValueError("`args`, `env` and `pass_env` are for a `command` server")
            if not re.match(r"^https?://", self.url):
                raise ValueError(f"{self.url!r} is not an http:// or https:// URL")
        for name in self.env:
            if not ENV_NAME.match(name):
                raise ValueError(
                    f"env: {name!r} is not an environment variable name (letters, digits, '_')"
                )
        return self


class McpConfig(Table):
    """The user's MCP servers, and which roles get which (``[mcp.roles]``; a role without
    an entry takes ``default``'s; with no ``[mcp.roles]`` at all every role gets every
    server). ``agentrun`` is the name of agentrun's own server and cannot be reused."""

    servers: dict[str, McpServer] = Field(default_factory=dict)
    roles: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> McpConfig:
        for name in self.servers:
            if name == "agentrun":
                raise ValueError(
                    "servers.agentrun: 'agentrun' is reserved for agentrun's own server; "
                    "give yours another name"
                )
            if not _SERVER_NAME.match(name):
                raise ValueError(f"servers.{name}: a server name is letters, digits, '_' and '-'")
        for role, names in self.roles.items():
            unknown = [n for n in names if n not in self.servers]
            if unknown:
                raise ValueError(
                    f"roles.{role}: {unknown[0]!r} is not a server of [mcp.servers]"
                    + (f" ({', '.join(sorted(self.servers))})" if self.servers else "")
                )
        return self

    def servers_for(self, role: str) -> tuple[str, ...]:
        """The names of the servers a role's sessions get, in the order configured."""
        if not self.roles:
            return tuple(self.servers)
        return self.roles.get(role, self.roles.get("default", ()))
