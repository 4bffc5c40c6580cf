"""An MCP client for one of the user's servers: the lifecycle, tools/list and tools/call.

The protocol is JSON-RPC 2.0 (modelcontextprotocol.io, "Base Protocol" and "Lifecycle"):
``initialize`` (the client offers its latest protocol revision; the server answers the
one it speaks, which must be one we speak too), the ``notifications/initialized``
notification, then requests. A transport (``mcp.stdio`` for a program, ``mcp.streamable``
for a URL) only moves messages: what it receives goes into its ``inbox``, with a
:class:`Fault` when it broke. Here each request waits for its own answer there, bounded
by the server's ``timeout_seconds`` (and the session's cancel), answers the server's
own ``ping``, and turns every way a server can fail into one line naming it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agentrun import __version__
from agentrun.runtimes.mcp.jsonrpc import METHOD_NOT_FOUND, PROTOCOL_VERSIONS

LATEST = PROTOCOL_VERSIONS[0]
POLL_SECONDS = 0.05
MAX_PAGES = 50  # tools/list pages: a server that keeps paging is not listing tools
Message = dict[str, Any]


class McpError(Exception):
    """A server failed: did not start, exited, went silent or answered garbage. One line,
    naming the server."""


class RefusedCall(McpError):
    """The server answered a request with a JSON-RPC error (an unknown tool, bad arguments)."""


@dataclass(frozen=True)
class Fault:
    """What a transport puts in the inbox when it could not deliver an answer: ``request``
    is the id of the request it concerns (None: whichever is waiting); ``fatal``: the
    server is gone for good."""

    reason: str
    request: int | None = None
    fatal: bool = False


class Transport(Protocol):
    """How messages reach one server and come back (into ``inbox``)."""

    inbox: queue.Queue[Message | Fault]

    def send(self, message: Message) -> None:
        """Send one message; raise McpError when it cannot be sent."""

    def negotiated(self, version: str) -> None:
        """The protocol revision agreed at initialize (HTTP sends it as a header)."""

    def close(self) -> None:
        """End the connection, and the server's process when there is one."""


