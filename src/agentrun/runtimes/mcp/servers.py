"""The MCP servers a session gets: the user's ``[mcp.servers]`` for its role, resolved.

A server's environment is the session's own (the allow-listed one every agent gets) plus
what its table says: ``env`` as written, and ``pass_env``'s variables copied from the
runner's environment (the config refuses a pattern that would reach a forge token). The
values are credentials as far as scrubbing goes: a server's key must never reach a
transcript, a commit or a comment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentrun.config import Config
from agentrun.environment import matches


@dataclass(frozen=True)
class ServerSpec:
    """One server as a runtime starts or reaches it."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # on top of the session's environment
    url: str | None = None
    timeout_seconds: float = 60


def user_servers(config: Config, role: str, environ: Mapping[str, str]) -> tuple[ServerSpec, ...]:
    """The user's servers ``role``'s sessions get, with their environment resolved."""
    specs = []
    for name in config.mcp.servers_for(role):
        server = config.mcp.servers[name]
        env = {k: v for k, v in environ.items() if server.pass_env and matches(k, server.pass_env)}
        env.update(server.env)
        specs.append(
            ServerSpec(
                name=name,
                command=server.command,
                args=server.args,
                env=env,
                url=server.url,
                timeout_seconds=server.timeout_seconds,
            )
        )
    return tuple(specs)


def secret_values(specs: tuple[ServerSpec, ...]) -> tuple[str, ...]:
    """Every value a server's environment holds, for ``secrets.remember`` when a session is
    given them (as a runtime's ``env`` values are): scrubbed wherever text is written."""
    return tuple(sorted({v for spec in specs for v in spec.env.values() if v}))
