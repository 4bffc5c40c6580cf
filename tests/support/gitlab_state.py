"""The fake GitLab's state, and how GitLab answers: what ``gitlab_api`` serves.

Bodies are built from the real ones the go-gitlab project recorded, shipped
by Debian's ``golang-github-xanzy-go-gitlab-dev`` under ``TESTDATA``:
``get_merge_request.json`` (a merge request), ``issue_move.json`` (an issue),
``get_user.json`` (a user) and ``webhooks/note_issue.json`` (the project). Notes have the
fields of go-gitlab's recorded note (``notes_test.go``) with those GitLab's documentation
adds (author, times, resolved); members, award emoji, statuses, discussions and reviewers
follow the examples of GitLab's API documentation, as go-gitlab's tests copy them.

One project (``PROJECT``, id ``PROJECT_ID``), people (``add_user``), members
(``add_member``: ``/members/all`` answers inherited membership too), issues, merge
requests (their ``sha`` is the tip of the source branch in ``origin``, a bare
repository, when given), notes (ids count up across the instance), diff threads,
reviewer states, award emoji and commit statuses. GitLab's behaviour where the forge
relies on it: a second open merge request of one source branch is a 409; ``draft`` is
the ``Draft:`` title prefix; a status moved to the state it is in is a 400; an emoji
awarded twice is a 404.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2
from support.gitlab_ci import CIState

TESTDATA = Path("/usr/share/gocode/src/github.com/xanzy/go-gitlab/testdata")
TOKEN = "glpat-FAKE0123456789abcdef"
PROJECT = "gitlab-org/gitlab-test"
PROJECT_ID = 5
BOT = "agentrun-bot"


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


class GitLabState:
    """One project's people, issues, merge requests, notes and statuses, and the answers
    GitLab gives about them (``answer``)."""

    def __init__(self, url: str, origin: Path | None) -> None:
        self.url, self.origin = url, origin
        self.lock = threading.RLock()
        self._ids = itertools.count(1001)  # note ids, across the instance
        self._clock = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
        self.users: dict[str, dict[str, Any]] = {}
        self.members: dict[int, int] = {}  # user id -> access level
        self.blocked: set[int] = set()
        self.issues: dict[int, dict[str, Any]] = {}
        self.mrs: dict[int, dict[str, Any]] = {}
        self.notes: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.threads: dict[int, str] = {}  # note id -> the id of its discussion
        self.reviewer_states: dict[tuple[int, str], str] = {}
        self.emoji: dict[int, list[str]] = {}
        self.statuses: dict[str, list[dict[str, Any]]] = {}
        hook = _testdata("webhooks/note_issue.json")
        self.project = {**hook["project"], "id": PROJECT_ID, "path_with_namespace": PROJECT}
        self.bot = self.add_user(BOT, bot=True)
        self.ci = CIState(url, PROJECT, PROJECT_ID, self._now)  # pipelines and jobs

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
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        """A note by ``author`` on issue or merge request ``iid`` (``kind``: "issues" or
        "merge_requests"); ``diff``: (path, line) starts a thread on the diff; ``reply_to``:
        a note of the thread it replies in."""
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
            }
            self.threads[note_id] = f"{note_id:040x}"  # a discussion id: 40 hex digits
            if reply_to is not None:  # a reply is in its thread, of its kind
                first = next(n for n in self._all_notes(kind, iid) if n["id"] == reply_to)
                note["type"], note["resolvable"] = first["type"], first["resolvable"]
                note["position"] = first.get("position")
                self.threads[note_id] = self.threads[reply_to]
            if note["resolvable"]:
                note["resolved"] = False
            if diff:
                path, line = diff
                sha = {"base_sha": "0" * 40, "start_sha": "0" * 40, "head_sha": "0" * 40}
                note["position"] = {
                    **sha,
                    **{"old_path": path, "new_path": path, "position_type": "text"},
                    **{"old_line": None, "new_line": line},
                }
            self.notes.setdefault((kind, iid), []).append(note)
            return note

    def resolve(self, note_id: int) -> None:
        """Resolve the thread note ``note_id`` is in."""
        with self.lock:
            thread = self.threads[note_id]
            for notes in self.notes.values():
                for note in notes:
                    if self.threads[note["id"]] == thread and note.get("resolvable"):
                        note["resolved"] = True

    def comments(self, kind: str, iid: int) -> list[dict[str, Any]]:
        with self.lock:
            return [n for n in self._all_notes(kind, iid) if not n["system"]]

    # --- GitLab's behaviour ----------------------------------------------------------

    def answer(
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
        if route.startswith(("/projects/{id}/pipelines", "/projects/{id}/jobs")) or (
            route == "/projects/{id}/repository/commits/{sha}/statuses"
        ):
            return self.ci.answer(route, p, query, self.statuses.get(p.get("sha", ""), []))
        if route.startswith("/projects/{id}/merge_requests"):
            return self._mr_route(method, route, p, query, body)
        if route == "/projects/{id}/issues":
            return 200, self._labeled(query)
        if route.startswith("/projects/{id}/issues"):
            return self._issue_route(method, route, p, body)
        raise GitLabError(404, "404 Not Found")

    def _labeled(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """``GET /projects/:id/issues?labels=A,B&state=opened``, oldest first."""
        wanted = set(query.get("labels", [""])[0].split(",")) - {""}
        state = query.get("state", ["all"])[0]
        return [
            issue
            for _, issue in sorted(self.issues.items())
            if wanted <= set(issue["labels"]) and state in ("all", issue["state"])
        ]

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
                threads.setdefault(self.threads[note["id"]], []).append(note)
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
                # lib/api/award_emoji.rb: not_found!("Award Emoji #{service[:message]}")
                taken = '["Name has already been taken"]'
                raise GitLabError(404, f"404 Award Emoji {taken} Not Found")
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
            # GitLab's words (spec/requests/api/commit_statuses_spec.rb)
            why = f'Status cannot transition via "{verb}"'
            raise GitLabError(
                400,
                f"Cannot transition status via :{verb} from :{body['state']} (Reason(s): {why})",
            )
        status = {
            "id": self.ci.next_id(),  # jobs and statuses share GitLab's ids
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
            "pipeline_id": None,
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
