"""The MCP servers a Claude Code or Codex session gets, in each CLI's own configuration.

Every session gets agentrun's own server (``git-agentrun mcp``, found on the session's
PATH, where the runner put it: ``runner.environment.entry_point``) and the user's servers
for its role (``SessionSpec.mcp_servers``). The CLI starts them, inside the session's
sandbox when there is one, so they are isolated as the agent is.

- Claude Code: a JSON file in the session's scratch folder (``.agentrun/run/claude/``,
  ignored, never committed) given with ``--mcp-config`` and ``--strict-mcp-config`` (no
  other MCP configuration counts), and each server's tools allowed
  (``mcp__NAME__*``). Claude Code starts a stdio server with its own whole environment
  (its provider key, its session's variables) plus the file's ``env``: a user's server is
  started through ``env -i`` and a private file of exactly the variables it gets instead (the
  session's, less Claude Code's provider variables, plus its own), never on a command
  line. Its start-up and call timeouts are ``MCP_TIMEOUT`` and ``MCP_TOOL_TIMEOUT``.
- Codex: ``-c mcp_servers.NAME={…}`` settings (its CODEX_HOME is the user's or the
  build's: agentrun writes nothing there), each server ``required`` (a server that cannot
  start ends ``codex exec`` at once) with its tools approved (``codex exec`` cannot ask).
  Codex gives a stdio server only a few variables of its own environment plus those
  named in ``env_vars``: a server's values travel in Codex's environment and are named
  there, never on the command line, unless two servers need different values under one
  name.

A server that cannot start fails the session as ``unavailable`` (:func:`failure`), so
that the role's next alternate takes over, as for a provider that cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrun.runtimes.mcp.servers import ServerSpec

AGENTRUN = "agentrun"
# The runtime kinds whose sessions get MCP servers this way (and a prompt that says so).
MCP_KINDS = ("claude", "codex")
# The variables agentrun's server speaks for the session with (runner.environment sets them).
SESSION_VARIABLES = (
    "AGENTRUN_BUILD",
    "AGENTRUN_PHASE",
    "AGENTRUN_SESSION",
    "AGENTRUN_TASK",
    "AGENTRUN_GIT_DIR",
)
DEFAULT_TIMEOUT = 60.0
ENV, SH = "/usr/bin/env", "/bin/sh"  # a user's server under Claude Code starts through them
SOURCE = '. "$0" && exec "$@"'  # the file's variables, then the server in the shell's place
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # what a shell can export
CODEX_FAILED = "required MCP servers failed to initialize:"


def session_servers(env: Mapping[str, str], user: tuple[ServerSpec, ...]) -> tuple[ServerSpec, ...]:
    """agentrun's server for the session whose environment is ``env``, then the user's.

    Without the session's variables (a CLI run outside a build) there is no session for
    agentrun's server to speak for, and it is left out rather than failing to start.
    """
    if not all(env.get(name) for name in SESSION_VARIABLES[:3]):
        return user
    command = shutil.which("git-agentrun", path=env.get("PATH")) or "git-agentrun"
    own = {name: env[name] for name in SESSION_VARIABLES if name in env}
    return (ServerSpec(AGENTRUN, command, ("mcp",), own, None, DEFAULT_TIMEOUT), *user)


def allowed_tools(servers: tuple[ServerSpec, ...]) -> list[str]:
    """Claude Code's permission rules for every tool of these servers."""
    return [f"mcp__{server.name}__*" for server in servers]


def claude_config(servers: tuple[ServerSpec, ...], folder: Path, env: Mapping[str, str]) -> Path:
    """Write Claude Code's ``--mcp-config`` file (not readable by others: a server's
    ``env`` may hold a key) in ``folder``; returns its path. ``env``: the session's."""
    entries: dict[str, Any] = {}
    for server in servers:
        if server.url is not None:
            entries[server.name] = {"type": "http", "url": server.url}
        elif server.name == AGENTRUN:  # agentrun's own: it speaks for Claude Code's session
            entries[server.name] = {
                "type": "stdio",
                "command": server.command,
                "args": list(server.args),
                "env": dict(server.env),
            }
        else:
            values = folder / f"{server.name}.env"
            _private(values, _exports(server_environment(server, env)))
            entries[server.name] = {
                "type": "stdio",
                "command": ENV,
                "args": ["-i", SH, "-c", SOURCE, str(values), server.command, *server.args],
                "env": {},
            }
    path = folder / "mcp.json"
    _private(path, json.dumps({"mcpServers": entries}, indent=2))
    return path