@dataclass(frozen=True)
class Tool:
    """One tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class CallResult:
    text: str
    error: bool  # the server's ``isError``: the tool ran and failed


class Client:
    """One server, initialized. Requests go one at a time (the tool loop is sequential)."""

    def __init__(self, name: str, transport: Transport, timeout: float) -> None:
        self.name = name
        self.transport = transport
        self.timeout = timeout
        self.gone: str | None = None  # why the server is gone for good (it exited)
        self.version = ""
        self.capabilities: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def initialize(self, cancel: threading.Event | None = None) -> None:
        """The lifecycle's first exchange; McpError when the server does not complete it."""
        params = {
            "protocolVersion": LATEST,
            "capabilities": {},
            "clientInfo": {"name": "agentrun", "version": __version__},
        }
        result = self.request("initialize", params, cancel=cancel)
        version = result.get("protocolVersion")
        if version not in PROTOCOL_VERSIONS:
            raise McpError(
                f"MCP server {self.name!r} speaks protocol revision {version!r}; agentrun "
                f"speaks {', '.join(PROTOCOL_VERSIONS)}"
            )
        self.version = str(version)
        offered = result.get("capabilities")
        self.capabilities = offered if isinstance(offered, dict) else {}
        self.transport.negotiated(self.version)
        self.transport.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tools(self, cancel: threading.Event | None = None) -> list[Tool]:
        """Every tool the server offers (all pages of ``tools/list``)."""
        if "tools" not in self.capabilities:
            return []
        found: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            result = self.request("tools/list", {"cursor": cursor} if cursor else {}, cancel=cancel)
            listed = result.get("tools")
            if not isinstance(listed, list):
                raise McpError(f"MCP server {self.name!r} answered tools/list without a tool list")
            found += [tool for item in listed if (tool := _tool(item)) is not None]
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return found
        raise McpError(f"MCP server {self.name!r} listed tools past {MAX_PAGES} pages")

    def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> CallResult:
        """Run one tool; McpError (RefusedCall for a JSON-RPC error) when it did not run."""
        params = {"name": tool, "arguments": dict(arguments)}
        result = self.request("tools/call", params, timeout=timeout, cancel=cancel)
        return CallResult(result_text(result), result.get("isError") is True)

    def request(
        self,
        method: str,
        params: Mapping[str, Any],
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Send a request and wait for its answer; the server's own requests meanwhile
        are answered, its notifications and late answers to earlier requests dropped."""
        with self._lock:
            if self.gone is not None:
                raise McpError(self.gone)
            limit = self.timeout if timeout is None else min(timeout, self.timeout)
            ident = next(self._ids)
            message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": dict(params)}
            self.transport.send(message)
            deadline = time.monotonic() + limit
            while True:
                if cancel is not None and cancel.is_set():
                    self._cancelled(ident, "the session was cancelled")
                    raise McpError(f"MCP server {self.name!r}: {method} cancelled")
                left = deadline - time.monotonic()
                if left <= 0:
                    self._cancelled(ident, "timeout")
                    raise McpError(
                        f"MCP server {self.name!r} did not answer {method} within {limit:g}s"
                    )
                try:
                    item = self.transport.inbox.get(timeout=min(left, POLL_SECONDS))
                except queue.Empty:
                    continue
                answer = self._receive(item, ident, method)
                if answer is not None:
                    return answer

    def _receive(self, item: Message | Fault, ident: int, method: str) -> dict[str, Any] | None:
        """The answer to request ``ident`` if ``item`` is it; None to keep waiting."""
        if isinstance(item, Fault):
            if item.request not in (None, ident):
                return None  # about a request that already gave up waiting
            said = f"MCP server {self.name!r} {item.reason}"
            if item.fatal:
                self.gone = said
            raise McpError(said)
        if "method" in item:
            self._serve(item)
            return None
        if item.get("id") != ident:
            return None
        error = item.get("error")
        if isinstance(error, dict):
            detail = str(error.get("message") or "no message")
            raise RefusedCall(
                f"MCP server {self.name!r} refused {method}: {detail} (code {error.get('code')})"
            )
        result = item.get("result")
        if not isinstance(result, dict):
            raise McpError(f"MCP server {self.name!r} answered {method} without a result object")
        return result

    def _serve(self, message: Message) -> None:
        """The server's own requests: ``ping`` is answered, anything else is not offered
        (no sampling, roots or elicitation). Notifications need no answer."""
        if "id" not in message:
            return
        if message.get("method") == "ping":
            answer: Message = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        else:
            error = {"code": METHOD_NOT_FOUND, "message": f"{message.get('method')} not offered"}
            answer = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        with contextlib.suppress(McpError):  # the request waiting fails on its own
            self.transport.send(answer)

    def _cancelled(self, ident: int, reason: str) -> None:
        notice = {"requestId": ident, "reason": reason}
        with contextlib.suppress(McpError):
            self.transport.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": notice}
            )

    def close(self) -> None:
        self.transport.close()


def _tool(item: Any) -> Tool | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        return None
    schema = item.get("inputSchema")
    schema = dict(schema) if isinstance(schema, dict) else {}
    schema["type"] = "object"  # a tool's arguments are always an object (the spec says so)
    schema.setdefault("properties", {})  # OpenAI refuses an object schema without them
    return Tool(item["name"], str(item.get("description") or ""), schema)


def result_text(result: Mapping[str, Any]) -> str:
    """A ``tools/call`` result for the model: text joined, other content in one line each."""
    parts: list[str] = []
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text") or ""))
        elif kind in ("image", "audio"):
            data = str(item.get("data") or "")  # base64
            size = len(data) * 3 // 4 - data[-2:].count("=")
            parts.append(f"[{kind} content: {item.get('mimeType', '?')}, {size} bytes, not shown]")
        elif kind == "resource":
            inner = item.get("resource")
            inner = inner if isinstance(inner, dict) else {}
            parts.append(f"[resource: {inner.get('uri', '?')} ({inner.get('mimeType', '?')})]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {item.get('uri', '?')} ({item.get('name', '?')})]")
        else:
            parts.append(f"[{kind} content, not shown]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts) if parts else "(no content)"
