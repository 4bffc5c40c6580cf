"""agentrun's MCP client against servers built with the protocol's reference SDK.

The same small server (``support/mcp_server.py``) over stdio and over streamable HTTP
(the SDK's own server, answering event streams or plain JSON), and the ways a server
fails: it crashes at start, never answers, answers garbage, is not there, dies in the
middle of a session.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.mcp_server import serving_http

from agentrun.runtimes.mcp.client import PROTOCOL_VERSIONS, Client, McpError, result_text
from agentrun.runtimes.mcp.servers import ServerSpec
from agentrun.runtimes.mcp.stdio import StdioTransport
from agentrun.runtimes.mcp.streamable import HttpTransport
from agentrun.runtimes.mcp_tools import NAME_LIMIT, UserTools, connect, tool_name

SERVER = Path(__file__).parents[1] / "support" / "mcp_server.py"
TOOLS = ["define", "add", "env", "read", "hunt", "wait", "picture", "fail", "die"]


def stdio(*flags: str, timeout: float = 30, name: str = "glossary") -> ServerSpec:
    args = (str(SERVER), *flags)
    return ServerSpec(name=name, command=sys.executable, args=args, timeout_seconds=timeout)


def env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}


@pytest.fixture
def glossary(tmp_path: Path) -> Iterator[Client]:
    client = connect(stdio(), tmp_path, env())
    yield client
    client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(params=["event-stream", "json"])
def http_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with serving_http(tmp_path / "server.log", json_response=request.param == "json") as url:
        yield url


def children_with(flag: str) -> list[int]:
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if flag in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


# --- stdio ------------------------------------------------------------------------------


def test_a_stdio_server_lists_its_tools_with_their_own_schemas(glossary: Client) -> None:
    assert glossary.version in PROTOCOL_VERSIONS
    tools = {tool.name: tool for tool in glossary.tools()}
    assert sorted(tools) == sorted(TOOLS)
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.input_schema["type"] == "object"
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert add.input_schema["required"] == ["a", "b"]


def test_a_stdio_server_runs_calls_and_says_which_failed(glossary: Client) -> None:
    done = glossary.call("define", {"word": "greeting"})
    assert (done.text, done.error) == ("a polite word said on meeting: hello, world", False)
    assert glossary.call("add", {"a": 2, "b": 3}).text == "5"
    bad = glossary.call("add", {"a": "two", "b": 3})
    assert bad.error is True
    assert "validation error" in bad.text.lower() and "'two'" in bad.text
    failed = glossary.call("fail", {"why": "the index is locked"})
    assert failed.error is True and "the index is locked" in failed.text
    picture = glossary.call("picture", {})
    assert picture.text == "[image content: image/png, 16 bytes, not shown]\na caption"


def test_the_server_gets_the_session_environment_and_its_own_in_the_worktree(
    tmp_path: Path,
) -> None:
    spec = ServerSpec(
        name="glossary",
        command=sys.executable,
        args=(str(SERVER),),
        env={"GLOSSARY_MODE": "strict-mode"},
    )
    (tmp_path / "here.txt").write_text("in the worktree\n")
    client = connect(spec, tmp_path, {**env(), "SESSION_VAR": "from-the-session"})
    try:
        assert client.call("env", {"name": "GLOSSARY_MODE"}).text == "strict-mode"
        assert client.call("env", {"name": "SESSION_VAR"}).text == "from-the-session"
        assert client.call("env", {"name": "GITHUB_TOKEN"}).text == "GITHUB_TOKEN is not set"
        assert client.call("read", {"path": "here.txt"}).text == "in the worktree\n"
    finally:
        client.close()


def test_close_ends_the_server_and_its_process_group(tmp_path: Path) -> None:
    client = connect(stdio(), tmp_path, env())
    transport = client.transport
    pid = transport.proc.pid  # type: ignore[attr-defined]
    assert psutil.pid_exists(pid)
    client.close()
    assert transport.proc.poll() is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("flag", "timeout", "said"),
    [
        (
            "--crash",
            30,
            "exited with status 3: test server: cannot open the index (crashing on purpose)",
        ),
        ("--silent", 1, "did not answer initialize within 1s"),
        (
            "--garbage",
            30,
            "wrote something that is not JSON-RPC: 'Welcome to the server! Loading...'",
        ),
    ],
)
def test_a_server_that_fails_at_start_is_one_line_naming_it(
    tmp_path: Path, flag: str, timeout: float, said: str
) -> None:
    with pytest.raises(McpError) as raised:
        connect(stdio(flag, timeout=timeout, name="broken"), tmp_path, env())
    assert str(raised.value) == f"MCP server 'broken' {said}"
    assert children_with(flag) == []  # a server that failed is ended at once


def test_a_server_that_stops_reading_its_input_still_times_out(tmp_path: Path) -> None:
    transport = StdioTransport("deaf", [sys.executable, str(SERVER), "--deaf"], tmp_path, env())
    client = Client("deaf", transport, timeout=1)
    try:
        with pytest.raises(McpError) as raised:  # far more than a pipe holds
            client.request("initialize", {"padding": "x" * 1_000_000})
        assert str(raised.value) == "MCP server 'deaf' did not answer initialize within 1s"
    finally:
        client.close()
    assert children_with("--deaf") == []


def test_a_program_that_is_not_there(tmp_path: Path) -> None:
    spec = ServerSpec(name="nowhere", command="agentrun-no-such-server")
    with pytest.raises(McpError) as raised:
        connect(spec, tmp_path, env())
    assert str(raised.value) == (
        "MCP server 'nowhere' could not start 'agentrun-no-such-server': No such file or directory"
    )


def test_a_server_that_dies_fails_that_call_and_stays_gone(glossary: Client) -> None:
    with pytest.raises(McpError) as raised:
        glossary.call("die", {})
    said = "MCP server 'glossary' exited with status 7"
    assert str(raised.value).startswith(said)
    with pytest.raises(McpError) as again:
        glossary.call("define", {"word": "greeting"})
    assert str(again.value) == str(raised.value)


def test_a_call_past_its_timeout_is_named(tmp_path: Path) -> None:
    client = connect(stdio(timeout=30), tmp_path, env())
    try:
        with pytest.raises(McpError) as raised:
            client.call("wait", {"seconds": 3}, timeout=0.5)
        assert str(raised.value) == "MCP server 'glossary' did not answer tools/call within 0.5s"
        # The late answer is dropped: the next call gets its own.
        assert client.call("add", {"a": 1, "b": 1}).text == "2"
    finally:
        client.close()


# --- streamable HTTP --------------------------------------------------------------------


def test_an_http_server_lists_and_runs_tools_in_its_session(http_url: str, tmp_path: Path) -> None:
    spec = ServerSpec(name="remote", url=http_url, timeout_seconds=30)
    client = connect(spec, tmp_path, env())
    try:
        transport = client.transport
        assert isinstance(transport, HttpTransport)
        assert transport.session_id  # the SDK's server keeps a session: we send it back
        assert sorted(tool.name for tool in client.tools()) == sorted(TOOLS)
        assert client.call("define", {"word": "greeting"}).text.endswith("hello, world")
        bad = client.call("add", {"a": "two", "b": 3})
        assert bad.error is True and "'two'" in bad.text
    finally:
        client.close()


def test_an_http_server_that_is_not_there(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(McpError) as raised:
        connect(ServerSpec(name="remote", url=url, timeout_seconds=5), tmp_path, env())
    assert str(raised.value).startswith(f"MCP server 'remote' is not reachable at {url}: ")


# --- as tools of a session --------------------------------------------------------------


def test_tool_names_fit_both_providers_and_never_collide() -> None:
    taken = {"read_file", "done"}
    assert tool_name("glossary", "define", taken) == "glossary__define"
    assert tool_name("glossary", "search.v2", taken) == "glossary__search_v2"
    long = tool_name("s" * 60, "t" * 60, taken)
    assert len(long) == NAME_LIMIT and long.startswith("s" * 40)
    first = tool_name("a", "b.c", taken)
    taken.add(first)
    second = tool_name("a", "b_c", taken)
    assert first == "a__b_c" and second != first and len(second) <= NAME_LIMIT
    assert all(c.isalnum() or c in "_-" for c in second)


def test_user_tools_are_offered_by_server_and_routed_back(tmp_path: Path) -> None:
    servers = [stdio(name="glossary"), stdio(name="other")]
    tools = UserTools.start(servers, tmp_path, env(), taken=["read_file"])
    try:
        names = [spec.name for spec in tools.specs]
        assert names == [f"{s}__{t}" for s in ("glossary", "other") for t in TOOLS]
        add = next(spec for spec in tools.specs if spec.name == "other__add")
        assert add.schema()["properties"]["b"]["type"] == "integer"
        assert add.description.startswith("[MCP server other, tool add] Add two integers.")
        deadline = time.monotonic() + 30
        cancel = threading.Event()
        got = tools.call("other__add", {"a": 40, "b": 2}, deadline, cancel)
        assert got is not None and (got.text, got.error) == ("42", False)
        assert tools.call("read_file", {}, deadline, cancel) is None
        died = tools.call("glossary__die", {}, deadline, cancel)
        assert died is not None and died.error and "exited with status 7" in died.text
        alive = tools.call("other__define", {"word": "x"}, deadline, cancel)
        assert alive is not None and alive.text == "no meaning known for 'x'"
    finally:
        tools.close()


def test_one_server_that_cannot_start_closes_the_others(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(McpError, match="'broken' exited with status 3"):
        UserTools.start([stdio(), stdio("--crash", name="broken")], tmp_path, env(), [])
    after = {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}
    assert after - before == set()


def test_other_content_is_described_in_one_line() -> None:
    result = {
        "content": [
            {"type": "text", "text": "found it"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain"}},
            {"type": "resource_link", "uri": "file:///b.txt", "name": "b"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        ]
    }
    assert result_text(result) == (
        "found it\n[resource: file:///a.txt (text/plain)]\n"
        "[resource link: file:///b.txt (b)]\n[audio content: audio/wav, 3 bytes, not shown]"
    )
    assert result_text({"content": [], "structuredContent": {"n": 1}}) == '{"n": 1}'
    assert result_text({"content": []}) == "(no content)"
