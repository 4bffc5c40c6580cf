"""The one table of remote failures: statuses, transport errors, Retry-After, backoff."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from agentrun.runtimes import failures
from agentrun.runtimes.base import AUTH, UNAVAILABLE
from agentrun.runtimes.failures import (
    CONFIG,
    REQUEST,
    STREAM,
    backoff,
    describe,
    for_exception,
    for_status,
    retry_after,
)

NOW = datetime(2026, 11, 5, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "retryable", "permanent", "cause"),
    [
        (400, False, False, REQUEST),
        (401, False, True, AUTH),
        (403, False, True, AUTH),
        (404, False, True, CONFIG),
        (408, True, False, UNAVAILABLE),
        (409, True, False, UNAVAILABLE),
        (413, False, False, REQUEST),
        (422, False, False, REQUEST),
        (429, True, False, UNAVAILABLE),
        (500, True, False, UNAVAILABLE),
        (502, True, False, UNAVAILABLE),
        (503, True, False, UNAVAILABLE),
        (504, True, False, UNAVAILABLE),
        (529, True, False, UNAVAILABLE),
        (418, False, False, REQUEST),  # any other 4xx
        (599, True, False, UNAVAILABLE),  # any other 5xx
    ],
)
def test_status_rows(status: int, retryable: bool, permanent: bool, cause: str) -> None:
    row = for_status(status)
    assert (row.retryable, row.permanent, row.cause) == (retryable, permanent, cause)
    assert row.hint


def test_a_429_out_of_quota_is_not_retried() -> None:
    body = '{"error": {"code": "insufficient_quota", "message": "You exceeded your quota"}}'
    row = for_status(429, body)
    assert (row.kind, row.retryable, row.permanent, row.cause) == (
        "quota",
        False,
        True,
        UNAVAILABLE,
    )


def test_anthropic_error_types_map_to_rows() -> None:
    for status in failures.ANTHROPIC_ERRORS.values():
        assert status in failures.STATUS
    assert failures.ANTHROPIC_ERRORS["overloaded_error"] == 529


@pytest.mark.parametrize(
    ("exc", "kind", "retryable", "cause"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "connect", True, UNAVAILABLE),
        (httpx.ConnectTimeout("timed out"), "connect-timeout", True, UNAVAILABLE),
        (httpx.ReadTimeout("timed out"), "read-timeout", True, UNAVAILABLE),
        (httpx.WriteTimeout("timed out"), "write-timeout", True, UNAVAILABLE),
        (httpx.PoolTimeout("timed out"), "pool-timeout", True, UNAVAILABLE),
        (httpx.ProxyError("refused"), "proxy", True, UNAVAILABLE),
        (httpx.RemoteProtocolError("peer closed"), "stream-cut", True, STREAM),
        (httpx.ReadError("reset"), "stream-cut", True, STREAM),
        (failures.IncompleteStream("early"), "stream-cut", True, STREAM),
        (failures.BadReply("not JSON"), "bad-reply", True, STREAM),
        (httpx.UnsupportedProtocol("ftp://"), "bad-url", False, CONFIG),
        (httpx.LocalProtocolError("bad header"), "local-protocol", False, REQUEST),
        (httpx.NetworkError("other"), "transport", True, UNAVAILABLE),
        (ValueError("a bug"), "unknown", False, REQUEST),
    ],
)
def test_exception_rows(exc: BaseException, kind: str, retryable: bool, cause: str) -> None:
    row = for_exception(exc)
    assert (row.kind, row.retryable, row.cause) == (kind, retryable, cause)


@pytest.fixture
def closing_server() -> Iterator[str]:
    """Accepts a connection, reads the request, and closes without answering."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_real_transport_errors_are_classified(closing_server: str) -> None:
    with pytest.raises(httpx.HTTPError) as cut:
        httpx.post(closing_server + "/v1/messages", json={}, timeout=5)
    assert for_exception(cut.value).kind == "stream-cut"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(httpx.HTTPError) as refused:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
    row = for_exception(refused.value)
    assert (row.kind, row.cause) == ("connect", UNAVAILABLE)


def test_describe_names_the_variable_and_the_url() -> None:
    said = describe(for_status(401), "HTTP 401: invalid x-api-key", key="MY_KEY")
    assert said == "auth: HTTP 401: invalid x-api-key (the API key was refused: check MY_KEY)"
    row = for_exception(httpx.ConnectError("refused"))
    assert "http://127.0.0.1:9/v1" in describe(row, "refused", url="http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "1"}, 1.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"Retry-After": "-3"}, 0.0),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"Retry-After": format_datetime(NOW + timedelta(seconds=7), usegmt=True)}, 7.0),
        ({"Retry-After": format_datetime(NOW - timedelta(seconds=7), usegmt=True)}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(headers, now=NOW) == seconds


def test_backoff_respects_retry_after_with_a_cap() -> None:
    assert backoff(0, {"Retry-After": "3"}) == 3.0
    assert backoff(0, {"Retry-After": "3600"}) == failures.BACKOFF_CAP
    assert backoff(0, {"Retry-After": "3600"}, cap=5) == 5
    date = format_datetime(NOW + timedelta(seconds=4), usegmt=True)
    assert backoff(5, {"Retry-After": date}, now=NOW) == 4.0


def test_backoff_grows_exponentially_with_jitter_and_a_cap() -> None:
    for attempt in range(4):
        full = failures.BACKOFF_BASE * 2**attempt
        for _ in range(20):
            assert 0.75 * full <= backoff(attempt) <= full
    assert 0.75 * failures.BACKOFF_CAP <= backoff(20) <= failures.BACKOFF_CAP


def test_httpx_stays_unloaded_until_a_request_is_made() -> None:
    code = (
        "import sys, agentrun.cli.main, agentrun.runtimes.failures, "
        "agentrun.runtimes.openai, agentrun.runtimes.anthropic; "
        "print('httpx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
