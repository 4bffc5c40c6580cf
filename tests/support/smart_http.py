"""A git remote over smart HTTP on 127.0.0.1: ``git http-backend`` behind a tiny WSGI server.

It serves the bare repositories under one folder, records every request (method, path,
``Authorization`` header) and can run a callback before answering a request, to play
another machine that pushes at a chosen moment.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: str
    authorization: str | None


@dataclass
class SmartHttp:
    root: Path
    port: int = 0
    seen: list[Seen] = field(default_factory=list)
    # Run (once each) before answering the first request whose query or path matches.
    before: list[tuple[str, Callable[[], None]]] = field(default_factory=list)
    # Answer 401 to a request without an Authorization header (git then asks its helpers).
    require_auth: bool = False

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def app(self, environ: dict[str, Any], start: Callable[..., Any]) -> list[bytes]:
        path, query = environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
        auth = environ.get("HTTP_AUTHORIZATION")
        self.seen.append(Seen(environ["REQUEST_METHOD"], path, query, auth))
        for item in list(self.before):
            if item[0] in query or item[0] in path:
                self.before.remove(item)
                item[1]()
        if self.require_auth and not auth:
            start("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"authentication required\n"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        cgi = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "tester",  # lets http-backend accept pushes
            "REMOTE_ADDR": "127.0.0.1",
        }
        for name in ("HTTP_CONTENT_ENCODING", "HTTP_GIT_PROTOCOL"):
            if name in environ:
                cgi[name] = environ[name]
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=cgi, capture_output=True, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start(status, headers)
        return [payload]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def smart_http(root: Path) -> Iterator[SmartHttp]:
    """Serve the bare repositories under ``root``; the server stops at the end."""
    served = SmartHttp(root)
    server: WSGIServer = make_server("127.0.0.1", 0, served.app, handler_class=_Quiet)
    served.port = server.server_port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
