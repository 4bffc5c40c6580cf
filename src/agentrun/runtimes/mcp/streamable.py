"""The streamable-HTTP transport: JSON-RPC POSTed to the server's ``url``.

modelcontextprotocol.io, "Transports", Streamable HTTP: every message is a POST that
accepts ``application/json`` and ``text/event-stream``. A request is answered with one
JSON message, or with an event stream that may carry the server's own requests and
notifications before the answer; a notification or a response of ours gets 202. The
``Mcp-Session-Id`` the server gives at initialize goes with every later request, and so
does ``MCP-Protocol-Version`` once agreed; at close the session is DELETEd. A request's
POST runs in a thread of its own that fills the inbox, so the client's wait (bounded by
the server's timeout and the session's cancel) never hangs on a silent socket. httpx is
imported only when a session has such a server.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from typing import TYPE_CHECKING, Any

from agentrun.runtimes.mcp.client import Fault, McpError, Message
from agentrun.runtimes.wire import sse

if TYPE_CHECKING:
    import httpx

CONNECT_SECONDS = 10.0
CLOSE_SECONDS = 2.0
ERROR_CHARS = 300


class HttpTransport:
    def __init__(self, name: str, url: str, timeout: float) -> None:
        import httpx

        self.name, self.url = name, url
        self.inbox: queue.Queue[Message | Fault] = queue.Queue()
        self.session_id: str | None = None
        self.version: str | None = None
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_SECONDS))
        )

    def headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.version:
            headers["MCP-Protocol-Version"] = self.version
        return headers

    def send(self, message: Message) -> None:
        if "method" in message and "id" in message:  # a request: answered in the inbox
            worker = threading.Thread(target=self._post, args=(message,), daemon=True)
            worker.start()
        else:  # a notification or our answer: in order, before the next request goes
            self._post(message)

    def negotiated(self, version: str) -> None:
        self.version = version

    def close(self) -> None:
        if self.session_id:
            # The server may be gone already: nothing to do about it then.
            with contextlib.suppress(Exception):
                self.client.delete(self.url, headers=self.headers(), timeout=CLOSE_SECONDS)
        self.client.close()

    # --- one POST -----------------------------------------------------------

    def _post(self, message: Message) -> None:
        import httpx

        request = message.get("id") if "method" in message else None
        try:
            with self.client.stream(
                "POST", self.url, content=json.dumps(message), headers=self.headers()
            ) as response:
                self._answer(response, message, request)
        except httpx.HTTPError as exc:
            detail = " ".join((str(exc) or type(exc).__name__).split())[:ERROR_CHARS]
            fault = Fault(f"is not reachable at {self.url}: {detail}", request)
            if request is None:
                raise McpError(f"MCP server {self.name!r} {fault.reason}") from None
            self.inbox.put(fault)

    def _answer(self, response: httpx.Response, message: Message, request: int | None) -> None:
        if message.get("method") == "initialize" and response.headers.get("mcp-session-id"):
            self.session_id = response.headers["mcp-session-id"]
        if response.status_code == 202 or (request is None and response.status_code < 300):
            return
        if response.status_code >= 400:
            raw = response.read()[:ERROR_CHARS].decode("utf-8", "replace")
            said = f"answered HTTP {response.status_code}: {' '.join(raw.split()) or '(empty)'}"
            # A 404 to a request with our session id: the server forgot the session.
            gone = response.status_code == 404 and self.session_id is not None
            self._fault(said, request, gone)
            return
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            for _, data in sse(response.iter_lines()):
                self._deliver(data, request)
        elif kind == "application/json":
            self._deliver(response.read().decode("utf-8", "replace"), request)
        else:
            self._fault(f"answered {kind or 'no content type'}, not JSON-RPC", request)

    def _deliver(self, data: str, request: int | None) -> None:
        try:
            value: Any = json.loads(data)
        except ValueError:
            value = None
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                self.inbox.put(item)
            else:
                said = " ".join(data.split())[:200]
                self._fault(f"answered something that is not JSON-RPC: {said!r}", request)

    def _fault(self, reason: str, request: int | None, fatal: bool = False) -> None:
        if request is None:
            raise McpError(f"MCP server {self.name!r} {reason}")
        self.inbox.put(Fault(reason, request, fatal))
