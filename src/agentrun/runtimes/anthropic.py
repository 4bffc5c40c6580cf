"""The ``anthropic`` runtime: the Messages API.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``, ``stream:
true``, tools as ``tool_use`` / ``tool_result`` blocks, usage from ``message_start``
(input) and ``message_delta`` (output, cumulative). The tool loop is shared
(``toolloop``); this module only shapes requests and reads the stream.

Prompt caching: every request marks the four cache breakpoints the API allows: the last
tool, the system prompt, and the last block of each of the conversation's two latest
messages. Each request of a tool loop repeats the one before it and adds to its end, so
the API reads all of the earlier request from its cache (a tenth of the input price) and
writes only what was added. It looks for an earlier prefix only up to 20 blocks before
a breakpoint: the mark on the model's own last reply keeps a turn of many tool calls
(one block for each call and each result) within reach. ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` become the usage's ``cache_read`` and ``cache_write``,
and ``input_tokens`` (what follows the last breakpoint) its ``tokens_in``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from agentrun.events import Usage
from agentrun.runtimes import failures
from agentrun.runtimes.tool_catalog import ToolResult, ToolSpec
from agentrun.runtimes.toolloop import register_wire
from agentrun.runtimes.wire import Call, Message, Reply, StreamFailure, loads

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MODEL = "claude-sonnet-4-5"
CACHE = {"type": "ephemeral"}  # the default five minutes: a tool loop asks far more often


class Messages:
    kind = "anthropic"
    model: str | None = DEFAULT_MODEL

    def url(self, base_url: str | None) -> str:
        return _root(base_url) + "/v1/messages"

    def models_url(self, base_url: str) -> str:
        return _root(base_url) + "/v1/models"

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def body(
        self, model: str, system: str, messages: list[Message], tools: Iterable[ToolSpec]
    ) -> dict[str, Any]:
        specs = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.schema()}
            for tool in tools
        ]
        return {
            "model": model,
            "system": [{"type": "text", "text": system, "cache_control": CACHE}],
            "messages": _with_breakpoints(messages),
            "tools": _with_breakpoint_on_last(specs),
            "stream": True,
        }

    def cap_field(self, base_url: str | None) -> str:
        return "max_tokens"

    def read(self, events: Iterator[tuple[str, str]]) -> Reply:
        blocks: dict[int, dict[str, str]] = {}
        reply = Reply()
        done = False
        for name, data in events:
            event = loads(data)
            kind = event.get("type") or name
            if kind == "message_start":
                reply.usage = _usage((event.get("message") or {}).get("usage"), Usage())
            elif kind == "content_block_start":
                block = event.get("content_block") or {}
                blocks[int(event.get("index", len(blocks)))] = {
                    "type": str(block.get("type", "")),
                    "text": str(block.get("text") or ""),
                    "id": str(block.get("id") or ""),
                    "name": str(block.get("name") or ""),
                    "json": "",
                }
            elif kind == "content_block_delta":
                slot = blocks.get(int(event.get("index", -1)))
                delta = event.get("delta") or {}
                if slot is not None and delta.get("type") == "text_delta":
                    slot["text"] += str(delta.get("text") or "")
                elif slot is not None and delta.get("type") == "input_json_delta":
                    slot["json"] += str(delta.get("partial_json") or "")
            elif kind == "message_delta":
                reply.stop = str((event.get("delta") or {}).get("stop_reason") or "")
                reply.usage = _usage(event.get("usage"), reply.usage)
            elif kind == "message_stop":
                done = True
                break
            elif kind == "error":
                error = event.get("error") or {}
                status = failures.ANTHROPIC_ERRORS.get(str(error.get("type")), 500)
                raise StreamFailure(status, str(error.get("message") or "error in the stream"))
        if not done:
            raise failures.IncompleteStream("the stream ended before message_stop")
        ordered = [blocks[i] for i in sorted(blocks)]
        reply.text = "".join(b["text"] for b in ordered if b["type"] == "text")
        reply.calls = [
            Call(b["id"] or f"toolu_{i}", b["name"], b["json"] or "{}")
            for i, b in enumerate(ordered)
            if b["type"] == "tool_use"
        ]
        return reply

    def assistant(self, reply: Reply) -> Message:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.calls:
            # The API wants an object back; a call with broken JSON was refused as a tool
            # result, and is echoed with empty input.
            parsed = call.parsed() or {}
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": parsed})
        return {"role": "assistant", "content": content or [{"type": "text", "text": "(empty)"}]}

    def results(self, done: list[tuple[Call, ToolResult]]) -> list[Message]:
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": result.text,
                "is_error": result.error,
            }
            for call, result in done
        ]
        return [{"role": "user", "content": blocks}]

    def add_user(self, messages: list[Message], text: str) -> None:
        # After tool results (a user message) the next words join that message: the
        # roles must alternate.
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "user" and isinstance(last["content"], list):
            last["content"].append({"type": "text", "text": text})
        else:
            messages.append({"role": "user", "content": text})


def _root(base_url: str | None) -> str:
    """``ANTHROPIC_BASE_URL`` style (no ``/v1``); a trailing ``/v1`` is tolerated."""
    return (base_url or DEFAULT_BASE_URL).rstrip("/").removesuffix("/v1")


_USAGE_FIELDS = {
    "input_tokens": "tokens_in",
    "output_tokens": "tokens_out",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}


def _usage(usage: object, before: Usage) -> Usage:
    """``before`` with what this event's usage says: ``message_delta`` repeats the counts
    cumulatively, and a field it leaves out (or sends as null) keeps its earlier value."""
    if not isinstance(usage, dict):
        return before
    said = {
        ours: int(usage[theirs])
        for theirs, ours in _USAGE_FIELDS.items()
        if usage.get(theirs) is not None
    }
    return before.model_copy(update=said)


def _with_breakpoint_on_last(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies, the last one marked as a cache breakpoint: the prefix up to it is cached."""
    if not blocks:
        return blocks
    return [*blocks[:-1], {**blocks[-1], "cache_control": CACHE}]


def _with_breakpoints(messages: list[Message]) -> list[Message]:
    """The conversation with the last block of its two latest messages marked, leaving
    the kept messages unmarked: the marks move to the end with every request, and the
    earlier ones would soon pass the API's limit of four."""
    return [*messages[:-2], *(_marked(message) for message in messages[-2:])]


def _marked(message: Message) -> Message:
    content = message["content"]
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    return {**message, "content": _with_breakpoint_on_last(blocks)}


register_wire("anthropic", Messages())
