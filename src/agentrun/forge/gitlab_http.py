"""The gitlab forge's HTTP client: python-gitlab, its own retries, bounded by the job's time.

python-gitlab retries in ``Gitlab.http_request``: a 429 when ``obey_rate_limit`` (waiting
``Retry-After``, else until ``RateLimit-Reset``, else ``0.1 * 2**n`` s), and with
``retry_transient_errors`` a 5xx, a broken connection or a timeout, up to
``max_retries`` times. agentrun asks for:

- ``RETRIES`` tries more at most, for every request (python-gitlab's default is 10);
- transient errors retried for every method but ``POST``: a ``POST`` that failed with a
  5xx or a broken read may have been done (a note posted twice); the others are
  idempotent. A rate limit is retried for every method: GitLab did not do the request.

python-gitlab sleeps where it decides to retry, with no limit of its own. A CI job has
one, though: a response hook on the session sees each answer before python-gitlab does,
and refuses (``RetryWaitError``, one line) a wait that would outlive the job, or
``MAX_WAIT_SECONDS`` when there is no time limit.

Imported only where the client is built: python-gitlab loads with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gitlab
import requests
from gitlab.exceptions import GitlabError

from agentrun.errors import ForgeError

TIMEOUT_SECONDS = 30
PER_PAGE = 100
RETRIES = 3
MAX_WAIT_SECONDS = 600.0
# What python-gitlab retries (gitlab.const.RETRYABLE_TRANSIENT_ERROR_CODES) or waits on.
RATE_LIMITED = 429


class RetryWaitError(ForgeError):
    """GitLab asked for a wait that would outlive the job; it was not waited for."""


class JobGitlab(gitlab.Gitlab):
    """``gitlab.Gitlab`` with agentrun's retry policy as the default of every request."""

    def http_request(self, verb: str, path: str, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", RETRIES)
        if verb.lower() == "post":
            kwargs.setdefault("retry_transient_errors", False)
        return super().http_request(verb, path, *args, **kwargs)


def client(url: str, token: str, stop_at: float | None) -> JobGitlab:
    """A python-gitlab client of the instance at ``url`` whose waits end before ``stop_at``."""
    session = requests.Session()
    session.hooks["response"].append(_bounded_wait(stop_at))
    return JobGitlab(
        url,
        private_token=token,
        timeout=TIMEOUT_SECONDS,
        per_page=PER_PAGE,
        retry_transient_errors=True,
        session=session,
    )


def _bounded_wait(stop_at: float | None) -> Any:
    def check(response: requests.Response, *args: Any, **kwargs: Any) -> None:
        wait = wait_for(response)
        if wait is None:
            return
        if stop_at is None:
            bound, whose = MAX_WAIT_SECONDS, f"the {MAX_WAIT_SECONDS:.0f} s agentrun waits at most"
        else:
            left = stop_at - time.monotonic()
            bound, whose = left, f"the {max(left, 0):.0f} s the job has left"
        if wait > 0 and wait >= bound:
            raise RetryWaitError(
                f"GitLab asks to retry after {response.status_code} in {wait:.0f} s, "
                f"longer than {whose}; not waiting (run again later)"
            )

    return check


def wait_for(response: requests.Response) -> float | None:
    """The seconds python-gitlab would sleep before retrying ``response``, when it names
    them (``Retry-After``, ``RateLimit-Reset``); ``None`` for an answer not retried so."""
    status, method = response.status_code, response.request.method or ""
    if status != RATE_LIMITED and (status < 500 or method.upper() == "POST"):
        return None  # not retried: python-gitlab will not wait on it
    headers = response.headers
    try:
        if "Retry-After" in headers:
            return float(int(headers["Retry-After"]))
        if "RateLimit-Reset" in headers:
            return max(0.0, int(headers["RateLimit-Reset"]) - time.time())
    except ValueError:
        return None  # python-gitlab fails on it itself, as GitLab's answer
    return None


@contextmanager
def failures(what: str, project: str, api_url: str, token: str) -> Iterator[None]:
    """Turn python-gitlab's and the network's exceptions into one ``ForgeError`` line,
    in which the token never appears (an answer could echo it)."""
    try:
        yield
    except RetryWaitError as exc:
        raise RetryWaitError(_clean(f"gitlab: could not {what}: {exc}", token)) from None
    except GitlabError as exc:
        line = f"gitlab: could not {what}: {explain(exc, project)}"
        raise ForgeError(_clean(line, token)) from exc
    except requests.RequestException as exc:
        line = f"gitlab: could not {what}: cannot reach {api_url} ({type(exc).__name__})"
        raise ForgeError(_clean(line, token)) from exc


def status_of(exc: BaseException) -> int | None:
    """The HTTP status behind a ``ForgeError`` (or python-gitlab's error), when GitLab answered."""
    cause = exc if isinstance(exc, GitlabError) else exc.__cause__
    code = getattr(cause, "response_code", None)
    return code if isinstance(code, int) else None


def message_of(exc: BaseException) -> str:
    cause = exc if isinstance(exc, GitlabError) else exc.__cause__
    return _words(getattr(cause, "error_message", ""))


def explain(exc: GitlabError, project: str) -> str:
    """What went wrong and what to do, from GitLab's status and message."""
    status = exc.response_code
    text = " ".join(_words(exc.error_message).split())[:300] or "no message"
    if isinstance(status, int) and not text.startswith(str(status)):
        text = f"{status} {text}"  # GitLab's own messages mostly start with it
    hints = {
        401: "GITLAB_TOKEN was refused: is it valid and unexpired?",
        403: "GITLAB_TOKEN lacks a scope or role (a project access token with api, "
        "Developer or above)",
        404: f"{project} or the object does not exist, or GITLAB_TOKEN cannot see it",
        RATE_LIMITED: "GitLab's rate limit held through the retries: run again later",
    }
    hint = hints.get(status) if isinstance(status, int) else None
    return text + (f"; {hint}" if hint else "")


def _words(message: Any) -> str:
    """GitLab's message: a string, a list of them, or a validation error's
    ``{"field": ["reason", …]}``."""
    if isinstance(message, dict):
        return "; ".join(f"{key} {_words(value)}" for key, value in message.items())
    if isinstance(message, list):
        return "; ".join(_words(item) for item in message)
    return str(message or "")


def _clean(line: str, token: str) -> str:
    return line.replace(token, "[REDACTED]") if token else line
