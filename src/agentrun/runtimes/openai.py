"""The ``openai`` runtime: any OpenAI-compatible chat-completions endpoint.

OpenAI itself, vLLM, Ollama, a llama.cpp server: ``POST {base_url}/chat/completions``
with ``stream: true``, tools in the chat-completions shape, usage from the last chunk
(``stream_options.include_usage``). The tool loop is shared (``toolloop``); this
module only shapes requests and reads the stream.

Prompt caching is the server's own: OpenAI caches a request's longest prefix seen before
(from 1,024 tokens) without any marks, and says how much in
``prompt_tokens_details.cached_tokens``, which ``prompt_tokens`` includes; it becomes the
usage's ``cache_read``, and only the rest its ``tokens_in``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from agentrun.events import Usage
from agentrun.runtimes import failures
from agentrun.runtimes.tool_catalog import ToolResult, ToolSpec
from agentrun.runtimes.toolloop import register_wire
from agentrun.runtimes.wire import Call, Message, Reply, StreamFailure, loads

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class ChatCompletions:
    kind = "openai"
    model: str | None = None  # no sensible default across compatible servers

    def url(self, base_url: str | None) -> str:
        return (base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"

    def models_url(self, base_url: str) -> str:
        return base_url.rstrip("/") + "/models"

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def body(
        self, model: str, system: str, messages: list[Message], tools: Iterable[ToolSpec]
    ) -> dict[str, Any]:
        return {
            "model": model,
            "messages": [{"role": "system", "content": system}, *messages],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.schema(),
                    },
                }
                for tool in tools
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    def cap_field(self, base_url: str | None) -> str:
        # OpenAI's reasoning models refuse ``max_tokens`` (it is deprecated there); the
        # compatible servers (vLLM, Ollama, llama.cpp) all read it, not always the new name.
        own = base_url is None or base_url.rstrip("/") == DEFAULT_BASE_URL
        return "max_completion_tokens" if own else "max_tokens"

    def read(self, events: Iterator[tuple[str, str]]) -> Reply:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        reply = Reply()
        done = False
        for _, data in events:
            if data.strip() == "[DONE]":
                done = True
                break
            chunk = loads(data)
            error = chunk.get("error")
            if error is not None:
                raise _stream_error(error)
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                reply.usage = _usage(usage)
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                for part in delta.get("tool_calls") or []:
                    _add_call_part(calls, part)
                if choice.get("finish_reason"):
                    reply.stop = str(choice["finish_reason"])
        if not (done or reply.stop):
            raise failures.IncompleteStream("the stream ended before the reply finished")
        reply.text = "".join(text)
        reply.calls = [
            Call(slot["id"] or f"call_{index}", slot["name"], slot["arguments"])
            for index, slot in sorted(calls.items())
        ]
        return reply

    def assistant(self, reply: Reply) -> Message:
        message: Message = {"role": "assistant", "content": reply.text or None}
        if reply.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments or "{}"},
                }
                for call in reply.calls
            ]
        return message

    def results(self, done: list[tuple[Call, ToolResult]]) -> list[Message]:
        return [
            {"role": "tool", "tool_call_id": call.id, "content": result.text}
            for call, result in done
        ]

    def add_user(self, messages: list[Message], text: str) -> None:
        messages.append({"role": "user", "content": text})


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details")
    cached = int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0)
    return Usage(
        tokens_in=max(int(usage.get("prompt_tokens") or 0) - cached, 0),
        tokens_out=int(usage.get("completion_tokens") or 0),
        cache_read=cached,
    )


def _add_call_part(calls: dict[int, dict[str, str]], part: dict[str, Any]) -> None:
    """Tool calls arrive in pieces keyed by ``index``: id and name once, arguments in parts."""
    index = part.get("index")
    slot = calls.setdefault(
        index if isinstance(index, int) else len(calls), {"id": "", "name": "", "arguments": ""}
    )
    if part.get("id"):
        slot["id"] = str(part["id"])
    function = part.get("function") or {}
    if function.get("name") and not slot["name"]:
        slot["name"] = str(function["name"])
    if function.get("arguments"):
        slot["arguments"] += str(function["arguments"])


def _stream_error(error: Any) -> StreamFailure:
    if not isinstance(error, dict):
        return StreamFailure(500, str(error))
    code = error.get("code")
    status = code if isinstance(code, int) else 429 if code == "rate_limit_exceeded" else 500
    return StreamFailure(status, str(error.get("message") or code or "error in the stream"))


register_wire("openai", ChatCompletions())
