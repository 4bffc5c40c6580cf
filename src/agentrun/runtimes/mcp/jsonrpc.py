"""JSON-RPC 2.0 as MCP's stdio transport carries it: one message a line, UTF-8.

A message is a request (``method`` and ``id``), a notification (``method``, no ``id``;
never answered) or a response (``result`` or ``error``, and the request's ``id``).
Batches were dropped by MCP's 2025-06-18 revision: an array is refused like any other
invalid request. Whatever the peer sent, the reader answers with an error object and
goes on to the next line: a malformed line never ends a session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeGuard

# The MCP revisions agentrun speaks, newest first: what a client offers and a server accepts.
PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

Id = str | int


class RpcError(Exception):
    """A protocol error, answered as the response's ``error`` (never shown to a model)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Message:
    """One incoming request or notification; ``id`` None: a notification."""

    method: str
    params: dict[str, Any]
    id: Id | None = None

    @property
    def is_notification(self) -> bool:
        return self.id is None


@dataclass(frozen=True)
class Reply:
    """One incoming response (to a request this side sent)."""

    id: Id | None


def valid_id(value: object) -> TypeGuard[Id]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse(line: str) -> Message | Reply:
    """One line as a message; ``RpcError`` (with the request's id, where it has one,
    as ``RpcError.id``) when it is not JSON or not a JSON-RPC 2.0 message."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    if not isinstance(data, dict):
        what = "a batch (an array)" if isinstance(data, list) else f"a JSON {type(data).__name__}"
        raise RpcError(INVALID_REQUEST, f"invalid request: {what}, not a JSON-RPC object")
    raw_id = data.get("id")
    if data.get("jsonrpc") != "2.0":
        raise IdentifiedError(raw_id, INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"')
    if "method" not in data:
        if "result" in data or "error" in data:
            return Reply(raw_id if valid_id(raw_id) else None)
        raise IdentifiedError(raw_id, INVALID_REQUEST, 'invalid request: no "method"')
    method = data["method"]
    if not isinstance(method, str):
        raise IdentifiedError(raw_id, INVALID_REQUEST, 'invalid request: "method" is not a string')
    if "id" in data and not valid_id(raw_id):
        raise RpcError(INVALID_REQUEST, 'invalid request: "id" must be a string or an integer')
    params = data.get("params", {})
    if not isinstance(params, dict):
        # MCP's params are always named: positional ones fit no method.
        raise IdentifiedError(raw_id, INVALID_PARAMS, 'invalid params: "params" must be an object')
    return Message(method, params, raw_id if "id" in data else None)


class IdentifiedError(RpcError):
    """A protocol error about a message whose id could be read: the answer carries it."""

    def __init__(self, raw_id: object, code: int, message: str) -> None:
        super().__init__(code, message)
        self.id: Id | None = raw_id if valid_id(raw_id) else None


def result(request_id: Id, value: dict[str, Any]) -> str:
    return encode({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id: Id | None, code: int, message: str) -> str:
    body = {"code": code, "message": message}
    return encode({"jsonrpc": "2.0", "id": request_id, "error": body})


def error_for(exc: RpcError) -> str:
    return error(exc.id if isinstance(exc, IdentifiedError) else None, exc.code, exc.message)


def encode(message: dict[str, Any]) -> str:
    """One message as one line: compact JSON holds no newline (they are escaped)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
