"""What a model API's wire adapter is: how one provider shapes a request and streams a reply.

``openai`` (chat completions) and ``anthropic`` (Messages) each implement :class:`Wire`;
the tool loop (``toolloop``) drives either. Here too are the reply's parts both read
into, and the server-sent-events reading both streams share.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentrun.events import Usage
from agentrun.runtimes import failures
from agentrun.runtimes.tool_catalog import ToolResult, ToolSpec

Message = dict[str, Any]


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str  # the JSON text the model sent

    def parsed(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


@dataclass
class Reply:
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop: str = ""


class StreamFailure(Exception):
    """The provider reported an error inside a stream; ``status`` is the HTTP status it
    stands for, so that it is classified by the one table."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Wire(Protocol):
    """How one provider's API shapes a request and streams a reply."""

    kind: str
    model: str | None  # the default model; None: the config must name one

    def url(self, base_url: str | None) -> str: ...
    def models_url(self, base_url: str) -> str: ...
    def headers(self, key: str | None) -> dict[str, str]: ...
    def body(
        self, model: str, system: str, messages: list[Message], tools: Iterable[ToolSpec]
    ) -> dict[str, Any]: ...
    def cap_field(self, base_url: str | None) -> str:
        """The request field that caps one response's output tokens."""

    def read(self, events: Iterator[tuple[str, str]]) -> Reply:
        """Read the SSE stream; raise IncompleteStream, BadReply or StreamFailure."""

    def assistant(self, reply: Reply) -> Message: ...
    def results(self, done: list[tuple[Call, ToolResult]]) -> list[Message]: ...
    def add_user(self, messages: list[Message], text: str) -> None: ...


def sse(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Server-sent events as (event name, data); comments and ids are skipped."""
    event, data = "", list[str]()
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "", []
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)


def loads(data: str) -> dict[str, Any]:
    """One event's JSON object, or BadReply."""
    try:
        value = json.loads(data)
    except ValueError:
        raise failures.BadReply(f"not JSON: {data[:100]}") from None
    if not isinstance(value, dict):
        raise failures.BadReply(f"not a JSON object: {data[:100]}")
    return value
