"""A scripted model server on 127.0.0.1 for the real agent CLIs and the API runtimes.

It speaks three wire protocols, chosen by path:

- ``POST /v1/messages``          the Anthropic Messages API (SSE when ``stream``)
- ``POST /v1/responses``         the OpenAI Responses API (SSE)
- ``POST /v1/chat/completions``  OpenAI chat completions (SSE when ``stream``)

Every request is logged; a *responder* (a function of the request) says what the model
answers: text, tool calls, token usage, or a failure (an HTTP status, a stream cut in
the middle). Turns are protocol-neutral; the server renders them in the client's shape.

Given a :class:`~support.prompt_cache.PromptCache`, the server bills a request's input
itself, from the request, the way the provider's prompt cache would (``Turn.tokens_in``
and its cache fields are then ignored); without one, the turn's figures are reported
as scripted. A Messages request with more than four cache breakpoints is refused, as
the API refuses it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from support.http_body import read_body
from support.prompt_cache import Billed, CacheRequestError, PromptCache, check_breakpoints

Protocol = Literal["anthropic", "responses", "chat", "other"]
PATHS: dict[str, Protocol] = {
    "/v1/messages": "anthropic",
    "/v1/responses": "responses",
    "/v1/chat/completions": "chat",
}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    # The Responses API's tool namespace (Codex puts an MCP server's tools in
    # ``mcp__<server>``, each called by its own name).
    namespace: str | None = None


@dataclass(frozen=True)
class Turn:
    """One model answer. ``status`` other than 200 answers with that error instead.
    ``tokens_in`` is input at the full rate; ``cache_read`` and ``cache_write`` are the
    cache's, rendered in each protocol's own fields (OpenAI's totals include the read)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tokens_in: int = 100
    tokens_out: int = 20
    cache_read: int = 0
    cache_write: int = 0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str = "scripted failure"
    cut_after: int | None = None  # close the stream after this many SSE events
    delay: float = 0.0


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float

    @property
    def protocol(self) -> Protocol:
        return PATHS.get(self.path.split("?", 1)[0], "other")

    def texts(self) -> list[str]:
        """Every piece of text the client sent: system, messages, tool results."""
        if not isinstance(self.body, dict):
            return []
        found: list[str] = []
        _collect(self.body.get("system"), found)
        _collect(self.body.get("instructions"), found)
        _collect(self.body.get("messages"), found)
        _collect(self.body.get("input"), found)
        return found

    def text(self) -> str:
        return "\n".join(self.texts())

    def tool_results(self) -> list[str]:
        """What the client reported back for earlier tool calls, oldest first."""
        if not isinstance(self.body, dict):
            return []
        results: list[str] = []
        for item in self.body.get("messages") or self.body.get("input") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":  # responses
                results.append(_flat(item.get("output")))
            elif item.get("role") == "tool":  # chat completions
                results.append(_flat(item.get("content")))
            elif isinstance(item.get("content"), list):  # anthropic
                for block in item["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        results.append(_flat(block.get("content")))
        return results


def _flat(value: Any) -> str:
    found: list[str] = []
    _collect(value, found)
    return "\n".join(found)


def _collect(value: Any, found: list[str]) -> None:
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, list):
        for item in value:
            _collect(item, found)
    elif isinstance(value, dict):
        for key in ("text", "content", "output", "input_text"):
            if key in value:
                _collect(value[key], found)


Responder = Callable[[Request], Turn]


class ModelServer:
    """``with ModelServer(responder) as server:`` … ``server.url``, ``server.requests``."""

    def __init__(
        self, responder: Responder | None = None, cache: PromptCache | None = None
    ) -> None:
        self.responder: Responder = responder or (lambda _req: Turn(text="ok"))
        self.cache = cache
        self.requests: list[Request] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def model_requests(self) -> list[Request]:
        """The requests that asked the model something (not HEAD probes and the like)."""
        return [r for r in self.requests if r.protocol != "other"]

    def next_id(self) -> int:
        return next(self._ids)

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def bill(self, request: Request, turn: Turn) -> Turn:
        """The turn with its input billed by the prompt cache, if the server has one."""
        if self.cache is None or not isinstance(request.body, dict):
            return turn
        body = request.body
        billed: Billed = (
            self.cache.anthropic(body)
            if request.protocol == "anthropic"
            else self.cache.openai(body)
        )
        return dataclasses.replace(
            turn,
            tokens_in=billed.tokens_in,
            cache_read=billed.cache_read,
            cache_write=billed.cache_write,
        )


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_HEAD(self) -> None:
            server.record(Request("HEAD", self.path, dict(self.headers), None, time.time()))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            server.record(Request("GET", self.path, dict(self.headers), None, time.time()))
            body = json.dumps({"object": "list", "data": [{"id": "mock", "object": "model"}]})
            self._send_json(200, body)

        def handle(self) -> None:
            # A client that gave up (a cancelled or timed-out session) is not an error.
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def do_POST(self) -> None:
            _, body = read_body(self)
            request = Request("POST", self.path, dict(self.headers), body, time.time())
            server.record(request)
            if request.protocol == "other":
                self._send_json(404, json.dumps({"error": {"message": f"no {self.path}"}}))
                return
            if request.protocol == "anthropic" and isinstance(body, dict):
                try:
                    check_breakpoints(body)
                except CacheRequestError as refused:
                    failure = Turn(status=400, error=str(refused))
                    self._send_json(400, _error_body(request.protocol, failure))
                    return
            turn = server.responder(request)
            if turn.status == 200:
                turn = server.bill(request, turn)
            if turn.delay:
                time.sleep(turn.delay)
            if turn.status != 200:
                self._send_json(turn.status, _error_body(request.protocol, turn), turn.headers)
                return
            stream = isinstance(body, dict) and bool(body.get("stream"))
            if request.protocol == "responses":
                stream = True  # the Responses clients used here always stream
            n = server.next_id()
            if not stream:
                self._send_json(200, json.dumps(_whole(request.protocol, turn, n)), turn.headers)
                return
            self._send_events(_events(request.protocol, turn, n), turn)

        def _send_json(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_events(self, events: Iterator[tuple[str | None, Any]], turn: Turn) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            for key, value in turn.headers.items():
                self.send_header(key, value)
            self.end_headers()
            for count, (name, data) in enumerate(events):
                if turn.cut_after is not None and count >= turn.cut_after:
                    break  # a stream cut in the middle: the connection just closes
                chunk = (f"event: {name}\n" if name else "") + "data: "
                chunk += data if isinstance(data, str) else json.dumps(data)
                self.wfile.write((chunk + "\n\n").encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler


def _error_body(protocol: Protocol, turn: Turn) -> str:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        429: "rate_limit_error",
    }
    kind = kinds.get(turn.status, "api_error")
    if protocol == "anthropic":
        return json.dumps({"type": "error", "error": {"type": kind, "message": turn.error}})
    return json.dumps({"error": {"message": turn.error, "type": kind, "code": kind}})


def _arguments(call: ToolCall) -> str:
    return json.dumps(call.arguments)


def _events(protocol: Protocol, turn: Turn, n: int) -> Iterator[tuple[str | None, Any]]:
    if protocol == "anthropic":
        yield from _anthropic_events(turn, n)
    elif protocol == "responses":
        yield from _responses_events(turn, n)
    else:
        yield from _chat_events(turn, n)


def _anthropic_usage(turn: Turn, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": turn.tokens_in,
        "cache_creation_input_tokens": turn.cache_write,
        "cache_read_input_tokens": turn.cache_read,
        "output_tokens": output_tokens,
    }


def _anthropic_events(turn: Turn, n: int) -> Iterator[tuple[str | None, Any]]:
    usage = _anthropic_usage(turn, 1)
    message = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "mock",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield "message_start", {"type": "message_start", "message": message}
    index = 0
    if turn.text:
        block = {"type": "text", "text": ""}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        delta = {"type": "text_delta", "text": turn.text}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for offset, call in enumerate(turn.tool_calls):
        i = index + offset
        block = {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": call.name, "input": {}}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": i, "content_block": block},
        )
        delta = {"type": "input_json_delta", "partial_json": _arguments(call)}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    stop = "tool_use" if turn.tool_calls else "end_turn"
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": turn.tokens_out},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _responses_output(turn: Turn, n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        content = [{"type": "output_text", "text": turn.text, "annotations": []}]
        items.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": content,
            }
        )
    for i, call in enumerate(turn.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": call.name,
                **({"namespace": call.namespace} if call.namespace else {}),
                "arguments": _arguments(call),
                "status": "completed",
            }
        )
    return items


