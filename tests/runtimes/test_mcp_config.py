"""The MCP configuration Claude Code and Codex get, as data (the real CLIs read it in
test_mcp_clis.py): what goes where, and what a failed start looks like."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

from agentrun.runtimes import mcp_config
from agentrun.runtimes.mcp.servers import ServerSpec

SESSION = {
    "AGENTRUN_BUILD": "b",
    "AGENTRUN_PHASE": "implement@1",
    "AGENTRUN_SESSION": "s-1",
    "AGENTRUN_GIT_DIR": "/repo/.git",
    "PATH": "/nowhere",
    "SHARED": "session value",
}


def test_agentrun_serves_only_a_real_session() -> None:
    user = (ServerSpec("docs", url="https://docs.example.com/mcp"),)
    own, docs = mcp_config.session_servers(SESSION, user)
    assert (own.name, own.args, own.env["AGENTRUN_PHASE"]) == ("agentrun", ("mcp",), "implement@1")
    assert docs is user[0]
    outside = {k: v for k, v in SESSION.items() if k != "AGENTRUN_SESSION"}
    assert mcp_config.session_servers(outside, user) == user


def test_claude_gets_a_private_file_and_every_servers_tools(tmp_path: Path) -> None:
    servers = mcp_config.session_servers(
        SESSION,
        (
            ServerSpec("tracker", "tracker-mcp", ("--stdio",), {"TRACKER_KEY": "k-123"}),
            ServerSpec("docs", url="https://docs.example.com/mcp", timeout_seconds=90),
        ),
    )
    path = mcp_config.claude_config(servers, tmp_path, SESSION)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the agent's account: by ACL
    entries = json.loads(path.read_text())["mcpServers"]
    values = tmp_path / "tracker.env"
    assert stat.S_IMODE(values.stat().st_mode) == 0o640
    assert entries["tracker"] == {
        "type": "stdio",
        "command": "/usr/bin/env",
        "args": ["-i", "/bin/sh", "-c", mcp_config.SOURCE, str(values), "tracker-mcp", "--stdio"],
        "env": {},  # the key is in the private file, not on a command line or in Claude's env
    }
    assert "k-123" not in path.read_text()
    assert entries["agentrun"]["env"]["AGENTRUN_SESSION"] == "s-1"
    assert entries["docs"] == {"type": "http", "url": "https://docs.example.com/mcp"}
    assert mcp_config.allowed_tools(servers) == [
        "mcp__agentrun__*",
        "mcp__tracker__*",
        "mcp__docs__*",
    ]
    assert mcp_config.claude_timeouts(servers) == {
        "MCP_TIMEOUT": "90000",
        "MCP_TOOL_TIMEOUT": "90000",
    }


def test_codex_gets_settings_and_values_through_its_environment(tmp_path: Path) -> None:
    servers = (
        ServerSpec("one", "one-mcp", (), {"TOKEN_A": "a-1", "SHARED": "session value"}),
        ServerSpec("two", "two-mcp", ("x y",), {"TOKEN_A": "a-2", "SHARED": "other"}),
        ServerSpec("web", url="https://x.example/mcp", timeout_seconds=5),
    )
    argv, carried = mcp_config.codex_settings(servers, tmp_path, SESSION)
    assert argv[0::2] == ["-c"] * 3
    tables = {}
    for setting in argv[1::2]:
        key, _, value = setting.partition("=")
        tables[key] = tomllib.loads(f"v = {value}")["v"]
    one, two, web = (tables[f"mcp_servers.{n}"] for n in ("one", "two", "web"))
    # Values travel in Codex's environment, named; a clash with a value already there
    # goes inline for that server only.
    assert carried == {"TOKEN_A": "a-1", "SHARED": "session value"}
    assert (one["env_vars"], "env" in one) == (["TOKEN_A", "SHARED"], False)
    assert (two["env_vars"], two["env"]) == ([], {"TOKEN_A": "a-2", "SHARED": "other"})
    assert (two["args"], two["cwd"]) == (["x y"], str(tmp_path))
    assert web == {
        "url": "https://x.example/mcp",
        "startup_timeout_sec": 5,
        "tool_timeout_sec": 5,
        "required": True,
        "default_tools_approval_mode": "approve",
    }
    assert not any("a-1" in part for part in argv)


def test_a_server_that_did_not_start_is_named() -> None:
    init = {
        "type": "system",
        "subtype": "init",
        "mcp_servers": [
            {"name": "agentrun", "status": "connected"},
            {"name": "probe", "status": "failed"},
            {"name": "slow", "status": "pending"},
        ],
    }
    assert mcp_config.claude_failed(init) == ["probe"]
    assert mcp_config.claude_failed({"type": "system"}) == []
    said = (
        "Error: thread/start failed: Fatal error: Failed to initialize session: required MCP "
        "servers failed to initialize: probe: handshaking with MCP server failed: closed"
    )
    assert mcp_config.codex_failed(f"noise\n{said}\n") == (
        "probe",
        "handshaking with MCP server failed: closed",
    )
    assert mcp_config.codex_failed("Error: stream disconnected") is None
    assert mcp_config.failure("probe", "closed") == (
        "MCP server probe could not start (closed); the session cannot run without it"
    )


def test_a_user_server_under_claude_gets_the_session_less_its_provider_key(
    tmp_path: Path,
) -> None:
    """The command Claude Code would run, run for real with Claude Code's environment: the
    server sees the session's variables and its own, not the model's key or Claude's."""
    printer = tmp_path / "printenv.py"
    printer.write_text("import json, os, sys; json.dump(dict(os.environ), sys.stdout)")
    session = {**SESSION, "PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-ant-model-key"}
    session |= {"CLAUDE_CODE_MAX_RETRIES": "0", "ODD VALUE": "x", "QUOTED": "it's $HOME `x`"}
    spec = ServerSpec("tracker", sys.executable, (str(printer),), {"TRACKER_KEY": "k-123"})
    path = mcp_config.claude_config((spec,), tmp_path, session)
    entry = json.loads(path.read_text())["mcpServers"]["tracker"]
    claude = {**session, "CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "c-1"}  # what it adds
    done = subprocess.run(
        [entry["command"], *entry["args"]], env=claude, capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout)
    assert seen["TRACKER_KEY"] == "k-123" and seen["SHARED"] == "session value"
    assert seen["QUOTED"] == "it's $HOME `x`"
    assert seen["AGENTRUN_SESSION"] == "s-1"
    leaked = [k for k in seen if k.startswith(("ANTHROPIC_", "CLAUDE"))]
    assert leaked == []
