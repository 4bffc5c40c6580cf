"""The one table of remote failures (STYLE habit 8): what a provider or transport error
means, whether retrying can help, and what to tell the user.

Both API runtimes classify through :func:`for_status` and :func:`for_exception`; the CLI
runtimes may map their own errors (an HTTP status a CLI reports) through them too. httpx
is never imported here: exceptions are matched by class name along their MRO, so the CLI
runtimes can use this table without loading httpx.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from agentrun.runtimes.base import AUTH, UNAVAILABLE

# Causes this table adds to base.py's, all ordinary failures of the attempt to the runner:
# the provider refused the request, the stream broke, a setting is wrong (permanent).
REQUEST, STREAM, CONFIG = "request", "stream", "config"
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
K = TypeVar("K")


@dataclass(frozen=True)
class Failure:
    """One row: ``retryable`` (send the same request again after a backoff), ``permanent``
    (the phase escalates at once; retrying the phase will not fix it) and ``cause``
    (what the runner acts on, base.py: UNAVAILABLE moves to an alternate)."""

    kind: str
    retryable: bool
    permanent: bool
    cause: str
    hint: str


def _rows(table: Mapping[K, tuple[str, int, int, str, str]]) -> dict[K, Failure]:
    """A table written as rows of (kind, retryable, permanent, cause, hint); 1/0: yes/no."""
    return {
        key: Failure(kind, bool(retry), bool(permanent), cause, hint)
        for key, (kind, retry, permanent, cause, hint) in table.items()
    }


# Columns: kind, retryable, permanent, cause, hint ({key}: the key variable, {url}: the
# endpoint). 1/0 read as yes/no.
# fmt: off
STATUS: dict[int, Failure] = _rows({
    400: ("bad-request",     0, 0, REQUEST,     "the provider refused the request"),
    401: ("auth",            0, 1, AUTH,        "the API key was refused: check {key}"),
    403: ("forbidden",       0, 1, AUTH,        "the key in {key} may not use this model"),
    404: ("not-found",       0, 1, CONFIG,      "check `model` and `base_url`"),
    408: ("request-timeout", 1, 0, UNAVAILABLE, "the provider timed out"),
    409: ("conflict",        1, 0, UNAVAILABLE, "the provider reported a conflict"),
    413: ("too-large",       0, 0, REQUEST,     "the conversation is too large"),
    422: ("unprocessable",   0, 0, REQUEST,     "the provider refused the request"),
    429: ("rate-limit",      1, 0, UNAVAILABLE, "rate limited: wait, or raise the limit"),
    500: ("server",          1, 0, UNAVAILABLE, "the provider failed; try again later"),
    502: ("bad-gateway",     1, 0, UNAVAILABLE, "the provider is unreachable right now"),
    503: ("unavailable",     1, 0, UNAVAILABLE, "the provider is unavailable right now"),
    504: ("gateway-timeout", 1, 0, UNAVAILABLE, "the provider timed out"),
    529: ("overloaded",      1, 0, UNAVAILABLE, "the provider is overloaded; try later"),
})
OTHER_4XX = Failure("client-error", False, False, REQUEST, "the provider refused the request")
OTHER_5XX = Failure("server", True, False, UNAVAILABLE, "the provider failed; try again later")
# A 429 that says the account is out of money: waiting will not help, an alternate may.
QUOTA = Failure("quota", False, True, UNAVAILABLE, "the account for {key} is out of credit")
QUOTA_WORDS = ("insufficient_quota", "billing", "credit balance")

# httpx exceptions by class name, matched along the MRO (so the most specific wins).
# A stream cut in the middle is retryable: tools run only once a whole reply has
# arrived, so a cut reply did nothing and the same request can be sent again.
EXCEPTIONS: dict[str, Failure] = _rows({
    "UnsupportedProtocol": ("bad-url",         0, 1, CONFIG,      "use http(s):// in base_url"),
    "ConnectTimeout":      ("connect-timeout", 1, 0, UNAVAILABLE, "{url} did not answer"),
    "ConnectError":        ("connect",         1, 0, UNAVAILABLE, "is the endpoint {url} up?"),
    "ProxyError":          ("proxy",           1, 0, UNAVAILABLE, "the proxy refused"),
    "ReadTimeout":         ("read-timeout",    1, 0, UNAVAILABLE, "the model went silent"),
    "WriteTimeout":        ("write-timeout",   1, 0, UNAVAILABLE, "sending timed out"),
    "PoolTimeout":         ("pool-timeout",    1, 0, UNAVAILABLE, "no connection was free"),
    "RemoteProtocolError": ("stream-cut",      1, 0, STREAM,      "the stream was cut"),
    "ReadError":           ("stream-cut",      1, 0, STREAM,      "the connection broke"),
    "IncompleteStream":    ("stream-cut",      1, 0, STREAM,      "the stream ended early"),
    "BadReply":            ("bad-reply",       1, 0, STREAM,      "a reply not understood"),
    "LocalProtocolError":  ("local-protocol",  0, 0, REQUEST,     "the request was invalid"),
    "TransportError":      ("transport",       1, 0, UNAVAILABLE, "{url} is unreachable"),
})
# fmt: on
UNKNOWN = Failure("unknown", False, False, REQUEST, "an unexpected error")

# Anthropic's error ``type`` (in an error body or an ``event: error`` mid-stream), as the
# HTTP status it stands for, so that one table decides.
ANTHROPIC_ERRORS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class IncompleteStream(Exception):
    """The stream closed cleanly but before its final event (a cut reply)."""


class BadReply(Exception):
    """The stream carried something that is not the protocol (bad JSON, no choices)."""


def for_status(status: int, body: str = "") -> Failure:
    if status == 429 and any(word in body for word in QUOTA_WORDS):
        return QUOTA
    row = STATUS.get(status)
    if row is not None:
        return row
    if status >= 500:
        return OTHER_5XX
    return OTHER_4XX


def for_exception(exc: BaseException) -> Failure:
    for cls in type(exc).__mro__:
        row = EXCEPTIONS.get(cls.__name__)
        if row is not None:
            return row
    return UNKNOWN


def error_message(raw: str) -> str:
    """The provider's own words from an error body (both APIs nest them under ``error``)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.strip()[:300]
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return raw.strip()[:300]


def describe(failure: Failure, detail: str, key: str = "", url: str = "") -> str:
    """The one line for the user: what happened, the provider's words, the hint."""
    hint = failure.hint.format(key=key or "the API key variable", url=url or "base_url")
    detail = " ".join(detail.split())[:300]
    return f"{failure.kind}: {detail} ({hint})" if detail else f"{failure.kind} ({hint})"


def retry_after(headers: dict[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, ``Retry-After`` in seconds
    or as an HTTP date. None when absent or unreadable."""
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return max(float(lower["retry-after-ms"]) / 1000, 0.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def backoff(
    attempt: int,
    headers: dict[str, str] | None = None,
    cap: float = BACKOFF_CAP,
    now: datetime | None = None,
) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based).

    The server's ``Retry-After`` wins, capped; otherwise exponential from
    ``BACKOFF_BASE`` with jitter (so that parallel builds do not retry in lockstep).
    """
    asked = retry_after(headers or {}, now)
    if asked is not None:
        return min(asked, cap)
    wait: float = BACKOFF_BASE * 2**attempt
    return min(wait, cap) * random.uniform(0.75, 1.0)