def _responses_events(turn: Turn, n: int) -> Iterator[tuple[str | None, Any]]:
    output = _responses_output(turn, n)
    base = {"id": f"resp_{n}", "object": "response", "model": "mock", "output": []}
    yield (
        "response.created",
        {"type": "response.created", "response": {**base, "status": "in_progress"}},
    )
    for index, item in enumerate(output):
        yield (
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": item,
            },
        )
    prompt = turn.tokens_in + turn.cache_read
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": turn.cache_read},
        "output_tokens": turn.tokens_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + turn.tokens_out,
    }
    done = {**base, "status": "completed", "output": output, "usage": usage}
    yield "response.completed", {"type": "response.completed", "response": done}


def _chat_calls(turn: Turn, n: int) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "id": f"call_{n}_{i}",
            "type": "function",
            "function": {"name": call.name, "arguments": _arguments(call)},
        }
        for i, call in enumerate(turn.tool_calls)
    ]


def _chat_usage(turn: Turn) -> dict[str, Any]:
    prompt = turn.tokens_in + turn.cache_read
    return {
        "prompt_tokens": prompt,
        "completion_tokens": turn.tokens_out,
        "total_tokens": prompt + turn.tokens_out,
        "prompt_tokens_details": {"cached_tokens": turn.cache_read},
    }


def _chat_events(turn: Turn, n: int) -> Iterator[tuple[str | None, Any]]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 0, "model": "mock"}
    delta: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        delta["tool_calls"] = _chat_calls(turn, n)
    yield None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    finish = "tool_calls" if turn.tool_calls else "stop"
    last = {"index": 0, "delta": {}, "finish_reason": finish}
    yield None, {**base, "choices": [last], "usage": _chat_usage(turn)}
    yield None, "[DONE]"


def _whole(protocol: Protocol, turn: Turn, n: int) -> dict[str, Any]:
    if protocol == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        content += [
            {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name, "input": c.arguments}
            for i, c in enumerate(turn.tool_calls)
        ]
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": "mock",
            "content": content,
            "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": _anthropic_usage(turn, turn.tokens_out),
        }
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {k: v for k, v in call.items() if k != "index"} for call in _chat_calls(turn, n)
        ]
    finish = "tool_calls" if turn.tool_calls else "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": "mock",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _chat_usage(turn),
    }
