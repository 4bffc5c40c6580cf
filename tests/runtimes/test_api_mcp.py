"""The ``openai`` and ``anthropic`` runtimes as MCP clients of the user's servers.

Whole builds against the scripted model server over real HTTP, the user's server being
the reference SDK's (``support/mcp_server.py``) over stdio or streamable HTTP: the model
calls its tool and uses the result, then reports with a verb. And the ways a server
fails: it crashes at start (the session fails, the role's alternate runs), never
answers (its timeout, a clear reason), refuses bad arguments or dies in the middle (the
model gets an error result and the session goes on). A token the server gets through
``pass_env`` reaches neither a transcript nor any git object.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pygit2
import pytest
from runner.helpers import SCRIPT, configure, payloads, tip
from runtimes.test_api_runtimes import KINDS, build, builder, call, config_for, phase_of
from support.mcp_server import serving_http
from support.model_server import ModelServer, Request, ToolCall, Turn

from agentrun.store.log import EventLog

SERVER = Path(__file__).parents[1] / "support" / "mcp_server.py"
KEY = "MOCK_KEY"
MEANING = "a polite word said on meeting: hello, world"
TOKEN = "glossary-t0ken-5d41402abc4b2a76"


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY, "k-test-123")


ONLY_IMPLEMENT = '\n[mcp.roles]\nimplement = ["glossary"]\n'


def stdio_server(name: str = "glossary", *flags: str, **extra: Any) -> str:
    args = ", ".join(f'"{a}"' for a in (str(SERVER), *flags))
    lines = [f"[mcp.servers.{name}]", f'command = "{sys.executable}"', f"args = [{args}]"]
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def setup(repo_path: Path, runtimes: str, roles: str, extra: str) -> None:
    configure(repo_path, extra=extra, base=f"[roles]\n{roles}\n\n{runtimes}\n")


def implementing(*steps: Callable[[Request], Turn]) -> Callable[[Request], Turn]:
    """A model that plans and reviews as ``builder`` does, and implements by ``steps``:
    one for each tool result come back so far, each given the request."""

    def respond(request: Request) -> Turn:
        if phase_of(request) != "implement":
            return builder(request)
        return steps[min(len(request.tool_results()), len(steps) - 1)](request)

    return respond


def step(tool: str, /, **arguments: Any) -> Callable[[Request], Turn]:
    turn = Turn(text=f"calling {tool}", tool_calls=(ToolCall(tool, arguments),))
    return lambda _request: turn


def implement_requests(server: ModelServer) -> list[Request]:
    return [r for r in server.model_requests() if phase_of(r) == "implement"]


def transcript_of(repo: pygit2.Repository, slug: str, session: str) -> str:
    ended = next(e for e in payloads(repo, slug, "session.ended") if e.session == session)
    return EventLog(repo).text(tip(repo, slug) or "", ended.transcript or "") or ""


def implement_sessions(repo: pygit2.Repository, slug: str) -> list[Any]:
    return [s for s in payloads(repo, slug, "session.started") if s.phase == "implement"]


def survivors(flag: str) -> list[int]:
    """Test servers this test started with ``flag`` that still run."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = proc.cmdline()
        except psutil.NoSuchProcess:
            continue
        if str(SERVER) in cmdline and flag in cmdline and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(proc.pid)
    return found


# --- a user's tool in a build -------------------------------------------------------


USE_THE_MEANING = implementing(
    step("glossary__define", word="greeting"),
    lambda request: call("write_file", path="greet.txt", content=request.tool_results()[0]),
    step("edit_file", path="README.md", old="hello\n", new="hello, world\n"),
    step("done", summary="greet with the glossary's meaning"),
)


@pytest.mark.parametrize("kind", KINDS)
def test_a_build_calls_a_user_tool_and_uses_its_result(
    kind: str, repo_path: Path, repo: pygit2.Repository
) -> None:
    with ModelServer(USE_THE_MEANING) as server:
        setup(repo_path, config_for(kind, server.url), 'default = ["api"]', stdio_server())
        slug, outcome = build(repo)
        requests = implement_requests(server)

    assert outcome.state.state_name == "complete"
    branch = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Commit).tree
    assert branch["greet.txt"].data.decode() == MEANING
    # The model was offered the server's tools under the server's name, with their schemas.
    first = requests[0].body
    tools = {t.get("name") or t["function"]["name"]: t for t in first["tools"]}
    define = tools["glossary__define"]
    schema = define["input_schema"] if kind == "anthropic" else define["function"]["parameters"]
    assert schema["properties"]["word"]["type"] == "string"
    assert schema["required"] == ["word"]
    assert {"glossary__add", "glossary__die", "read_file", "done"} <= set(tools)
    assert "SERVER__tool come from the user's MCP servers" in requests[0].text()
    assert requests[1].tool_results() == [MEANING]
    (session,) = implement_sessions(repo, slug)
    said = transcript_of(repo, slug, session.session)
    assert "[mcp] glossary (protocol 2025-06-18): glossary__define, glossary__add" in said
    assert '-> glossary__define {"word": "greeting"}' in said
    assert f"<- {MEANING}" in said
    assert survivors(str(SERVER)) == []  # every session's server was ended with it


