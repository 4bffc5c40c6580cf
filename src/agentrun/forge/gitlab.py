"""The gitlab forge: merge requests, issues, notes, labels and statuses through python-gitlab.

Configured from the environment, as GitLab CI sets it: the token (``credentials``:
``AGENTRUN_TOKEN_FD``, ``GITLAB_TOKEN``, ``GL_TOKEN``), the instance (``CI_API_V4_URL``,
``CI_SERVER_URL``; else ``[forge] url`` of the repository's config, default gitlab.com)
and the project (``CI_PROJECT_PATH``; else read from the ``origin`` URL). Branches are
pushed with the git CLI, as for every forge (``push_to_origin``). The client, its
retries and its errors are ``gitlab_http``'s.

A merge request's number is ``PROPOSALS + iid``, apart from the issues' (``gitlab_site``).
Notes stand for comments: system notes (label changes, pushes) are not comments.
"""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pygit2

from agentrun import credentials
from agentrun.errors import ForgeError
from agentrun.forge.base import (
    Access,
    Check,
    Comment,
    CommitState,
    Issue,
    ProposalInfo,
    Review,
    forge_token,
    origin_url,
    register,
    status_marked,
)
from agentrun.forge.branches import push_to_origin
from agentrun.forge.gitlab_read import (
    access_of,
    comment_of,
    issue_of,
    proposal_info,
    reviews_of,
    username,
)
from agentrun.forge.gitlab_site import (
    configured_url,
    draft_title,
    instance_url,
    project_from,
    ready_title,
    ref,
    split,
)
from agentrun.forge.gitlab_users import Users

if TYPE_CHECKING:
    from gitlab.v4.objects import Project

# The reaction names agentrun uses, as GitLab's award emoji call them.
EMOJI = {"+1": "thumbsup", "-1": "thumbsdown", "laugh": "laughing", "hooray": "tada"}
STATE = {"pending": "pending", "success": "success", "failure": "failed", "error": "failed"}

# (instance, project, note id) -> ("issues" or "merge_requests", iid): where a note read in
# this process is, for ``react`` (GitLab finds a note only through its issue or merge
# request). Shared by every forge object: a sweep reads with several, reacts with one.
_noteables: dict[tuple[str, str, int], tuple[str, int]] = {}
_noteables_lock = threading.Lock()


