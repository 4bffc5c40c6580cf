"""Claude Code and Codex report through agentrun's MCP server, and start the user's servers.

The real CLIs (pinned in ``tests/clients``) against the scripted model: every phase ends
with a tool call the CLI routes to ``git-agentrun mcp``, which it started from the
configuration agentrun gave it; nothing runs a shell verb. Codex offers an MCP server's
tools in a namespace (``mcp__agentrun``) when its model's metadata does not defer them
behind its ``tool_search`` tool, so its model here is one Codex has no metadata for.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pygit2
import pytest
from runner.helpers import configure, payloads
from runtimes.test_cli_runtimes import (
    GOAL,
    PLAN,
    VERIFY,
    ModelServer,
    Step,
    ToolCall,
    _codex_homes,
    _no_orphans,
    assert_whole_build,
    claude_table,
    claude_write,
    codex_home,
    codex_table,
    codex_write,
    run_with,
    story,
    toml_table,
    tool_agent,
    transcript,
)
from runtimes.test_isolated_clis import MODES, repo_outside_tmp, roles

from agentrun.commands.build import create_build, run_build

# The shared modules' fixtures, used here.
__all__ = ["_codex_homes", "_no_orphans", "repo_outside_tmp"]
SECRET = "probe-7f3a9c2e51d8"
CODEX_MODEL = "mock-model"  # not in Codex's catalogue: MCP tools offered, not searched for


def claude_tool(verb: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(f"mcp__agentrun__{verb}", arguments)


def codex_tool(verb: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(verb, arguments, namespace="mcp__agentrun")


def mcp_script(tool: Any, write: Any) -> dict[str, list[Step]]:
    return {
        "plan@1": [(tool("context", {}),), (tool("plan", {"plan": PLAN + "\n"}),)],
        "plan-review@1": [(tool("approve", {}),)],
        "implement@1": [
            (write("hello.txt", "hello\n"),),
            (tool("done", {"summary": "add hello.txt"}),),
        ],
        "code-review@1": [(tool("revise", {"findings": ["say it louder"]}),)],
        "implement@2": [
            (write("hello.txt", "HELLO\n"),),
            (tool("done", {"summary": "louder"}),),
        ],
        "code-review@2": [(tool("approve", {}),)],
    }


@pytest.mark.parametrize("mode", MODES)
def test_codex_reports_through_agentrun_mcp_isolated(
    mode: str, repo_outside_tmp: tuple[Path, pygit2.Repository], tmp_path: Path
) -> None:
    # The server runs where Codex runs, inside agentrun's sandbox, and queues in the outbox.
    repo_path, repo = repo_outside_tmp
    with ModelServer(tool_agent(mcp_script(codex_tool, codex_write))) as server:
        table = codex_table(server.url, tmp_path / "unused")
        table["model"] = CODEX_MODEL
        del table["env"]["CODEX_HOME"]  # the per-build HOME holds Codex's own
        slug, outcome = run_with(repo_path, repo, {"codex": table}, roles("codex", mode))

    assert_whole_build(repo_path, repo, slug, outcome)
    assert "outbox 0001.json: plan submitted (plan-r1.md)" in plan_session(repo, slug)


def plan_session(repo: pygit2.Repository, slug: str) -> str:
    started = [p for p in payloads(repo, slug, "session.started") if p.phase == "plan"]
    return transcript(repo, slug, started[0].session)


def test_claude_reports_every_phase_through_agentrun_mcp(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    with ModelServer(tool_agent(mcp_script(claude_tool, claude_write))) as server:
        tables = {"claude": claude_table(server.url)}
        slug, outcome = run_with(repo_path, repo, tables, 'roles.default = ["claude"]')

    assert_whole_build(repo_path, repo, slug, outcome)
    said = plan_session(repo, slug)
    assert "[tool mcp__agentrun__context]" in said and f"Goal\n  \n  {GOAL}" in said
    assert "[tool mcp__agentrun__plan]" in said and "plan queued in" in said
    assert "[tool Bash]" not in story(repo, slug)  # no shell verb anywhere
    # The prompt told the agent about the tools.
    first = server.model_requests()[0].text()
    assert "agentrun's MCP tools" in first and "`plan`, `escalate`" in first


def test_codex_reports_every_phase_through_agentrun_mcp(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    with ModelServer(tool_agent(mcp_script(codex_tool, codex_write))) as server:
        table = codex_table(server.url, codex_home(tmp_path))
        table["model"] = CODEX_MODEL
        slug, outcome = run_with(repo_path, repo, {"codex": table}, 'roles.default = ["codex"]')

    assert_whole_build(repo_path, repo, slug, outcome)
    said = plan_session(repo, slug)
    assert "[mcp_tool_call]" in said and '"tool": "plan"' in said
    assert "outbox 0001.json: plan submitted (plan-r1.md)" in said


# --- the user's servers ----------------------------------------------------------------

PROBE = """\
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "probe", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "whoami", "description": "the server's token",
                        "inputSchema": {"type": "object", "properties": {}}}]}
    elif m["method"] == "tools/call":
        said = "the probe holds " + os.environ.get("PROBE_TOKEN", "nothing")
        model = ("ANTHROPIC_", "CLAUDE", "OPENAI_", "CODEX_", "MOCK_")
        held = [k for k in os.environ if k.startswith(model)]
        said += "; model variables: " + (",".join(held) or "none")
        r = {"content": [{"type": "text", "text": said}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"""


BROKEN = {
    "crash": ("import sys; sys.exit(3)", 20),
    "silent": ("import time; time.sleep(600)", 3),  # never answers `initialize`
}


def mcp_tables(tmp_path: Path, broken: str | None = None) -> str:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    args, timeout = (["-c", BROKEN[broken][0]], BROKEN[broken][1]) if broken else ([str(probe)], 20)
    return (
        "[mcp.servers.probe]\n"
        f"command = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"
        f'pass_env = ["PROBE_TOKEN"]\ntimeout_seconds = {timeout}\n'
    )


def runtime_table(kind: str, url: str, tmp_path: Path) -> dict[str, Any]:
    if kind == "claude":
        return claude_table(url)
    table = codex_table(url, codex_home(tmp_path))
    table["model"] = CODEX_MODEL
    return table


@pytest.mark.parametrize("kind", ["claude", "codex"])
def test_a_user_server_is_started_and_its_secret_scrubbed(
    kind: str,
    repo_path: Path,
    repo: pygit2.Repository,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROBE_TOKEN", SECRET)  # the runner's environment, which pass_env reads
    if kind == "claude":
        probe = ToolCall("mcp__probe__whoami", {})
        script = mcp_script(claude_tool, claude_write)
    else:
        probe = ToolCall("whoami", {}, namespace="mcp__probe")
        script = mcp_script(codex_tool, codex_write)
    script["implement@1"] = [(probe,), *script["implement@1"]]
    with ModelServer(tool_agent(script)) as server:
        tables = {kind: runtime_table(kind, server.url, tmp_path)}
        roles = f'roles.default = ["{kind}"]\n' + mcp_tables(tmp_path)
        slug, outcome = run_with(repo_path, repo, tables, roles)

    assert_whole_build(repo_path, repo, slug, outcome)
    # The model read the server's answer; the log and transcripts never hold the secret.
    said = [r.tool_results() for r in server.model_requests()]
    assert any(f"the probe holds {SECRET}" in t for results in said for t in results)
    # The server got its own token, not the model's key nor the CLI's own variables.
    assert any("; model variables: none" in t for results in said for t in results), said
    told = story(repo, slug)
    assert "the probe holds [redacted]" in told and SECRET not in told


# Claude Code has one start-up timeout for all its servers, agentrun's (60 s) included: a
# silent server is Codex's case here, whose timeout is each server's own.
@pytest.mark.parametrize(
    ("kind", "broken"), [("claude", "crash"), ("codex", "crash"), ("codex", "silent")]
)
def test_a_user_server_that_cannot_start_moves_on_to_the_alternate(
    kind: str, broken: str, repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    scripted = {"kind": "script", "script": "agent-script.toml"}
    with ModelServer(tool_agent({})) as server:
        table = runtime_table(kind, server.url, tmp_path)
        configure(
            repo_path,
            [{"phase": "implement", "write": {"hello.txt": "HELLO\n"}}],
            base=f'roles.default = ["{kind}", "scripted"]\n'
            + toml_table(kind, table)
            + toml_table("scripted", scripted)
            + mcp_tables(tmp_path, broken)
            + VERIFY,
        )
        created = create_build(repo, GOAL)
        outcome = run_build(repo, created.slug)

    slug = created.slug
    assert outcome.state.state_name == "complete", story(repo, slug)
    started = payloads(repo, slug, "session.started")
    assert [p.runtime for p in started] == [kind, "scripted"] * 4
    failed = [p for p in payloads(repo, slug, "session.ended") if p.outcome != "ok"]
    assert len(failed) == 4
    assert all("MCP server probe could not start" in p.error for p in failed), story(repo, slug)
    assert not payloads(repo, slug, "phase.failed")
