"""A user's stdio MCP server runs in the session's sandbox: it finds no token either.

A real ``git agentrun run`` as CI starts it (``security/ci_run.py``: ``GITHUB_TOKEN``
exported, the token in HOME's credentials and in the repository's config), with the
``openai`` runtime for implement against the scripted model server. The model calls the
``hunt`` tool of a user's MCP server (the reference SDK's, ``support/mcp_server.py``);
the tool runs the hostile agent's hunt (``security/hostile_agent.py``) from inside the
server, as the server. Isolated, it finds the token nowhere; with ``mode = "none"`` the
same hunt finds it (the test can fail).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from security.ci_run import AGENT, Run, git, launch, prepare
from security.test_hostile import assert_found_nothing, leaks
from support.mcp_server import __file__ as SERVER
from support.model_server import ModelServer, Request, ToolCall, Turn

from agentrun.events import AgentDone, SessionEnded

KEY = "MOCK_KEY"


def hunter(request: Request) -> Turn:
    if not request.tool_results():
        return Turn(text="hunting", tool_calls=(ToolCall("hunt__hunt", {}),))
    return Turn(text="done", tool_calls=(ToolCall("done", {"summary": "hunted"}),))


def run_hunt(root: Path, mode: str) -> tuple[Run, list[Request]]:
    repo_path, env, token = prepare(root, mode)
    server_env = {
        "REAL_HOME": str(root / "home"),
        "HUNT_ONLY": "quiet",
        "HUNT_SCRIPT": AGENT,
    }
    with ModelServer(hunter) as model:
        (repo_path / "tools" / "mcp_server.py").write_bytes(Path(SERVER).read_bytes())
        (repo_path / ".agentrun.toml").write_text(
            f"""\
[roles]
default = ["scripted"]
implement = ["api"]

[runtimes.scripted]
kind = "script"
script = "agent-script.toml"

[runtimes.api]
kind = "openai"
base_url = "{model.url}/v1"
model = "mock"
api_key_env = "{KEY}"

[mcp.servers.hunt]
command = {json.dumps(sys.executable)}
args = ["tools/mcp_server.py"]
env = {json.dumps(server_env).replace('": ', '" = ')}
timeout_seconds = 120

[pipeline]
plan_review = false

[isolation]
mode = "{mode}"
"""
        )
        git(repo_path, "add", "-A", env=env)
        git(repo_path, "commit", "-q", "-m", "a user's MCP server", env=env)
        run = launch(root, repo_path, env | {KEY: "k-test-123"}, token, mode, None)
        return run, model.model_requests()


@pytest.mark.parametrize("mode", ["namespace", "user"])
def test_a_stdio_server_of_an_isolated_session_finds_no_token(tmp_path: Path, mode: str) -> None:
    run, requests = run_hunt(tmp_path, mode)

    assert run.code == 0, run.output
    assert requests[-1].tool_results()[0] == "hunt exited 0"  # the server's hunt ran
    assert_found_nothing(run)
    if mode == "namespace":  # a fresh /proc: bwrap, the server, the hunt and its children
        assert len(run.found("pids").split()) < 10, run.found("pids")
    done = [p for p in run.payloads() if isinstance(p, AgentDone)]
    assert [d.summary_text for d in done] == ["hunted"]
    ended = [p for p in run.payloads() if isinstance(p, SessionEnded)]
    assert all(e.outcome == "ok" for e in ended)


def test_without_isolation_the_same_server_finds_the_token(tmp_path: Path) -> None:
    run, _ = run_hunt(tmp_path, "none")
    assert run.code == 0, run.output
    assert leaks(run, "proc-environ") != []
    assert leaks(run, "own-environ") == []  # the server's environment is the session's
