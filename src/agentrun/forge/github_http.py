"""The github forge's HTTP client: PyGithub, its retries bounded by the job's time, its throttle.

PyGithub's ``GithubRetry`` retries what GitHub asks to be retried: a rate limit (403 or
429, waiting ``Retry-After`` or until ``X-RateLimit-Reset``) and a server error. A CI
job has a time limit, though, and a wait that would outlive it only burns the job's
minutes: such a wait is given up at once with one line (``RetryWaitError``). Without a
time limit a single wait is still bounded (``MAX_WAIT_SECONDS``).

Which requests are retried:

- a rate limit, for every method: GitHub did not do the request;
- a 5xx for every method but ``POST``: a ``POST`` that failed that way may have been
  done (a comment posted twice), the others are idempotent;
- a refused connection (the request never left); never a broken read, for the same
  reason as a ``POST``'s 5xx.

Imported only where the client is built: PyGithub loads with it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from github import Auth, Github, GithubException, GithubRetry, RateLimitExceededException
from requests import RequestException
from urllib3 import Retry

from agentrun.errors import ForgeError

if TYPE_CHECKING:
    from typing import Self

    from urllib3.response import BaseHTTPResponse

TIMEOUT_SECONDS = 30
PER_PAGE = 100
# GitHub: "wait at least one second between each" POST, PATCH, PUT or DELETE, to stay
# clear of the secondary rate limit (``WRITE_SECONDS`` in the environment sets another
# interval; 0 turns it off). Reads are not throttled: agentrun makes them one at a
# time, which is what GitHub asks of reads.
SECONDS_BETWEEN_WRITES = 1.0
SECONDS_BETWEEN_REQUESTS = None
WRITE_SECONDS = "AGENTRUN_GITHUB_WRITE_SECONDS"
# Three retries: a 5xx waits 0 s, 2 s, then 4 s (urllib3's backoff, factor 1); a refused
# connection is tried twice more.
RETRIES = 3
BACKOFF_FACTOR = 1.0
# Without a time limit, no single wait is longer: a secondary rate limit asks for a
# minute or so; a primary one may ask for up to an hour, which no one waits for unseen.
MAX_WAIT_SECONDS = 600.0
ACTIONS_MAY_NOT_OPEN = "not permitted to create or approve pull requests"  # GitHub's words


class RetryWaitError(ForgeError):
    """GitHub asked for a wait that would outlive the job; it was not waited for."""


class JobRetry(GithubRetry):
    """``GithubRetry`` whose waits end before ``stop_at`` (a ``time.monotonic()`` value)."""

    def __init__(self, stop_at: float | None = None, **kwargs: Any) -> None:
        self.stop_at = stop_at
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> Self:
        kw["stop_at"] = self.stop_at
        return super().new(**kw)

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if status_code >= 500 and method.upper() == "POST":
            return False
        return bool(super().is_retry(method, status_code, has_retry_after))

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        """Sleep as urllib3 would, unless that sleep would end past the limit."""
        wait = self.wait_for(response)
        if self.stop_at is None:
            bound, whose = MAX_WAIT_SECONDS, f"the {MAX_WAIT_SECONDS:.0f} s agentrun waits at most"
        else:
            left = self.stop_at - time.monotonic()
            bound, whose = left, f"the {max(left, 0):.0f} s the job has left"
        if wait > 0 and wait >= bound:
            status = f"after {response.status} " if response is not None else ""
            raise RetryWaitError(
                f"GitHub asks to retry {status}in {wait:.0f} s, longer than {whose}; "
                "not waiting (run again later)"
            )
        super().sleep(response)

    def wait_for(self, response: BaseHTTPResponse | None) -> float:
        """The seconds ``sleep`` would wait: ``Retry-After``, else the backoff (which
        ``GithubRetry`` sets to the rate limit's reset)."""
        if response is not None and self.respect_retry_after_header:
            after = self.get_retry_after(response)
            if after:
                return after
        return float(self.get_backoff_time())


def client(api_url: str, token: str, stop_at: float | None) -> Github:
    """A PyGithub client of ``api_url`` whose retries end before ``stop_at``."""
    retry = JobRetry(
        stop_at=stop_at,
        total=RETRIES,
        connect=2,
        read=False,  # a broken read is raised as it is, never retried
        allowed_methods=frozenset({*Retry.DEFAULT_ALLOWED_METHODS, "POST", "PATCH"}),
        backoff_factor=BACKOFF_FACTOR,
        status_forcelist=[429, *range(500, 600)],  # GithubRetry adds 403
        raise_on_status=False,  # the last answer becomes PyGithub's exception, with its status
    )
    return Github(
        base_url=api_url,
        auth=Auth.Token(token),
        timeout=TIMEOUT_SECONDS,
        per_page=PER_PAGE,
        retry=retry,
        seconds_between_requests=SECONDS_BETWEEN_REQUESTS,
        seconds_between_writes=write_interval(os.environ),
        lazy=True,  # objects fetch only when an attribute is read: fewer requests
    )


def write_interval(environ: dict[str, str] | os._Environ[str]) -> float | None:
    """The seconds between two writes: ``WRITE_SECONDS``, else GitHub's one second."""
    text = environ.get(WRITE_SECONDS)
    if text is None:
        return SECONDS_BETWEEN_WRITES
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ForgeError(f"{WRITE_SECONDS}={text!r}: expected a number of seconds, 0 or more")
    return seconds or None


@contextmanager
def failures(what: str, repository: str, api_url: str) -> Iterator[None]:
    """Turn PyGithub's and the network's exceptions into one ``ForgeError`` line."""
    try:
        yield
    except RetryWaitError as exc:
        raise RetryWaitError(f"github: could not {what}: {exc}") from None
    except GithubException as exc:
        raise ForgeError(f"github: could not {what}: {explain(exc, repository)}") from exc
    except RequestException as exc:
        raise ForgeError(
            f"github: could not {what}: cannot reach {api_url} ({type(exc).__name__})"
        ) from exc


def explain(exc: GithubException, repository: str) -> str:
    """What went wrong and what to do, from GitHub's status and message."""
    status = exc.status
    data = exc.data if isinstance(exc.data, dict) else {}
    message = str(data.get("message") or exc.message or "")
    details = [
        str(e.get("message") or e.get("code") or e) if isinstance(e, dict) else str(e)
        for e in data.get("errors") or []
    ]
    if details:  # a GraphQL answer has only these
        listed = "; ".join(details)[:200]
        message = f"{message} ({listed})" if message else listed
    message = message or "no message"
    hints = {
        401: "GITHUB_TOKEN was refused: is it valid and unexpired?",
        403: "GITHUB_TOKEN lacks a permission (contents, pull-requests, issues, statuses)",
        404: f"{repository} or the object does not exist, or GITHUB_TOKEN cannot see it",
    }
    hint = hints.get(status)
    if status == 403 and ACTIONS_MAY_NOT_OPEN in message:
        hint = (
            "allow it in the repository's Settings → Actions → General → Workflow "
            'permissions: "Allow GitHub Actions to create and approve pull requests"'
        )
    elif isinstance(exc, RateLimitExceededException):
        hint = "GitHub's rate limit held through the retries: run again later"
    return " ".join(f"{status} {message}".split()) + (f"; {hint}" if hint else "")
