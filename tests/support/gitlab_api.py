"""A stateful fake GitLab (REST v4) on 127.0.0.1 that checks every request it is sent.

**Requests.** Each request is matched to an endpoint of ``gitlab/api-v4-subset.json``
(GitLab's own generated OpenAPI description, trimmed; see ``gitlab/README.md``) and
checked against its parameters: an unknown endpoint, an unknown query or body parameter,
a missing required one, or a value of the wrong type (``integer``, ``boolean``,
``string``, ``array`` and its items, an ``enum``) is a *violation*: answered 400 and
recorded, and ``assert_accepted()`` (run by the fixtures after every test) fails the test.

That description lacks some endpoints the forge calls. They are checked against the
parameters GitLab's API documentation (doc/api/notes.md, discussions.md, users.md) and
python-gitlab's managers (``gitlab/v4/objects``) give, written in ``DOCUMENTED`` below:

- ``GET/POST /projects/:id/issues/:issue_iid/notes``, ``PUT …/notes/:note_id``, and the
  same three for ``merge_requests/:merge_request_iid`` (body ``body`` required;
  ``internal``, ``created_at`` optional; list: ``sort`` asc|desc, ``order_by``
  created_at|updated_at, ``page``, ``per_page``);
- ``GET /projects/:id/merge_requests/:merge_request_iid/discussions`` (``page``,
  ``per_page``);
- ``GET /users`` (``username``, ``search``, ``active``, ``page``, ``per_page``) and
  ``GET /user`` (no parameters).

(The description's own ``absent`` list also names ``POST …/discussions``: the forge does
not call it.)

**Answers.** Bodies are built from the real ones the go-gitlab project recorded, shipped
by Debian's ``golang-github-xanzy-go-gitlab-dev`` under ``TESTDATA``:
``get_merge_request.json`` (a merge request), ``issue_move.json`` (an issue),
``get_user.json`` (a user) and ``webhooks/note_issue.json`` (the project). Notes have the
fields of go-gitlab's recorded note (``notes_test.go``) with those GitLab's documentation
adds (author, times, resolved); members, award emoji, statuses, discussions and reviewers
follow the examples of GitLab's API documentation, as go-gitlab's tests copy them.

**State.** One project (``PROJECT``, id ``PROJECT_ID``), people (``add_user``), members
(``add_member``: ``/members/all`` answers inherited membership too), issues, merge
requests (their ``sha`` is the tip of the source branch in ``origin``, a bare
repository, when given), notes (ids count up across the instance), diff threads,
reviewer states, award emoji and commit statuses. GitLab's behaviour where the forge
relies on it: a second open merge request of one source branch is a 409; ``draft`` is
the ``Draft:`` title prefix; a status moved to the state it is in is a 400; an emoji
awarded twice is a 404; a list whose description takes ``page`` is paginated with
``Link: rel="next"`` (``page_size`` caps ``per_page``).

``fail(method, path, status, headers, times)`` answers the next matching requests with a
fault (a 429 with ``Retry-After``, a 502); they are still checked and recorded.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pygit2

SPEC = Path(__file__).parent / "gitlab" / "api-v4-subset.json"
TESTDATA = Path("/usr/share/gocode/src/github.com/xanzy/go-gitlab/testdata")
TOKEN = "glpat-FAKE0123456789abcdef"
PROJECT = "gitlab-org/gitlab-test"
PROJECT_ID = 5
BOT = "agentrun-bot"
_P = {"name": "id", "in": "path", "type": "string", "required": True}
_PAGES = [
    {"name": "page", "in": "query", "type": "integer"},
    {"name": "per_page", "in": "query", "type": "integer"},
]
_LIST_NOTES = [
    *_PAGES,
    {"name": "sort", "in": "query", "type": "string", "enum": ["asc", "desc"]},
    {"name": "order_by", "in": "query", "type": "string", "enum": ["created_at", "updated_at"]},
]
_NOTE_BODY = {
    "name": "note",
    "in": "body",
    "required": True,
    "properties": [
        {"name": "body", "type": "string", "required": True},
        {"name": "internal", "type": "boolean", "required": False},
        {"name": "created_at", "type": "string", "required": False},
    ],
}


def _documented() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for kind, iid in (("issues", "issue_iid"), ("merge_requests", "merge_request_iid")):
        base = f"/api/v4/projects/{{id}}/{kind}/{{{iid}}}/notes"
        path_params = [_P, {"name": iid, "in": "path", "type": "integer", "required": True}]
        note = {"name": "note_id", "in": "path", "type": "integer", "required": True}
        found[f"GET {base}"] = {"params": [*path_params, *_LIST_NOTES]}
        found[f"POST {base}"] = {"params": [*path_params, _NOTE_BODY]}
        found[f"PUT {base}/{{note_id}}"] = {"params": [*path_params, note, _NOTE_BODY]}
    mr = [_P, {"name": "merge_request_iid", "in": "path", "type": "integer", "required": True}]
    threads = "/api/v4/projects/{id}/merge_requests/{merge_request_iid}/discussions"
    found[f"GET {threads}"] = {"params": [*mr, *_PAGES]}
    users = [
        {"name": "username", "in": "query", "type": "string"},
        {"name": "search", "in": "query", "type": "string"},
        {"name": "active", "in": "query", "type": "boolean"},
        *_PAGES,
    ]
    found["GET /api/v4/users"] = {"params": users}
    found["GET /api/v4/user"] = {"params": []}
    return found


DOCUMENTED = _documented()


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


class GitLabError(Exception):
    def __init__(self, status: int, message: Any) -> None:
        self.status, self.message = status, message


def _testdata(name: str) -> Any:
    path = TESTDATA / name
    if not path.is_file():
        raise RuntimeError(
            f"{path} is missing: apt-get install -y golang-github-xanzy-go-gitlab-dev "
            "(.ci/run installs it)"
        )
    return json.loads(path.read_text())


class GitLabAPI:
    """The fake's state and its HTTP server (``url`` is the instance's web URL)."""

    def __init__(self, origin: Path | None = None) -> None:
        self.origin = origin
        self.spec = {**json.loads(SPEC.read_text())["endpoints"], **DOCUMENTED}
        self._routes = [(key, *_template(key)) for key in self.spec]
        self.lock = threading.RLock()
        self.requests: list[Recorded] = []
        self.faults: list[_Fault] = []
        self._ids = itertools.count(1001)  # note ids, across the instance
        self._clock = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
        self.page_size = 100  # GitLab's largest per_page
        self.users: dict[str, dict[str, Any]] = {}
        self.members: dict[int, int] = {}  # user id -> access level
        self.blocked: set[int] = set()
        self.issues: dict[int, dict[str, Any]] = {}
        self.mrs: dict[int, dict[str, Any]] = {}
        self.notes: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.reviewer_states: dict[tuple[int, str], str] = {}
        self.emoji: dict[int, list[str]] = {}
        self.statuses: dict[str, list[dict[str, Any]]] = {}
        hook = _testdata("webhooks/note_issue.json")
        self.project = {**hook["project"], "id": PROJECT_ID, "path_with_namespace": PROJECT}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.bot = self.add_user(BOT, bot=True)
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

    # --- state the tests set up ------------------------------------------------

    def add_user(self, username: str, bot: bool = False) -> dict[str, Any]:
        with self.lock:
            user = _testdata("get_user.json")
            user.update(
                id=100 + len(self.users),
                username=username,
                name=username.title(),
                bot=bot,
                web_url=f"{self.url}/{username}",
            )
            self.users[username] = user
            return user

    def add_member(self, username: str, level: int) -> dict[str, Any]:
        user = self.users.get(username) or self.add_user(username)
        self.members[int(user["id"])] = level
        return user

    def add_issue(self, title: str, body: str, author: str, labels: tuple[str, ...] = ()) -> int:
        with self.lock:
            iid = max(self.issues, default=0) + 1
            issue = _testdata("issue_move.json")
            issue.update(
                id=9000 + iid,
                iid=iid,
                project_id=PROJECT_ID,
                title=title,
                description=body,
                labels=list(labels),
                author=_short(self.users.get(author) or self.add_user(author)),
                web_url=f"{self.url}/{PROJECT}/-/issues/{iid}",
                created_at=self._now(),
                updated_at=self._now(),
            )
            self.issues[iid] = issue
            return iid

    def add_note(
        self,
        kind: str,
        iid: int,
        author: str,
        body: str,
        *,
        system: bool = False,
        diff: tuple[str, int] | None = None,
        thread: str | None = None,
    ) -> dict[str, Any]:
        """A note by ``author`` on issue or merge request ``iid`` (``kind``: "issues" or
        "merge_requests"); ``diff``: (path, line) starts a thread on the diff; ``thread``:
        the discussion id it replies in."""
        with self.lock:
            self._noteable(kind, iid)
            user = self.users.get(author) or self.add_user(author)
            now = self._now()
            note_id = next(self._ids)
            note: dict[str, Any] = {
                "id": note_id,
                "type": "DiffNote" if diff else None,
                "body": body,
                "attachment": None,
                "author": _short(user),
                "created_at": now,
                "updated_at": now,
                "system": system,
                "noteable_id": self._noteable(kind, iid)["id"],
                "noteable_type": "Issue" if kind == "issues" else "MergeRequest",
                "noteable_iid": iid,
                "resolvable": bool(diff),
                "confidential": False,
                "internal": False,
                "discussion_id": thread or f"{note_id:040x}",
            }
            if thread is not None:  # a reply takes its thread's kind
                first = next(n for n in self._all_notes(kind, iid) if n["discussion_id"] == thread)
                note["type"], note["resolvable"] = first["type"], first["resolvable"]
                note["position"] = first.get("position")
            if note["resolvable"]:
                note["resolved"] = False
            if diff:
                path, line = diff
                note["position"] = {
                    "base_sha": "0" * 40,
                    "start_sha": "0" * 40,
                    "head_sha": "0" * 40,
                    "old_path": path,
                    "new_path": path,
                    "position_type": "text",
                    "old_line": None,
                    "new_line": line,
                }
            self.notes.setdefault((kind, iid), []).append(note)
            return note

    def resolve(self, discussion_id: str) -> None:
        with self.lock:
            for notes in self.notes.values():
                for note in notes:
                    if note["discussion_id"] == discussion_id and note.get("resolvable"):
                        note["resolved"] = True

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

    def comments(self, kind: str, iid: int) -> list[dict[str, Any]]:
        with self.lock:
            return [n for n in self._all_notes(kind, iid) if not n["system"]]

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
            endpoint, params = self._match(method, segments)
            record.endpoint = endpoint
            record.violations = self._check(endpoint, params, query, body)
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
                status, answer = self._answer(method, endpoint, params, query, body)
            except GitLabError as exc:
                record.status = exc.status
                return exc.status, {}, {"message": exc.message}
            record.status = status
            pages = any(p["name"] == "page" for p in self.spec[endpoint]["params"])
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

    def _match(self, method: str, segments: list[str]) -> tuple[str, dict[str, str]]:
        for key, verb, parts in self._routes:
            if verb != method or len(parts) != len(segments):
                continue
            params: dict[str, str] = {}
            for part, segment in zip(parts, segments, strict=True):
                if part.startswith("{"):
                    params[part[1:-1]] = segment
                elif part != segment:
                    break
            else:
                return key, params
        return "", {}

    def _check(
        self, endpoint: str, path: dict[str, str], query: dict[str, list[str]], body: Any
    ) -> list[str]:
        if not endpoint:
            return ["no such endpoint in GitLab's description or documentation"]
        problems: list[str] = []
        declared = self.spec[endpoint]["params"]
        by_place = {p["in"]: [] for p in declared}
        for p in declared:
            by_place[p["in"]].append(p)
        for p in by_place.get("path", []):
            problems += _typed(p, path.get(p["name"]), "path")
        known = {p["name"]: p for p in by_place.get("query", [])}
        for name, values in query.items():
            spec = known.get(name) or known.get(name.removesuffix("[]"))
            if spec is None:
                problems.append(f"unknown query parameter {name!r}")
                continue
            for value in values:
                problems += _typed(spec, value, "query")
        for p in by_place.get("query", []):
            if p.get("required") and p["name"] not in query:
                problems.append(f"missing required query parameter {p['name']!r}")
        bodies = by_place.get("body", [])
        if bodies:
            if not isinstance(body, dict):
                return [*problems, "the body is not a JSON object"]
            props = {p["name"]: p for p in bodies[0]["properties"]}
            for name, value in body.items():
                if name not in props:
                    problems.append(f"unknown body parameter {name!r}")
                else:
                    problems += _json_typed(props[name], value)
            for name, p in props.items():
                if p.get("required") and name not in body:
                    problems.append(f"missing required body parameter {name!r}")
        elif body not in (None, {}, ""):
            problems.append("a body where the endpoint takes none")
        return problems

    # --- GitLab's behaviour ----------------------------------------------------------

    def _answer(
        self, method: str, endpoint: str, p: dict[str, str], query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        route = endpoint.split(" ", 1)[1].removeprefix("/api/v4")
        if route.startswith("/projects/{id}") and p["id"] not in (PROJECT, str(PROJECT_ID)):
            raise GitLabError(404, "404 Project Not Found")
        if route == "/user":
            return 200, self.bot
        if route == "/users":
            name = (query.get("username") or [""])[0].lower()
            return 200, [u for n, u in self.users.items() if n.lower() == name]
        if route == "/projects/{id}":
            return 200, self.project
        if route.startswith("/projects/{id}/members/all/"):
            user_id = int(p["user_id"])
            user = next((u for u in self.users.values() if u["id"] == user_id), None)
            if user is None or user_id not in self.members:
                raise GitLabError(404, "404 Not found")
            state = "blocked" if user_id in self.blocked else "active"
            return 200, {
                **_short(user),
                "state": state,
                "access_level": self.members[user_id],
                "expires_at": None,
            }
        if route == "/projects/{id}/statuses/{sha}":
            return self._status(p["sha"], body)
        if route.startswith("/projects/{id}/merge_requests"):
            return self._mr_route(method, route, p, query, body)
        if route.startswith("/projects/{id}/issues"):
            return self._issue_route(method, route, p, body)
        raise GitLabError(404, "404 Not Found")

    def _issue_route(
        self, method: str, route: str, p: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        iid = int(p["issue_iid"])
        issue = self._noteable("issues", iid)
        if route == "/projects/{id}/issues/{issue_iid}":
            if method == "PUT":
                _edit_labels(issue, body)
                for key in ("title", "description"):
                    if key in body:
                        issue[key] = body[key]
                issue["updated_at"] = self._now()
            return 200, issue
        return self._note_route(method, route, "issues", iid, p, body)

    def _mr_route(
        self, method: str, route: str, p: dict[str, str], query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        if route == "/projects/{id}/merge_requests":
            if method == "POST":
                return 201, self._open(body)
            found = sorted(self.mrs.values(), key=lambda m: m["iid"], reverse=True)
            state = (query.get("state") or ["all"])[0]
            branch = (query.get("source_branch") or [None])[0]
            found = [
                self._mr(m["iid"])
                for m in found
                if state in ("all", m["state"]) and branch in (None, m["source_branch"])
            ]
            if (query.get("sort") or ["desc"])[0] == "asc":
                found.reverse()
            return 200, found
        iid = int(p["merge_request_iid"])
        mr = self._noteable("merge_requests", iid)
        if route == "/projects/{id}/merge_requests/{merge_request_iid}":
            if method == "PUT":
                _edit_labels(mr, body)
                for key in ("title", "description"):
                    if key in body:
                        mr[key] = body[key]
                if "reviewer_ids" in body:
                    by_id = {u["id"]: u for u in self.users.values()}
                    mr["reviewers"] = [_short(by_id[i]) for i in body["reviewer_ids"]]
                if body.get("state_event") == "close":
                    mr["state"] = "closed"
                mr["updated_at"] = self._now()
            return 200, self._mr(iid)
        if route.endswith("/reviewers"):
            return 200, [
                {
                    "user": r,
                    "state": self.reviewer_states.get((iid, r["username"]), "unreviewed"),
                    "created_at": mr["created_at"],
                }
                for r in mr["reviewers"]
            ]
        if route.endswith("/discussions"):
            threads: dict[str, list[dict[str, Any]]] = {}
            for note in self._all_notes("merge_requests", iid):
                threads.setdefault(note["discussion_id"], []).append(note)
            return 200, [
                {
                    "id": key,
                    "individual_note": len(notes) == 1 and notes[0]["type"] is None,
                    "notes": notes,
                }
                for key, notes in threads.items()
            ]
        return self._note_route(method, route, "merge_requests", iid, p, body)

    def _note_route(
        self, method: str, route: str, kind: str, iid: int, p: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        notes = self._all_notes(kind, iid)
        if route.endswith("/notes"):
            if method == "POST":
                return 201, self.add_note(kind, iid, BOT, body["body"])
            return 200, sorted(notes, key=lambda n: n["id"])  # asc, as asked
        note = next((n for n in notes if n["id"] == int(p["note_id"])), None)
        if note is None:
            raise GitLabError(404, "404 Note Not Found")
        if route.endswith("/award_emoji"):
            awarded = self.emoji.setdefault(note["id"], [])
            if body["name"] in awarded:
                raise GitLabError(404, "404 Award Emoji Name has already been taken Not Found")
            awarded.append(body["name"])
            return 201, {
                "id": len(awarded),
                "name": body["name"],
                "user": _short(self.bot),
                "awardable_id": note["id"],
                "awardable_type": "Note",
            }
        if note["author"]["username"] != BOT:
            raise GitLabError(403, "403 Forbidden")
        note["body"], note["updated_at"] = body["body"], self._now()
        return 200, note

    def open_from_fork(self, branch: str, author: str) -> int:
        """A merge request into the project from ``branch`` of someone's fork."""
        with self.lock:
            iid = int(
                self._open(
                    {"title": "theirs", "source_branch": branch, "target_branch": "main"},
                    PROJECT_ID + 1000,
                )["iid"]
            )
            self.mrs[iid]["author"] = _short(self.users.get(author) or self.add_user(author))
            return iid

    def _open(self, body: dict[str, Any], source: int = PROJECT_ID) -> dict[str, Any]:
        for mr in self.mrs.values():
            if (
                mr["state"] == "opened"
                and mr["source_branch"] == body["source_branch"]
                and mr["source_project_id"] == source
            ):
                raise GitLabError(
                    409,
                    [
                        "Another open merge request already exists for this source "
                        f"branch: !{mr['iid']}"
                    ],
                )
        iid = max(self.mrs, default=0) + 1
        mr = _testdata("get_merge_request.json")
        mr.update(
            id=7000 + iid,
            iid=iid,
            project_id=PROJECT_ID,
            source_project_id=source,
            target_project_id=PROJECT_ID,
            title=body["title"],
            description=body.get("description", ""),
            source_branch=body["source_branch"],
            target_branch=body["target_branch"],
            state="opened",
            labels=[],
            reviewers=[],
            assignees=[],
            assignee=None,
            author=_short(self.bot),
            reference=f"!{iid}",
            web_url=f"{self.url}/{PROJECT}/-/merge_requests/{iid}",
            created_at=self._now(),
            updated_at=self._now(),
        )
        self.mrs[iid] = mr
        return self._mr(iid)

    def _mr(self, iid: int) -> dict[str, Any]:
        mr = copy.deepcopy(self.mrs[iid])
        draft = (
            re.match(r"^\s*(\[draft\]|\(draft\)|draft:)", mr["title"], re.IGNORECASE) is not None
        )
        mr["draft"] = mr["work_in_progress"] = draft
        if (
            self.origin is not None
            and self.origin.exists()
            and mr["source_project_id"] == PROJECT_ID
        ):
            ref = pygit2.Repository(str(self.origin)).references.get(
                f"refs/heads/{mr['source_branch']}"
            )
            mr["sha"] = str(ref.target) if ref is not None else None
        return mr

    def _status(self, sha: str, body: dict[str, Any]) -> tuple[int, Any]:
        name = body.get("name") or body.get("context") or "default"
        mine = [s for s in self.statuses.get(sha, []) if s["name"] == name]
        if mine and mine[-1]["status"] == body["state"] and body["state"] in ("pending", "running"):
            verb = {"pending": "enqueue", "running": "run"}[body["state"]]
            raise GitLabError(400, f"Cannot transition status via :{verb} from :{body['state']}")
        status = {
            "id": sum(len(v) for v in self.statuses.values()) + 1,
            "sha": sha,
            "ref": body.get("ref"),
            "status": body["state"],
            "name": name,
            "target_url": body.get("target_url"),
            "description": body.get("description"),
            "created_at": self._now(),
            "started_at": None,
            "finished_at": None,
            "allow_failure": False,
            "coverage": None,
            "author": _short(self.bot),
        }
        self.statuses.setdefault(sha, []).append(status)
        return 201, status

    def _noteable(self, kind: str, iid: int) -> dict[str, Any]:
        found = (self.issues if kind == "issues" else self.mrs).get(iid)
        if found is None:
            raise GitLabError(404, "404 Not found")
        return found

    def _all_notes(self, kind: str, iid: int) -> list[dict[str, Any]]:
        return self.notes.setdefault((kind, iid), [])

    def _now(self) -> str:
        self._clock += timedelta(seconds=1)
        return self._clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _template(key: str) -> tuple[str, list[str]]:
    method, path = key.split(" ", 1)
    return method, path.split("/")


