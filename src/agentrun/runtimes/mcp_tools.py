"""The user's MCP servers as tools of an API runtime's session.

At the session's open every server of the role (``SessionSpec.mcp_servers``) is started
or reached, initialized and asked for its tools; each tool is offered to the model as
``SERVER__tool`` with the server's own input schema, and its calls are routed back. A
server that cannot start fails the session (the runtime reports it as unavailable, so
the role's next alternate runs). A server that fails later (it exits, goes silent past
its ``timeout_seconds``, answers garbage) only fails that call: the model gets the one
line as an error result and the session goes on; a server that exited stays gone for
the rest of the session. Everything is closed at the session's end.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentrun import procs
from agentrun.runtimes.mcp.client import Client, McpError, Tool
from agentrun.runtimes.mcp.servers import ServerSpec
from agentrun.runtimes.tool_catalog import ToolResult, ToolSpec

# What both providers accept as a tool's name: OpenAI's functions and Anthropic's tools
# are ^[a-zA-Z0-9_-]{1,64}$.
NAME_LIMIT = 64
NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")
DESCRIPTION_CHARS = 1_000


def connect(
    spec: ServerSpec,
    cwd: Path,
    env: dict[str, str],
    sandbox: procs.Sandbox | None = None,
    cancel: threading.Event | None = None,
) -> Client:
    """Start (``command``) or reach (``url``) one server and initialize it."""
    from agentrun.runtimes.mcp.stdio import StdioTransport
    from agentrun.runtimes.mcp.streamable import HttpTransport

    if spec.url is not None:
        transport: StdioTransport | HttpTransport = HttpTransport(
            spec.name, spec.url, spec.timeout_seconds
        )
    else:
        assert spec.command is not None
        argv = [spec.command, *spec.args]
        transport = StdioTransport(spec.name, argv, cwd, {**env, **spec.env}, sandbox)
    client = Client(spec.name, transport, spec.timeout_seconds)
    try:
        client.initialize(cancel)
    except BaseException:
        client.close()
        raise
    return client


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """``server__tool`` as a name both providers accept, unique among ``taken``: other
    characters become ``_``; an over-long or colliding name ends with a hash instead."""
    wanted = f"{server}__{tool}"
    name = NOT_IN_NAMES.sub("_", wanted)
    if len(name) > NAME_LIMIT or name in taken:
        digest = hashlib.sha256(wanted.encode()).hexdigest()
        for width in (8, 12, 16, 64):
            name = f"{name[: NAME_LIMIT - width - 1]}_{digest[:width]}"
            if name not in taken:
                break
    return name


class UserTools:
    """The servers of one session and the tools they offer, by the name the model sees."""

    def __init__(self) -> None:
        self.clients: list[Client] = []
        self.specs: list[ToolSpec] = []
        self.routes: dict[str, tuple[Client, str]] = {}

    @classmethod
    def start(
        cls,
        servers: Iterable[ServerSpec],
        cwd: Path,
        env: dict[str, str],
        taken: Iterable[str],
        sandbox: procs.Sandbox | None = None,
        cancel: threading.Event | None = None,
    ) -> UserTools:
        """Every server started and listed; McpError (all closed again) when one fails."""
        tools = cls()
        names = set(taken)
        try:
            for spec in servers:
                client = connect(spec, cwd, env, sandbox, cancel)
                tools.clients.append(client)
                for tool in client.tools(cancel):
                    tools._offer(client, tool, names)
        except BaseException:
            tools.close()
            raise
        return tools

    def _offer(self, client: Client, tool: Tool, taken: set[str]) -> None:
        if any(route == (client, tool.name) for route in self.routes.values()):
            return  # listed twice by its server
        name = tool_name(client.name, tool.name, taken)
        taken.add(name)
        said = f"[MCP server {client.name}, tool {tool.name}] {tool.description}".strip()
        description = said[:DESCRIPTION_CHARS]
        self.specs.append(ToolSpec(name, description, input_schema=tool.input_schema))
        self.routes[name] = (client, tool.name)

    def summary(self) -> str:
        """One line a server, for the transcript."""
        lines = []
        for client in self.clients:
            names = [name for name, (c, _) in self.routes.items() if c is client]
            listed = ", ".join(names) if names else "no tools"
            lines.append(f"[mcp] {client.name} (protocol {client.version}): {listed}\n")
        return "".join(lines)

    def call(
        self, name: str, arguments: dict[str, Any], deadline: float, cancel: threading.Event
    ) -> ToolResult | None:
        """Run the tool the model calls ``name``; None when no server offers it."""
        route = self.routes.get(name)
        if route is None:
            return None
        client, tool = route
        left = deadline - time.monotonic()
        if left <= 0:
            return ToolResult("not run: the session has no time left", error=True)
        try:
            done = client.call(tool, arguments, timeout=left, cancel=cancel)
        except McpError as exc:
            return ToolResult(str(exc), error=True)
        return ToolResult(done.text, error=done.error)

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.clients = []
