"""A stateful fake GitLab (REST v4) on 127.0.0.1 that checks every request it is sent.

Each request is checked against GitLab's own description of it (``gitlab_spec``): one
that breaks it is answered 400 and recorded, and ``assert_accepted()`` (the fixtures run
it after every test) fails the test. Accepted requests are answered by ``gitlab_state``:
one project's state, with bodies built from those GitLab recorded (go-gitlab's testdata).
A list whose description takes ``page`` is paginated with ``Link: rel="next"``, as GitLab
does (``page_size`` caps ``per_page``).

``fail(method, path, status, headers, times, message)`` answers the next matching
requests with a fault (a 429 with ``Retry-After``, a 502); they are still checked and
recorded. ``requests`` holds every request (``Recorded``); ``find`` filters them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from support.gitlab_ci import Text
from support.gitlab_spec import Description
from support.gitlab_state import (
    BOT,
    PROJECT,
    PROJECT_ID,
    TESTDATA,
    TOKEN,
    GitLabError,
    GitLabState,
)

__all__ = ["BOT", "PROJECT", "PROJECT_ID", "TESTDATA", "TOKEN", "GitLabAPI", "Recorded"]


@dataclass
class Recorded:
    method: str
    path: str  # decoded, without the query
    query: dict[str, list[str]]
    body: Any
    status: int = 0
    violations: list[str] = field(default_factory=list)
    endpoint: str = ""  # "METHOD template" it matched, "" for none
    injected: bool = False


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int
    headers: dict[str, str]
    times: int
    message: str


class GitLabAPI(GitLabState):
    """The fake: its state, and its HTTP server (``url`` is the instance's web URL)."""

    def __init__(self, origin: Path | None = None) -> None:
        self.description = Description()
        self.requests: list[Recorded] = []
        self.faults: list[_Fault] = []
        self.page_size = 100  # GitLab's largest per_page
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        super().__init__(f"http://127.0.0.1:{self.server.server_address[1]}", origin)
        serve = lambda: self.server.serve_forever(poll_interval=0.05)  # noqa: E731
        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def env(self) -> dict[str, str]:
        """GitLab CI's variables for this server, and the token."""
        return {
            "GITLAB_TOKEN": TOKEN,
            "CI_SERVER_URL": self.url,
            "CI_API_V4_URL": f"{self.url}/api/v4",
            "CI_PROJECT_PATH": PROJECT,
        }

    def fail(
        self,
        method: str,
        path: str,
        status: int,
        headers: dict[str, str] | None = None,
        times: int = 1,
        message: str | None = None,
    ) -> None:
        text = message or f"{status} injected"
        with self.lock:
            self.faults.append(_Fault(method, re.compile(path), status, headers or {}, times, text))

    # --- what the tests check ----------------------------------------------------

    def find(self, method: str, path: str) -> list[Recorded]:
        pattern = re.compile(path)
        with self.lock:
            return [r for r in self.requests if r.method == method and pattern.fullmatch(r.path)]

    def assert_accepted(self) -> None:
        """Fail when any request broke GitLab's description of it."""
        with self.lock:
            bad = [
                f"{r.method} {r.path}: {'; '.join(r.violations)}"
                for r in self.requests
                if r.violations
            ]
        assert not bad, "requests GitLab's API description refuses:\n" + "\n".join(bad)

    # --- serving ---------------------------------------------------------------

    def handle(
        self, method: str, raw_path: str, headers: Any, raw: bytes
    ) -> tuple[int, dict[str, str], Any]:
        split = urlsplit(raw_path)
        segments = [unquote(s) for s in split.path.split("/")]
        path = "/".join(segments)
        query = parse_qs(split.query, keep_blank_values=True)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        record = Recorded(method, path, query, body)
        with self.lock:
            self.requests.append(record)
            endpoint, params = self.description.match(method, segments)
            record.endpoint = endpoint
            record.violations = self.description.check(endpoint, params, query, body)
            if record.violations:
                record.status = 400
                return 400, {}, {"error": "; ".join(record.violations)}
            if headers.get("PRIVATE-TOKEN") != TOKEN:
                record.status = 401
                return 401, {}, {"message": "401 Unauthorized"}
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and fault.path.fullmatch(path):
                    fault.times -= 1
                    record.status, record.injected = fault.status, True
                    return fault.status, fault.headers, {"message": fault.message}
            try:
                status, answer = self.answer(method, endpoint, params, query, body)
            except GitLabError as exc:
                record.status = exc.status
                return exc.status, {}, {"message": exc.message}
            record.status = status
            pages = self.description.pages(endpoint)
            if method == "GET" and isinstance(answer, list) and pages:
                return self._page(status, split.path, query, answer)
            return status, {}, answer

    def _page(
        self, status: int, path: str, query: dict[str, list[str]], items: list[Any]
    ) -> tuple[int, dict[str, str], Any]:
        per_page = min(int((query.get("per_page") or ["20"])[0]), self.page_size)
        page = int((query.get("page") or ["1"])[0])
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {"X-Page": str(page), "X-Per-Page": str(per_page), "X-Total": str(len(items))}
        if page * per_page < len(items):
            rest = {k: v for k, v in query.items() if k not in ("page", "per_page")}
            params = "&".join(f"{k}={quote(x)}" for k, vs in rest.items() for x in vs)
            link = f"{self.url}{path}?page={page + 1}&per_page={per_page}" + (
                f"&{params}" if params else ""
            )
            headers["Link"] = f'<{link}>; rel="next"'
            headers["X-Next-Page"] = str(page + 1)
        return status, headers, chunk


def _handler(api: GitLabAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, headers, answer = api.handle(self.command, self.path, self.headers, raw)
            text = isinstance(answer, Text)  # a job's trace
            data = answer.encode() if text else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serving(origin: Path) -> Iterator[GitLabAPI]:
    """A fake GitLab reading branch tips from ``origin``; when the block ends, every request
    it took must have been accepted."""
    found = GitLabAPI(origin)
    try:
        yield found
        found.assert_accepted()
    finally:
        found.close()