class GitLabForge:
    """Merge requests and issues of one GitLab project."""

    name = "gitlab"

    def __init__(self, repo: pygit2.Repository, stop_at: float | None = None) -> None:
        """``stop_at``: the job's ``time.monotonic()`` deadline, which no retry outlives."""
        from agentrun.forge import gitlab_http

        self.repo = repo
        set_it = (
            "set GITLAB_TOKEN (a project access token with the api and write_repository scopes)"
        )
        token = self.token = forge_token("gitlab", credentials.gitlab_token(), set_it)
        self.url = instance_url(os.environ, configured_url(repo))
        self.path = project_from(os.environ, origin_url(repo), self.url)
        self.api_url = f"{self.url}/api/v4"
        self.gl = gitlab_http.client(self.url, token, stop_at)
        self.project: Project = self.gl.projects.get(self.path, lazy=True)
        self._project_id: int | None = None
        self._status_ids: dict[tuple[int, str], int] = {}
        self.users = Users(self.gl, self._errors)

    # --- the Forge protocol ------------------------------------------------

    def push_branch(self, branch: str, sha: str) -> None:
        push_to_origin(self.repo, branch, sha)

    def find_open(self, head: str) -> ProposalInfo | None:
        """The open merge request from this project's ``head``: one from a fork's branch of
        that name is someone else's, never the build's."""
        with self._errors(f"list open merge requests of {head}"):
            found = self.project.mergerequests.list(
                state="opened", source_branch=head, get_all=True
            )
            own = (
                mr.attributes
                for mr in found
                if mr.attributes.get("source_project_id") == mr.attributes.get("project_id")
            )
            return next((proposal_info(data) for data in own), None)

    def open_draft(
        self, title: str, body: str, head: str, base: str, build: str | None
    ) -> ProposalInfo:
        data = {
            "title": draft_title(title),
            "description": body,
            "source_branch": head,
            "target_branch": base,
        }
        with self._errors(f"open a draft merge request of {head} into {base}"):
            return proposal_info(self.project.mergerequests.create(data).attributes)

    def get(self, number: int) -> ProposalInfo:
        iid = self._iid(number, "read")
        with self._errors(f"read merge request !{iid}"):
            info = proposal_info(self.project.mergerequests.get(iid).attributes)
            notes = self._notes("merge_requests", iid)
        return replace(info, comments=tuple(comment_of(n) for n in notes))

    def list(self) -> builtins.list[ProposalInfo]:
        with self._errors("list merge requests"):
            found = self.project.mergerequests.list(
                state="all", order_by="created_at", sort="desc", get_all=True
            )
            return [proposal_info(mr.attributes) for mr in found]

    def update_body(self, number: int, body: str) -> None:
        iid = self._iid(number, "update")
        with self._errors(f"update the description of !{iid}"):
            self.project.mergerequests.update(iid, {"description": body})

    def upsert_status_comment(self, number: int, body: str) -> Comment:
        """Edit the token owner's note whose first line is ``body``'s marker line, or post it.

        A body that does not start with an ``<!-- agentrun:… -->`` marker gets
        ``STATUS_MARKER`` as its first line. Anyone may post a note with that line: only
        the token owner's own is the status note.
        """
        first, body = status_marked(body)
        kind, iid = split(number)
        key = (number, first)
        with self._errors(f"update the status note on {ref(number)}"):
            known = self._status_ids.get(key)
            if known is None:
                me = self.users.me()
                for old in self._notes(kind, iid):
                    mine = username(old.get("author")) == me
                    if mine and str(old.get("body") or "").split("\n", 1)[0] == first:
                        known = int(old["id"])
                        break
            notes = self._noteable(kind, iid).notes
            if known is not None:
                data = notes.update(known, {"body": body})
            else:
                data = notes.create({"body": body}).attributes
            self._status_ids[key] = int(data["id"])
            return comment_of(data)

    def comment(self, number: int, body: str, author: str = "agentrun") -> Comment:
        """Post a note; GitLab credits the token's owner, whatever ``author`` says."""
        kind, iid = split(number)
        with self._errors(f"comment on {ref(number)}"):
            data = self._noteable(kind, iid).notes.create({"body": body}).attributes
            self._remember(int(data["id"]), kind, iid)
            return comment_of(data)

    def comments_since(self, number: int, after_id: int) -> builtins.list[Comment]:
        """Notes with an id above ``after_id``, oldest first (GitLab's note ids grow
        across the instance); authors as the API names them, never a payload."""
        kind, iid = split(number)
        with self._errors(f"read the notes of {ref(number)}"):
            notes = self._notes(kind, iid)
        return sorted((comment_of(n) for n in notes if int(n["id"]) > after_id), key=lambda c: c.id)

    def mark_ready(self, number: int) -> None:
        """Take the merge request out of draft: its title loses the draft prefix."""
        self._retitle(number, "mark !{iid} ready for review", ready_title)

    def mark_draft(self, number: int) -> None:
        """Put the merge request back into draft: its title gets ``Draft: `` again."""
        self._retitle(number, "put !{iid} back into draft", draft_title)

    # --- HostedForge -----------------------------------------------------------

    def issue(self, number: int) -> Issue:
        kind, iid = split(number)
        with self._errors(f"read {ref(number)}"):
            data = self._noteable(kind, iid, lazy=False).attributes
        return issue_of(data, number, kind == "merge_requests")

    def labeled_issues(self, label: str) -> builtins.list[Issue]:
        """The open issues carrying ``label``, oldest first (GitLab starts no job when an
        issue is labeled: a scheduled pipeline asks)."""
        with self._errors(f"list the issues labeled {label}"):
            found = self.project.issues.list(
                labels=[label], state="opened", order_by="created_at", sort="asc", get_all=True
            )
        return [issue_of(i.attributes, int(i.attributes["iid"]), False) for i in found]

    def access(self, login: str) -> Access:
        """``login``'s access level, inherited membership included; not a member (a 404),
        or no such user, is ``none``."""
        from agentrun.forge.gitlab_http import status_of

        user_id = self.users.id_of(login)
        if user_id is None:
            return Access.NONE
        try:
            with self._errors(f"read the access of {login}"):
                member = self.project.members_all.get(user_id)
        except ForgeError as exc:
            if status_of(exc) == 404:
                return Access.NONE
            raise
        if str(member.attributes.get("state") or "active") != "active":
            return Access.NONE  # a blocked account, or one awaiting approval
        level = int(member.attributes.get("access_level") or 0)
        return access_of(level)

    def set_labels(self, number: int, add: Sequence[str], remove: Sequence[str]) -> None:
        """One edit: GitLab adds and removes in it, and removing an absent label is no error."""
        if not add and not remove:
            return
        kind, iid = split(number)
        data: dict[str, Any] = {}
        if add:
            data["add_labels"] = [*add]
        if remove:
            data["remove_labels"] = [*remove]
        manager = self.project.mergerequests if kind == "merge_requests" else self.project.issues
        with self._errors(f"label {ref(number)}"):
            manager.update(iid, data)

    def set_commit_status(
        self, sha: str, context: str, state: CommitState, description: str, url: str | None
    ) -> None:
        """A commit status named ``context`` (``agentrun/<step>``) on ``sha``."""
        from agentrun.forge.gitlab_http import message_of, status_of

        data: dict[str, Any] = {
            "state": STATE[state],
            "name": context,
            "description": description[:255],
        }
        if url:
            data["target_url"] = url
        commit = self.project.commits.get(sha, lazy=True)
        try:
            with self._errors(f"set status {context} on {sha[:10]}"):
                commit.statuses.create(data)
        except ForgeError as exc:
            # GitLab refuses to move a status to the state it is in: it is there already.
            if status_of(exc) != 400 or "Cannot transition status" not in message_of(exc):
                raise

    def request_review(self, number: int, login: str) -> None:
        iid = self._iid(number, "request a review of")
        user_id = self.users.id_of(login)
        if user_id is None:
            raise ForgeError(f"gitlab: cannot ask {login} to review !{iid}: no such user")
        with self._errors(f"request a review of !{iid} from {login}"):
            mr = self.project.mergerequests.get(iid)
            reviewers = [int(r["id"]) for r in mr.attributes.get("reviewers") or ()]
            if user_id not in reviewers:
                self.project.mergerequests.update(iid, {"reviewer_ids": [*reviewers, user_id]})

    def react(self, comment_id: int, content: str) -> None:
        """Award an emoji to a note read or written by this process."""
        from agentrun.forge.gitlab_http import message_of

        with _noteables_lock:
            where = _noteables.get((self.api_url, self.path, comment_id))
        if where is None:
            raise ForgeError(
                f"gitlab: cannot react to note {comment_id}: not read here, and GitLab "
                "finds a note only through its issue or merge request"
            )
        kind, iid = where
        parent = self.gl.projects.get(self._numeric_id(), lazy=True)
        noteable = getattr(parent, "issues" if kind == "issues" else "mergerequests")
        note = noteable.get(iid, lazy=True).notes.get(comment_id, lazy=True)
        try:
            with self._errors(f"react to note {comment_id}"):
                note.awardemojis.create({"name": EMOJI.get(content, content)})
        except ForgeError as exc:
            if "has already been taken" not in message_of(exc):
                raise  # else awarded before: done

    def reviews_since(self, number: int, after_id: int) -> builtins.list[Review]:
        """A "request changes" verdict and the notes of unresolved diff threads newer
        than ``after_id``, one ``changes_requested`` review per author (``gitlab_read``)."""
        iid = self._iid(number, "read the reviews of")
        mr = self.project.mergerequests.get(iid, lazy=True)
        with self._errors(f"read the reviews of !{iid}"):
            # GitLab's description of this endpoint takes no page: one answer, every reviewer.
            path = f"/projects/{self.project.encoded_id}/merge_requests/{iid}/reviewers"
            listed: Any = self.gl.http_get(path)
            reviewers = (
                [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []
            )
            threads = [d.attributes for d in mr.discussions.list(get_all=True)]
        return reviews_of(reviewers, threads, after_id)

    def checks(self, sha: str) -> builtins.list[Check]:
        """The jobs of every pipeline on ``sha`` and its external commit statuses, the
        newest of each name, as the gate reads them (``gitlab_checks``); a failed job
        with its ``failure_reason`` and the tail of its trace."""
        from agentrun.forge.gitlab_checks import read_checks

        def by_id() -> Any:  # the trace endpoint takes the project's numeric id only
            return self.gl.projects.get(self._numeric_id(), lazy=True)

        with self._errors(f"read the checks of {sha[:10]}"):
            return read_checks(self.project, by_id, sha, os.environ.get("CI_JOB_NAME", ""))

    # --- helpers -------------------------------------------------------------

    def _noteable(self, kind: str, iid: int, lazy: bool = True) -> Any:
        manager = self.project.mergerequests if kind == "merge_requests" else self.project.issues
        return manager.get(iid, lazy=lazy)

    def _notes(self, kind: str, iid: int) -> builtins.list[dict[str, Any]]:
        """The issue's or merge request's notes, system notes left out, oldest first."""
        listed = self._noteable(kind, iid).notes.list(
            get_all=True, sort="asc", order_by="created_at"
        )
        found = [n.attributes for n in listed if not n.attributes.get("system")]
        for note in found:
            self._remember(int(note["id"]), kind, iid)
        return found

    def _remember(self, note_id: int, kind: str, iid: int) -> None:
        with _noteables_lock:
            _noteables[(self.api_url, self.path, note_id)] = (kind, iid)

    def _retitle(self, number: int, what: str, change: Any) -> None:
        iid = self._iid(number, "retitle")
        with self._errors(what.format(iid=iid)):
            title = str(self.project.mergerequests.get(iid).attributes.get("title") or "")
            if change(title) != title:
                self.project.mergerequests.update(iid, {"title": change(title)})

    def _iid(self, number: int, verb: str) -> int:
        kind, iid = split(number)
        if kind != "merge_requests":
            raise ForgeError(
                f"gitlab: cannot {verb} #{number}: it is an issue, not a merge request"
            )
        return iid

    def is_bot(self, login: str) -> bool:
        """A project's, group's or service account's bot user (GitLab's ``bot`` flag)."""
        return self.users.is_bot(login)

    def _numeric_id(self) -> int:
        """The project's numeric id (the award emoji endpoints take no path)."""
        if self._project_id is None:
            with self._errors(f"read the project {self.path}"):
                self._project_id = int(self.gl.projects.get(self.path).id)
        return self._project_id

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        from agentrun.forge.gitlab_http import failures

        with failures(what, self.path, self.api_url, self.token):
            yield


register("gitlab", GitLabForge)
