"""What the tests' HTTP servers share: reading a request body as JSON, or as text."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def read_body(handler: BaseHTTPRequestHandler) -> tuple[bytes, Any]:
    """The request's bytes, and its body: parsed JSON, else its text (None when empty)."""
    length = int(handler.headers.get("Content-Length") or 0)
    raw = handler.rfile.read(length) if length else b""
    try:
        return raw, json.loads(raw) if raw else None
    except ValueError:
        return raw, raw.decode("utf-8", "replace")