def server_environment(server: ServerSpec, env: Mapping[str, str]) -> dict[str, str]:
    """What a user's server started by Claude Code gets: the session's environment less
    Claude Code's provider variables (its key among them), plus the server's own."""
    from agentrun.environment import matches, provider_patterns

    provider = (*provider_patterns("claude", env), "MCP_TIMEOUT", "MCP_TOOL_TIMEOUT")
    kept = {k: v for k, v in env.items() if _NAME.match(k) and not matches(k, provider)}
    return kept | server.env


def _exports(values: Mapping[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in values.items())


def _private(path: Path, text: str) -> None:
    """Write ``path`` for its owner and, under ``[isolation] mode = "user"``, the agent's
    account: the scratch folder's default ACL names that account, and a file's group bits
    are the ACL's mask (0600 would mask the agent out; the CLI could not read its config)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def claude_timeouts(servers: tuple[ServerSpec, ...]) -> dict[str, str]:
    """Claude Code's start-up and call timeouts (one for all servers: the longest)."""
    longest = max((s.timeout_seconds for s in servers), default=DEFAULT_TIMEOUT)
    millis = str(int(longest * 1000))
    return {"MCP_TIMEOUT": millis, "MCP_TOOL_TIMEOUT": millis}


def codex_settings(
    servers: tuple[ServerSpec, ...], workdir: Path, env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """Codex's ``-c`` arguments for these servers, and the variables to add to Codex's
    environment for them (named in each server's ``env_vars``)."""
    argv: list[str] = []
    carried: dict[str, str] = {}
    for server in servers:
        table: dict[str, Any] = {}
        if server.url is not None:
            table["url"] = server.url
        else:
            named, inline = [], {}
            for key, value in server.env.items():
                if carried.get(key, env.get(key, value)) == value:
                    carried[key] = value
                    named.append(key)
                else:  # the name holds another value already: this server's goes inline
                    inline[key] = value
            table |= {"command": server.command, "args": list(server.args), "cwd": str(workdir)}
            table |= {"env_vars": named, **({"env": inline} if inline else {})}
        timeout = int(server.timeout_seconds)
        table |= {"startup_timeout_sec": timeout, "tool_timeout_sec": timeout, "required": True}
        table["default_tools_approval_mode"] = "approve"
        argv += ["-c", f"mcp_servers.{server.name}={toml_inline(table)}"]
    return argv, carried


def toml_inline(value: object) -> str:
    """A value as TOML (inline tables, arrays, strings, integers, booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string (\\uXXXX escapes) is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    assert isinstance(value, dict)
    pairs = (f"{json.dumps(str(k))} = {toml_inline(v)}" for k, v in value.items())
    return "{" + ", ".join(pairs) + "}"


def claude_failed(init: Mapping[str, Any]) -> list[str]:
    """The servers Claude Code's ``system/init`` event says did not start."""
    servers = init.get("mcp_servers")
    if not isinstance(servers, list):
        return []
    return [
        str(s.get("name"))
        for s in servers
        if isinstance(s, dict) and s.get("status") not in ("connected", "pending")
    ]


def codex_failed(output: str) -> tuple[str, str] | None:
    """The server Codex said did not start, and why (None: it said nothing so)."""
    for line in output.splitlines():
        if CODEX_FAILED in line:
            name, _, why = line.split(CODEX_FAILED, 1)[1].strip().partition(": ")
            return name, why[:300]
    return None


def failure(names: str, why: str = "") -> str:
    said = f" ({why})" if why else ""
    return f"MCP server {names} could not start{said}; the session cannot run without it"
