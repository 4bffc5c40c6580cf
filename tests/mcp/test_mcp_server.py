"""``git agentrun mcp`` driven by the MCP reference SDK's client, and by raw bytes.

A whole build whose every phase is a ``command`` agent (a real process) that connects to
``git-agentrun mcp`` with the reference client (``mcp`` from PyPI, pinned in the test
extra), lists the tools, and reports only through them: each phase's tools, a verb that
does not fit (a tool error naming the verbs that fit, nothing recorded), arguments that
do not match the schema, a tool agentrun does not have (a protocol error), ``context``.
Then the protocol itself on a pipe: malformed lines are JSON-RPC errors and the server
reads on.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pygit2
from runner.helpers import cli_env, command_agent, configure, payloads

from agentrun.commands.build import create_build, run_build
from agentrun.store.memory import read as read_memory

GOAL = "Add the feature"
PLAN = "1. Add feature.txt.\n"

# Each session connects with the reference client, plays AGENT_CALLS[its phase], and writes
# what it saw to $AGENT_STATE/<phase>-<n>.json. ["write", PATH, TEXT] writes a file.
MCP_AGENT = """\
import asyncio, json, os, sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

sys.stdin.read()
state = Path(os.environ["AGENT_STATE"])
phase = os.environ["AGENTRUN_PHASE"].split("@")[0]