@pytest.mark.parametrize("answers", ["event-stream", "json"])
def test_a_build_uses_a_streamable_http_server(
    answers: str, repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    with (
        serving_http(tmp_path / "server.log", answers == "json") as url,
        ModelServer(USE_THE_MEANING) as server,
    ):
        extra = f'[mcp.servers.glossary]\nurl = "{url}"\n' + ONLY_IMPLEMENT
        setup(repo_path, config_for("openai", server.url), 'default = ["api"]', extra)
        _, outcome = build(repo)
        requests = implement_requests(server)

    assert outcome.state.state_name == "complete"
    assert requests[1].tool_results() == [MEANING]
    plan = next(r for r in server.model_requests() if phase_of(r) == "plan")
    assert "glossary__define" not in str(plan.body["tools"])  # [mcp.roles]: implement only


# --- servers that fail ---------------------------------------------------------------


def test_a_server_that_crashes_at_start_fails_the_session_and_the_alternate_runs(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    runtimes = config_for("anthropic", "http://127.0.0.1:9")  # never asked
    runtimes += f'[runtimes.scripted]\nkind = "script"\nscript = "{SCRIPT}"\n'
    roles = 'default = ["scripted"]\nimplement = ["api", "scripted"]'
    extra = stdio_server("broken", "--crash") + '\n[mcp.roles]\nimplement = ["broken"]\n'
    setup(repo_path, runtimes, roles, extra)
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    first, second = implement_sessions(repo, slug)
    assert (first.runtime, second.runtime, second.substitution) == ("api", "scripted", "api")
    ended = {e.session: e for e in payloads(repo, slug, "session.ended")}
    assert ended[first.session].outcome == "failed"
    assert ended[first.session].error == (
        "the role's MCP servers did not start: MCP server 'broken' exited with status 3: "
        "test server: cannot open the index (crashing on purpose)"
    )
    assert ended[second.session].outcome == "ok"
    assert payloads(repo, slug, "phase.failed") == []  # unavailable: not an attempt


def test_a_server_that_never_answers_fails_the_session_at_its_timeout(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    with ModelServer(builder) as server:
        runtimes = config_for("openai", server.url)
        extra = stdio_server("mute", "--silent", timeout_seconds=2)
        extra += "\n[policy]\nmax_phase_attempts = 1\n"
        setup(repo_path, runtimes, 'default = ["api"]', extra)
        slug, outcome = build(repo)
        asked = server.model_requests()

    assert asked == []  # the session never reached the model
    assert outcome.state.state_name == "parked"
    (failed,) = payloads(repo, slug, "phase.failed")
    assert failed.phase == "plan"
    assert failed.error == (
        "the role's MCP servers did not start: MCP server 'mute' did not answer initialize "
        "within 2s"
    )
    assert survivors("--silent") == []


def test_failed_calls_come_back_to_the_model_as_errors_and_the_session_goes_on(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    model = implementing(
        step("glossary__add", a="two", b=3),
        step("glossary__die"),
        step("glossary__define", word="greeting"),
        step("edit_file", path="README.md", old="hello\n", new="hello, world\n"),
        step("done", summary="done without the glossary"),
    )
    with ModelServer(model) as server:
        extra = stdio_server() + ONLY_IMPLEMENT
        setup(repo_path, config_for("anthropic", server.url), 'default = ["api"]', extra)
        slug, outcome = build(repo)
        last = implement_requests(server)[-1]

    assert outcome.state.state_name == "complete"
    results = [
        block
        for message in last.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    bad, died, gone, edited = results[-4:]
    assert bad["is_error"] is True
    assert "validation error" in bad["content"].lower() and "'two'" in bad["content"]
    assert died["is_error"] is True
    assert died["content"].startswith("MCP server 'glossary' exited with status 7")
    assert (gone["is_error"], gone["content"]) == (True, died["content"])
    assert edited["is_error"] is False
    (session,) = implement_sessions(repo, slug)
    said = transcript_of(repo, slug, session.session)
    assert "<- error: MCP server 'glossary' exited with status 7" in said


def test_a_servers_token_reaches_no_transcript_and_no_git_object(
    repo_path: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLOSSARY_TOKEN", TOKEN)
    model = implementing(
        step("glossary__env", name="GLOSSARY_TOKEN"),
        step("edit_file", path="README.md", old="hello\n", new="hello, world\n"),
        step("done", summary="looked at the token"),
    )
    with ModelServer(model) as server:
        extra = stdio_server(pass_env='["GLOSSARY_*"]') + ONLY_IMPLEMENT
        setup(repo_path, config_for("openai", server.url), 'default = ["api"]', extra)
        slug, outcome = build(repo)
        requests = implement_requests(server)

    assert outcome.state.state_name == "complete"
    assert requests[1].tool_results() == [TOKEN]  # the server really had it
    (session,) = implement_sessions(repo, slug)
    said = transcript_of(repo, slug, session.session)
    assert "<- [redacted]" in said and TOKEN not in said
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo_path,
        capture_output=True,
        check=True,
    ).stdout
    assert b"looked at the token" in objects  # the scan sees the build's objects
    assert TOKEN.encode() not in objects
