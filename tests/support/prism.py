"""GitHub's REST API served by Prism from GitHub's own description, behind a recording proxy.

Prism (``@stoplight/prism-cli``) mocks ``@octokit/openapi``'s description of
api.github.com and **validates every request** against it: a body, a query or a path that
GitHub's schema rejects is answered 422 with an ``sl-violations`` header. In front of it
sits a small proxy that records every request and serves ``POST /graphql`` itself
(``graphql_stub``: validated and executed against ``@octokit/graphql-schema``).

How to use it (the fixture lives in ``tests/conftest.py``, so any test can ask for it)::

    def test_something(github_api: GitHubAPI, monkeypatch: pytest.MonkeyPatch) -> None:
        github_api.clear()                         # the server is shared by the session
        for key, value in github_api.env().items():
            monkeypatch.setenv(key, value)         # GITHUB_API_URL, _GRAPHQL_URL, _TOKEN, ...
        ...                                        # drive agentrun (in-process or a CLI)
        posted = github_api.find("POST", "/repos/octocat/Hello-World/issues/1347/comments")
        assert posted[0].body == {"body": "..."}
        github_api.assert_accepted()               # nothing was rejected by GitHub's schema

``GitHubAPI``:

- ``url``: the REST base URL (give it as ``GITHUB_API_URL``); ``graphql_url``: the
  GraphQL endpoint (``GITHUB_GRAPHQL_URL``).
- ``env(repository="octocat/Hello-World", token=TOKEN)``: the variables agentrun's
  ``github`` forge reads, pointing at this server (writes not spaced out).
- ``requests``: a snapshot list of ``Recorded`` (``method``, ``path`` without the query,
  ``query`` as ``{name: [values]}``, ``body`` parsed JSON or ``None``, ``status``,
  ``violations`` (what Prism's ``sl-violations`` header says about the request, not
  about its own example answers; or the GraphQL errors), ``headers``
  with lower-case names, ``injected``, ``at``: its arrival on ``time.monotonic()``);
  ``find(method, path)`` filters it (``path`` is a regular expression matched in
  full); ``graphql()`` gives the GraphQL requests.
- ``clear()``: forget what was recorded (call it first in each test).
- ``answer_with(method, path, code)``: Prism answers ``code`` to matching requests (the
  proxy adds ``Prefer: code=CODE``), until ``clear()``: a 404 for an unknown
  repository, a 403, ...
- ``assert_accepted()``: fail when any recorded request was refused: an
  ``sl-violations`` header, a 422, a GraphQL error, or any 4xx/5xx the request did not
  ask for with a ``Prefer: code=NNN`` header.
- ``two_pages(path)``: first-page GETs on ``path`` get a ``Link: rel="next"`` to a
  second page (the description's own ``Link`` example is dropped), until ``clear()``.
- ``job_log``: the text that the URL GitHub's ``/actions/jobs/{id}/logs`` redirects to
  answers (the description's example host, rewritten to this proxy's ``/_logs``).
- ``readied``: the pull request node ids the GraphQL stub marked ready for review.
- ``drafted``: the pull request node ids the GraphQL stub put back into draft.
- ``fail(method, path, fault, times=1)``: answer the next ``times`` matching requests
  with ``fault`` (``support.faults``: a secondary rate limit, a 502, ...) instead of
  Prism's answer; the request is still validated by Prism. Recorded with
  ``injected=True``, and not counted as refused. Until ``clear()``.
- ``respond(method, path, answer)``: once Prism has accepted a matching request
  (``path`` a regular expression matched in full), send ``answer(example)`` instead of
  its example (``answer`` may also be a plain value). For flows that need answers the
  examples cannot give: this login has read permission, these comments exist. The
  request is still validated and recorded; ``clear()`` forgets the answers.

Prism answers with the description's fixed examples (every comment has id 1, a created
pull request comes back with ``draft: false``, the repository is octocat/Hello-World):
assert on what was **sent**, and that it was accepted. ``Prefer: code=404`` on a
request makes Prism answer that status.

The description is trimmed (once per session) to ``PATHS`` and the components they
reference: Prism then starts in about a second instead of eight. Add a path there when
agentrun starts using a new endpoint; an unknown path is answered 404 by Prism and fails
``assert_accepted``.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support.faults import Fault, Faults
from support.graphql_stub import GraphQLStub
from support.http_body import read_body

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
PRISM = CLIENTS / "node_modules" / ".bin" / "prism"
DESCRIPTION = CLIENTS / "node_modules/@octokit/openapi/generated/api.github.com.json"
GITHUB = "https://api.github.com"
# Where GitHub's /actions/jobs/{id}/logs redirects to (its description's example host):
# served by the proxy under LOGS, with ``job_log`` as the log's text.
LOG_HOST = "https://pipelines.actions.githubusercontent.com"
LOGS = "/_logs"
REPOSITORY = "octocat/Hello-World"  # the repository of the description's examples
TOKEN = "ghs_" + "0123456789abcdefABCDEF0123456789abcd"  # shaped like an Actions token
START_SECONDS = 60.0

# The endpoints agentrun uses (the github forge, the Action).
PATHS = (
    "/repos/{owner}/{repo}",
    "/repos/{owner}/{repo}/collaborators/{username}/permission",
    "/repos/{owner}/{repo}/issues",
    "/repos/{owner}/{repo}/issues/{issue_number}",
    "/repos/{owner}/{repo}/issues/{issue_number}/comments",
    "/repos/{owner}/{repo}/issues/{issue_number}/labels",
    "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}",
    "/repos/{owner}/{repo}/issues/{issue_number}/reactions",
    "/repos/{owner}/{repo}/issues/comments/{comment_id}",
    "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
    "/repos/{owner}/{repo}/pulls",
    "/repos/{owner}/{repo}/pulls/{pull_number}",
    "/repos/{owner}/{repo}/pulls/{pull_number}/comments",
    "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers",
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews",
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}",
    "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments",
    "/repos/{owner}/{repo}/statuses/{sha}",
    "/repos/{owner}/{repo}/commits/{ref}/statuses",
    "/repos/{owner}/{repo}/commits/{ref}/check-runs",
    "/repos/{owner}/{repo}/commits/{ref}/status",
    "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs",
    "/user",
)
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
_LINK_HEADER = "#/components/headers/link"


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int
    violations: str | None
    headers: dict[str, str] = field(default_factory=dict)
    injected: bool = False  # answered by a fault (``fail``), not by Prism
    at: float = 0.0  # when it arrived (``time.monotonic()``)

    def __str__(self) -> str:
        extra = f" [{self.violations}]" if self.violations else ""
        return f"{self.method} {self.path} -> {self.status}{extra}"


class GitHubAPI:
    """The recording proxy in front of Prism (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.graphql_url = f"{url}/graphql"
        self.stub = GraphQLStub()
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []
        self._codes: list[tuple[str, re.Pattern[str], int]] = []
        self._paged: list[re.Pattern[str]] = []
        self._answers: dict[tuple[str, str], Any] = {}
        self.faults = Faults()
        self.job_log = ""  # what a job log's signed URL answers (``LOGS``), until ``clear()``

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def readied(self) -> list[str]:
        return list(self.stub.readied)

    @property
    def drafted(self) -> list[str]:
        return list(self.stub.drafted)

    def record(self, item: Recorded) -> None:
        with self._lock:
            self._requests.append(item)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._codes.clear()
            self._paged.clear()
            self._answers.clear()
        self.faults.clear()
        self.job_log = ""
        self.stub.readied.clear()
        self.stub.drafted.clear()

    def answer_with(self, method: str, path: str, code: int) -> None:
        """Make Prism answer ``code`` to ``method`` on ``path`` (a regular expression).

        The proxy adds ``Prefer: code=CODE`` to those requests, until ``clear()``.
        """
        with self._lock:
            self._codes.append((method, re.compile(path), code))

    def two_pages(self, path: str) -> None:
        """Answer the first page of GETs on ``path`` with a ``Link`` to a second page.

        (The trimmed description drops GitHub's ``Link`` header, so nothing paginates
        unless a test asks.) Until ``clear()``.
        """
        with self._lock:
            self._paged.append(re.compile(path))

    def next_page(self, method: str, path: str, query: dict[str, list[str]]) -> str | None:
        """The ``Link`` header to add to this answer, if it is a first page asked for."""
        with self._lock:
            paged = method == "GET" and any(rx.fullmatch(path) for rx in self._paged)
        if not paged or query.get("page", ["1"]) != ["1"]:
            return None
        return f'<{self.url}{path}?per_page=100&page=2>; rel="next"'

    def code_for(self, method: str, path: str) -> int | None:
        with self._lock:
            for want, rx, code in self._codes:
                if want == method and rx.fullmatch(path):
                    return code
        return None

    def fail(self, method: str, path: str, fault: Fault, times: int = 1) -> None:
        """Answer the next ``times`` ``method`` requests on ``path`` with ``fault``."""
        self.faults.add(method, path, fault, times)

    def respond(self, method: str, path: str, answer: Any) -> None:
        """Answer accepted ``method`` requests on ``path`` with ``answer`` (see above)."""
        with self._lock:
            self._answers[(method, path)] = answer

    def scripted(self, method: str, path: str, example: bytes) -> bytes | None:
        """The scripted answer to an accepted request, built from Prism's ``example``."""
        with self._lock:
            found = [
                a for (m, p), a in self._answers.items() if m == method and re.fullmatch(p, path)
            ]
        if not found:
            return None
        answer = found[-1]
        if callable(answer):
            answer = answer(json.loads(example) if example else None)
        return json.dumps(answer).encode()

    def env(self, repository: str = REPOSITORY, token: str = TOKEN) -> dict[str, str]:
        return {
            "GITHUB_API_URL": self.url,
            "GITHUB_GRAPHQL_URL": self.graphql_url,
            "GITHUB_TOKEN": token,
            "GITHUB_REPOSITORY": repository,
            # Writes unthrottled: the tests' flows write in bursts no real job makes.
            "AGENTRUN_GITHUB_WRITE_SECONDS": "0",
        }

    def find(self, method: str, path: str) -> list[Recorded]:
        rx = re.compile(path)
        return [r for r in self.requests if r.method == method and rx.fullmatch(r.path)]

    def graphql(self) -> list[Recorded]:
        return self.find("POST", "/graphql")

    def refused(self) -> list[Recorded]:
        """Requests GitHub's description (or schema) refused, or that failed unasked."""
        bad = []
        for r in self.requests:
            asked = r.headers.get("prefer", "")
            unasked = r.status >= 400 and "code=" not in asked and not r.injected
            if r.violations or r.status == 422 or unasked:
                bad.append(r)
        return bad

    def assert_accepted(self) -> None:
        bad = self.refused()
        assert not bad, "GitHub's API description refused:\n" + "\n".join(map(str, bad))


# --- the trimmed description ---------------------------------------------------------


def trimmed_description(url: str, paths: tuple[str, ...] = PATHS) -> dict[str, Any]:
    """GitHub's description cut to ``paths`` and what they reference, served from ``url``."""
    if not DESCRIPTION.exists():
        raise RuntimeError(
            f"{DESCRIPTION} is missing: run `npm ci --prefix tests/clients` (scripts/check does)"
        )
    full = json.loads(DESCRIPTION.read_text())
    missing = [p for p in paths if p not in full["paths"]]
    if missing:
        raise RuntimeError(f"not in GitHub's description: {', '.join(missing)}")
    examples = full["components"].get("examples", {})
    kept = {p: _inline_examples(_without_link_headers(full["paths"][p]), examples) for p in paths}
    components: dict[str, dict[str, Any]] = {}
    pending = _refs(kept)
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        _, _, section, name = ref.split("/", 3)
        value = _without_link_headers(full["components"][section][name])
        components.setdefault(section, {})[name] = value
        pending |= _refs(value)
    spec = {k: v for k, v in full.items() if k not in ("paths", "components", "x-webhooks")}
    spec["paths"] = kept
    spec["components"] = components
    text = json.dumps(spec).replace(GITHUB, url).replace(LOG_HOST, url + LOGS)
    result: dict[str, Any] = json.loads(text)
    return result


def _refs(value: Any) -> set[str]:
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/"):
                found.add(ref)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _inline_examples(value: Any, examples: dict[str, Any]) -> Any:
    """Put each referenced example's value in place.

    The description writes ``"value": {"$ref": "#/components/examples/issue"}``, a reference
    to a whole Example Object; Prism would answer with that object (``{"value": {...}}``)
    instead of the issue.
    """
    if isinstance(value, dict):
        ref = value.get("value", {}).get("$ref") if isinstance(value.get("value"), dict) else None
        if isinstance(ref, str) and ref.startswith("#/components/examples/"):
            name = ref.rsplit("/", 1)[1]
            return {**value, "value": examples[name]["value"]}
        return {k: _inline_examples(v, examples) for k, v in value.items()}
    if isinstance(value, list):
        return [_inline_examples(v, examples) for v in value]
    return value


def _without_link_headers(value: Any) -> Any:
    """Drop ``Link`` response headers: their example sends PyGithub's pagination to a 404."""
    if isinstance(value, dict):
        return {
            k: _without_link_headers(v)
            for k, v in value.items()
            if not (isinstance(v, dict) and v.get("$ref") == _LINK_HEADER)
        }
    if isinstance(value, list):
        return [_without_link_headers(v) for v in value]
    return value


# --- the proxy ---------------------------------------------------------------------------


def _handler(api: GitHubAPI, upstream: tuple[str, int]) -> type[BaseHTTPRequestHandler]:
    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            arrived = time.monotonic()
            raw, body = read_body(self)
            split = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            code = api.code_for(self.command, split.path)
            if code is not None:
                headers["prefer"] = f"code={code}"
            if self.command == "GET" and split.path.startswith(LOGS + "/"):
                # The signed URL a job's log redirects to: plain text, no token asked.
                status, out, violations = 200, api.job_log.encode(), ""
                out_headers = [("Content-Type", "text/plain")]
            elif self.command == "POST" and split.path == "/graphql":
                answer, errors = api.stub.answer(body)
                status, out, violations = 200, json.dumps(answer).encode(), "; ".join(errors)
                out_headers = [("Content-Type", "application/json")]
            else:
                status, out, out_headers = self._forward(raw, headers)
                link = api.next_page(self.command, split.path, parse_qs(split.query))
                if link is not None:
                    out_headers.append(("Link", link))
                violations = _request_violations(dict(out_headers).get("sl-violations"))
                if status < 300 and not violations:
                    out = api.scripted(self.command, split.path, out) or out
            fault = api.faults.take(self.command, split.path)
            if fault is not None:
                status, out, out_headers = fault.answer()
            api.record(
                Recorded(
                    method=self.command,
                    path=split.path,
                    query=parse_qs(split.query),
                    body=body,
                    status=status,
                    violations=violations or None,
                    headers=headers,
                    injected=fault is not None,
                    at=arrived,
                )
            )
            if fault is not None and fault.status == 0:
                self.close_connection = True
                return
            self.send_response(status)
            for name, value in out_headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def _forward(
            self, raw: bytes, headers: dict[str, str]
        ) -> tuple[int, bytes, list[tuple[str, str]]]:
            conn = http.client.HTTPConnection(*upstream, timeout=30)
            try:
                sent = {k: v for k, v in headers.items() if k not in _HOP_BY_HOP}
                conn.request(self.command, self.path, body=raw or None, headers=sent)
                response = conn.getresponse()
                data = response.read()
                kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
                return response.status, data, kept
            finally:
                conn.close()

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    return Proxy


def _request_violations(header: str | None) -> str:
    """What Prism found wrong with the request (it also reports its own examples' flaws)."""
    if not header:
        return ""
    try:
        found = json.loads(header)
    except ValueError:
        return header
    mine = [v for v in found if (v.get("location") or [""])[0] != "response"]
    return "; ".join(
        f"{'.'.join(map(str, v.get('location', [])))}: {v.get('message')}" for v in mine
    )


# --- Prism ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_until_up(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prism exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"prism did not answer within {START_SECONDS:g}s: {log.read_text()[-2000:]}")


@contextmanager
def serve_github(folder: Path) -> Iterator[GitHubAPI]:
    """Prism on GitHub's trimmed description, behind the recording proxy (``folder``
    holds the spec and Prism's log). The tests' fixture and ``bench/forge.py`` use it."""
    if not PRISM.exists():
        raise RuntimeError(
            f"{PRISM} is missing: run `npm ci --prefix tests/clients` (scripts/check does)"
        )
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    api = GitHubAPI(f"http://127.0.0.1:{server.server_address[1]}")
    spec = folder / "api.github.com.json"
    spec.write_text(json.dumps(trimmed_description(api.url)))
    port = _free_port()
    log = folder / "prism.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(PRISM), "mock", "-h", "127.0.0.1", "-p", str(port), "-v", "warn", str(spec)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    try:
        _wait_until_up(port, proc, log)
        server.RequestHandlerClass = _handler(api, ("127.0.0.1", port))
        thread.start()
        yield api
    finally:
        if thread.is_alive():
            server.shutdown()
        server.server_close()
        _end_group(proc)


@pytest.fixture(scope="module")
def github_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHubAPI]:
    """Prism serving GitHub's description, behind the recording proxy, one per module: a
    whole session's Prism was lost to process clean-ups of tests in other modules."""
    with serve_github(tmp_path_factory.mktemp("prism")) as api:
        yield api


@pytest.fixture
def github_env(github_api: GitHubAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubAPI]:
    """The API, cleared, with the ``GITHUB_*`` variables set for in-process forge calls."""
    github_api.clear()
    for key, value in github_api.env().items():
        monkeypatch.setenv(key, value)
    yield github_api
    github_api.clear()


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