async def main():
    params = StdioServerParameters(
        command="git-agentrun", args=["mcp"], env=dict(os.environ), cwd=os.getcwd()
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            seen = {
                "protocol": init.protocolVersion,
                "server": init.serverInfo.name,
                "tools": {t.name: t.inputSchema for t in listed.tools},
                "calls": [],
            }
            for call in json.loads(os.environ["AGENT_CALLS"]).get(phase, []):
                if call[0] == "write":
                    Path(call[1]).write_text(call[2])
                    continue
                try:
                    result = await session.call_tool(call[0], call[1])
                except McpError as exc:
                    seen["calls"].append({"tool": call[0], "protocol_error": exc.error.message})
                    continue
                text = result.content[0].text
                seen["calls"].append({"tool": call[0], "error": result.isError, "text": text})
    number = len(list(state.glob(phase + "-*.json")))
    (state / f"{phase}-{number}.json").write_text(json.dumps(seen))


asyncio.run(main())
"""

CALLS: dict[str, list[list[Any]]] = {
    "plan": [
        ["context", {}],
        ["approve", {}],  # not a plan verb
        ["plan", {"plan": 1}],  # not a string
        ["plan", {"plan": PLAN}],
    ],
    "plan-review": [["revise", {"findings": "one"}], ["approve", {}]],
    "implement": [
        ["write", "feature.txt", "made through MCP\n"],
        ["nope", {}],  # no such tool
        ["done", {"summary": "added", "colour": "red"}],  # an argument done does not take
        ["remember", {"text": "feature.txt is made by the MCP agent", "paths": ["feature.txt"]}],
        ["done", {"summary": "added feature.txt"}],
        ["done", {"summary": "again"}],  # the session already reported
    ],
    "code-review": [["usage", {"tokens_in": 1200, "tokens_out": 34}], ["approve", {}]],
}


def seen(state: Path, phase: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((state / f"{phase}-0.json").read_text())
    return data


def test_a_whole_build_reports_through_the_reference_client(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    table, state = command_agent(tmp_path, source=MCP_AGENT, env={"AGENT_CALLS": json.dumps(CALLS)})
    configure(repo_path, base='[roles]\ndefault = ["agent"]\n', extra=table)
    slug = create_build(repo, GOAL).slug
    outcome = run_build(repo, slug)

    assert outcome.state.state_name == "complete"
    plan = seen(state, "plan")
    assert (plan["protocol"], plan["server"]) == ("2025-06-18", "agentrun")
    # A command agent's runtime cannot see its usage: `usage` is offered to it.
    assert list(plan["tools"]) == ["context", "plan", "escalate", "remember", "usage"]
    assert plan["tools"]["plan"]["required"] == ["plan"]
    context, misfit, bad, submitted = plan["calls"]
    assert not context["error"] and GOAL in context["text"]
    assert "[also written to .agentrun/run/context.md]" in context["text"]
    assert misfit == {
        "tool": "approve",
        "error": True,
        "text": "refused: `approve` does not fit phase plan; use one of: plan, escalate",
    }
    assert bad == {
        "tool": "plan",
        "error": True,
        "text": "refused: `plan` must be a string; nothing recorded",
    }
    assert not submitted["error"] and "plan submitted (plan-r1.md)" in submitted["text"]

    review = seen(state, "plan-review")
    assert list(review["tools"]) == [
        "context",
        "approve",
        "revise",
        "escalate",
        "remember",
        "usage",
    ]
    assert review["calls"][0]["text"] == (
        "refused: `findings` must be a list of strings; nothing recorded"
    )

    unknown, extra, fact, done, again = seen(state, "implement")["calls"]
    assert unknown["protocol_error"].startswith("unknown tool 'nope'; agentrun's tools are:")
    assert extra["text"] == (
        "refused: `done` takes no argument 'colour' (its arguments: summary); nothing recorded"
    )
    assert not fact["error"] and "fact queued" in fact["text"]
    assert not done["error"] and "done queued in .agentrun/run/outbox/" in done["text"]
    assert again["error"] and "already queued a report" in again["text"]

    counted = seen(state, "code-review")["calls"][0]
    assert not counted["error"] and "usage queued" in counted["text"]
    review_ids = {p.session for p in payloads(repo, slug, "session.started")}
    ended = [e for e in payloads(repo, slug, "session.ended") if e.session in review_ids]
    assert (ended[-1].usage.tokens_in, ended[-1].usage.tokens_out) == (1200, 34)

    # What was refused recorded nothing: one verdict per review, one done per implement.
    assert [v.verdict for v in payloads(repo, slug, "plan-review.verdict")] == ["approve"]
    assert [d.summary_text for d in payloads(repo, slug, "agent.done")] == ["added feature.txt"]
    facts = [(f.text, f.state) for f in read_memory(repo).facts.values()]
    assert facts == [("feature.txt is made by the MCP agent", "proposed")]


# --- the protocol on a pipe -------------------------------------------------------------


def exchange(lines: list[bytes], repo_path: Path) -> list[dict[str, Any]]:
    """Feed ``lines`` to a server of a session that does not exist; its answers."""
    env = cli_env(
        {"AGENTRUN_BUILD": "no-such", "AGENTRUN_PHASE": "implement@1", "AGENTRUN_SESSION": "s-1"}
    )
    done = subprocess.run(
        ["git-agentrun", "mcp"],
        input=b"".join(lines),
        cwd=repo_path,
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def request(rid: object, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body).encode() + b"\n"


def test_malformed_lines_are_protocol_errors_and_the_server_reads_on(repo_path: Path) -> None:
    answers = exchange(
        [
            b"this is not json\n",
            b'{"jsonrpc": "2.0", "id": 7, "method": \n',  # cut short
            b"\xff\xfe not utf-8\n",
            b"[1, 2]\n",  # a batch
            b'{"jsonrpc": "1.0", "id": 8, "method": "ping"}\n',
            b'{"jsonrpc": "2.0", "id": true, "method": "ping"}\n',
            b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": [1]}\n',
            b"\n",
            b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
            b'{"jsonrpc": "2.0", "id": 99, "result": {}}\n',  # a response nobody asked for
            request(1, "initialize", {"protocolVersion": "2024-11-05", "capabilities": {}}),
            request("two", "ping"),
            request(3, "resources/list"),
            request(4, "tools/call", {"arguments": {}}),
            request(5, "tools/call", {"name": "done", "arguments": "x"}),
            request(6, "tools/call", {"name": "done", "arguments": {"summary": "s"}}),
            request(10, "initialize", {"protocolVersion": "1999-01-01"}),
        ],
        repo_path,
    )
    errors = [(a["id"], a["error"]["code"]) for a in answers if "error" in a]
    assert errors == [
        (None, -32700),
        (None, -32700),
        (None, -32700),
        (None, -32600),
        (8, -32600),
        (None, -32600),
        (9, -32602),
        (3, -32601),
        (4, -32602),
        (5, -32602),
    ]
    results = {a["id"]: a["result"] for a in answers if "result" in a}
    assert results[1]["protocolVersion"] == "2024-11-05"  # the client's, which it speaks
    assert results[1]["capabilities"] == {"tools": {"listChanged": False}}
    assert results["two"] == {}
    assert results[10]["protocolVersion"] == "2025-06-18"  # unknown: its own newest
    # A call the verb refuses is a tool result the model reads, not a protocol error.
    assert results[6]["isError"] is True
    assert "no-such" in results[6]["content"][0]["text"]


def test_outside_a_session_it_says_so_in_one_line(repo_path: Path) -> None:
    done = subprocess.run(
        ["git-agentrun", "mcp"],
        input=b"",
        cwd=repo_path,
        env=cli_env(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        "agentrun: agent verbs run inside an agentrun session: AGENTRUN_BUILD, "
        "AGENTRUN_PHASE and AGENTRUN_SESSION must be set (the runner sets them for the agent)"
    ]
