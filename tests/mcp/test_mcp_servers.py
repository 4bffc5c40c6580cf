"""The user's MCP servers a role's sessions get, with their environment resolved."""

from __future__ import annotations

from agentrun.config import parse_config
from agentrun.runtimes.mcp.servers import ServerSpec, secret_values, user_servers

CONFIG = """
[mcp.servers.docs]
command = "docs-mcp"
args = ["--stdio"]
env = { DOCS_MODE = "read-only-please" }
pass_env = ["DOCS_*"]

[mcp.servers.search]
url = "http://127.0.0.1:9/mcp"
timeout_seconds = 5

[mcp.roles]
default = ["docs"]
implement = ["search", "docs"]
"""


def test_a_role_gets_its_servers_with_env_and_pass_env_resolved() -> None:
    config = parse_config(CONFIG, "t.toml")
    environ = {"DOCS_TOKEN": "d0cs-t0ken-value-1234", "OTHER_TOKEN": "nope-nope-nope-nope"}
    implement = user_servers(config, "implement", environ)
    assert [s.name for s in implement] == ["search", "docs"]
    assert implement[0] == ServerSpec(
        name="search", url="http://127.0.0.1:9/mcp", timeout_seconds=5
    )
    docs = implement[1]
    assert (docs.command, docs.args) == ("docs-mcp", ("--stdio",))
    assert docs.env == {"DOCS_TOKEN": "d0cs-t0ken-value-1234", "DOCS_MODE": "read-only-please"}
    assert [s.name for s in user_servers(config, "plan", environ)] == ["docs"]
    assert secret_values(implement) == ("d0cs-t0ken-value-1234", "read-only-please")


def test_without_servers_a_session_gets_none() -> None:
    assert user_servers(parse_config("", "t.toml"), "implement", {"A": "b"}) == ()
