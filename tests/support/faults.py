"""Faults the recording proxy in front of Prism answers instead of Prism: GitHub's bad days.

The request still goes to Prism first, so GitHub's description still validates it (a
faulted request that the description refuses fails ``assert_accepted`` as any other);
only the answer is replaced. Each fault answers ``times`` matching requests, then Prism
answers again: "retried, then it succeeds" is a fault with ``times=1``.

    github_api.fail("POST", f"{REPO}/issues/3/comments", secondary_rate_limit(retry_after=1))
    forge.comment(3, "hello")                  # retried after a second, then accepted
    assert [r.status for r in github_api.find("POST", ...)] == [403, 201]

The bodies and headers are GitHub's own (as its documentation and real answers show them).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

DOCS = "https://docs.github.com/rest"


@dataclass(frozen=True)
class Fault:
    status: int  # 0: hang up without answering
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    def answer(self) -> tuple[int, bytes, list[tuple[str, str]]]:
        headers = [("Content-Type", "application/json; charset=utf-8"), *self.headers.items()]
        return self.status, json.dumps(self.body).encode(), headers


def secondary_rate_limit(retry_after: int) -> Fault:
    """GitHub's answer to too many requests too fast: 403, ``retry-after`` in seconds."""
    return Fault(
        403,
        {
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
            "before you try again. If you reach out to GitHub Support for help, please "
            "include the request ID 0C4A:3B2D:1A2B3C:4D5E6F:65F0A1B2.",
            "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api"
            "#about-secondary-rate-limits",
            "status": "403",
        },
        {"retry-after": str(retry_after), "x-ratelimit-remaining": "4000"},
    )


def bad_gateway() -> Fault:
    """A 502, as GitHub's front end answers when the API behind it did not."""
    return Fault(502, {"message": "Server Error"})


def actions_may_not_open() -> Fault:
    """The workflow token asked to open a pull request where the repository forbids it."""
    return Fault(
        403,
        {
            "message": "GitHub Actions is not permitted to create or approve pull requests.",
            "documentation_url": f"{DOCS}/pulls/pulls#create-a-pull-request",
            "status": "403",
        },
    )


def hang_up() -> Fault:
    """No answer at all: the connection closes once the request is read."""
    return Fault(0, {})


def graphql_error(message: str) -> Fault:
    """GraphQL's way to refuse: 200, with ``errors`` instead of ``data``."""
    return Fault(200, {"data": None, "errors": [{"type": "FORBIDDEN", "message": message}]})


class Faults:
    """The faults waiting to be answered, by method and path (a regular expression)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[tuple[str, re.Pattern[str], Fault, list[int]]] = []

    def add(self, method: str, path: str, fault: Fault, times: int) -> None:
        with self._lock:
            self._waiting.append((method, re.compile(path), fault, [times]))

    def take(self, method: str, path: str) -> Fault | None:
        """The fault to answer this request with, if one is still waiting for it."""
        with self._lock:
            for want, rx, fault, left in self._waiting:
                if want == method and rx.fullmatch(path) and left[0] > 0:
                    left[0] -= 1
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._waiting.clear()