def _typed(spec: dict[str, Any], value: str | None, where: str) -> list[str]:
    """A path or query value (a string on the wire) against its declared type."""
    name = spec["name"]
    if value is None:
        return [f"missing {where} parameter {name!r}"] if spec.get("required") else []
    kind = spec.get("type")
    if kind == "array":
        kind = (spec.get("items") or {}).get("type", "string")
    if kind == "integer" and not re.fullmatch(r"-?\d+", value):
        return [f"{where} parameter {name!r}={value!r} is not an integer"]
    if kind == "boolean" and value not in ("true", "false"):
        return [f"{where} parameter {name!r}={value!r} is not a boolean"]
    if "enum" in spec and value not in spec["enum"]:
        return [f"{where} parameter {name!r}={value!r} is not one of {spec['enum']}"]
    return []


def _json_typed(spec: dict[str, Any], value: Any) -> list[str]:
    """A JSON body value against its declared type."""
    name, kind = spec["name"], spec.get("type")
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    check = checks.get(str(kind))
    if check is not None and not check(value):
        return [f"body parameter {name!r}={value!r} is not of type {kind}"]
    if kind == "array":
        item = {**(spec.get("items") or {}), "name": f"{name}[]"}
        return [p for v in value for p in _json_typed(item, v)]
    if "enum" in spec and value not in spec["enum"]:
        return [f"body parameter {name!r}={value!r} is not one of {spec['enum']}"]
    return []


def _edit_labels(item: dict[str, Any], body: dict[str, Any]) -> None:
    labels = [*item["labels"]]
    if "labels" in body:
        labels = [*body["labels"]]
    labels += [name for name in body.get("add_labels", []) if name not in labels]
    labels = [name for name in labels if name not in body.get("remove_labels", [])]
    item["labels"] = labels


def _short(user: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "username", "name", "state", "avatar_url", "web_url")
    return {k: user.get(k) for k in keys}


def _handler(api: GitLabAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, headers, answer = api.handle(self.command, self.path, self.headers, raw)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
