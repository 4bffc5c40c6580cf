"""``git agentrun mcp``: the session's agent verbs as MCP tools (inside a session)."""

from __future__ import annotations

import os

import click


@click.command("mcp")
def mcp() -> None:
    """Serve this session's agent verbs as MCP tools on stdin/stdout (an agent CLI starts it)."""
    from pathlib import Path

    from agentrun.cli.mcp_server import serve_stdio

    serve_stdio(os.environ, Path.cwd())
