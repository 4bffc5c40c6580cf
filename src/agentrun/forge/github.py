"""The github forge: pull requests, issues, labels and statuses through PyGithub (DESIGN §8).

Configured from the environment, as GitHub Actions sets it: the token (``credentials``:
``AGENTRUN_TOKEN_FD``, ``GITHUB_TOKEN``), ``GITHUB_API_URL`` (default
``https://api.github.com``; PyGithub finds GraphQL beside it) and ``GITHUB_REPOSITORY``
(``owner/name``; else read from the ``origin`` URL). Branches are pushed with the git CLI,
which gets the token from memory as ``http.<server>/.extraheader`` of that one push
(``gitcli``). The client, its retries and its throttle are ``github_http``'s.

Every failure, PyGithub's or the network's, becomes one ``ForgeError`` line.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

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
from agentrun.refs import BRANCH_PREFIX

if TYPE_CHECKING:
    from github.IssueComment import IssueComment
    from github.PullRequest import PullRequest

DEFAULT_API = "https://api.github.com"
# ``since`` reaches back this far before the cursor's comment was written: GitHub's
# clock has a resolution of a second, and the id filter drops what comes twice.
SINCE_MARGIN = timedelta(minutes=1)
# GitHub's role names on the forge-neutral scale; its older ``permission`` field uses
# four of them (maintain reads as write, triage as read).
ROLES: dict[str, Access] = {str(level): level for level in Access}
_ORIGIN = re.compile(r"github\.com[:/]+(?P<repo>[^/\s]+/[^/\s]+?)(?:\.git)?/?$")
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def repository_from(environ: dict[str, str] | os._Environ[str], origin: str | None) -> str:
    """``owner/name``: ``GITHUB_REPOSITORY``, else parsed from a github.com ``origin`` URL."""
    named = environ.get("GITHUB_REPOSITORY", "").strip()
    if named:
        if not _REPOSITORY.match(named):
            raise ForgeError(f"GITHUB_REPOSITORY={named!r}: expected owner/name")
        return named
    found = _ORIGIN.search(origin or "")
    if found is None:
        raise ForgeError(
            f"cannot tell the GitHub repository from origin {origin or '(none)'!r}: "
            "set GITHUB_REPOSITORY=owner/name"
        )
    return found.group("repo")


class GitHubForge:
    """Pull requests and issues of one GitHub repository."""

    name = "github"

    def __init__(self, repo: pygit2.Repository, stop_at: float | None = None) -> None:
        """``stop_at``: the job's ``time.monotonic()`` deadline, which no retry outlives."""
        from agentrun.forge import github_http

        self.repo = repo
        workflow = " (in a workflow: env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }})"
        token = forge_token("github", credentials.github_token(), "set GITHUB_TOKEN", workflow)
        self.api_url = (os.environ.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/")
        self.full_name = repository_from(os.environ, origin_url(repo))
        self.owner = self.full_name.split("/", 1)[0]
        self.gh = github_http.client(self.api_url, token, stop_at)
        self.gh_repo = self.gh.get_repo(self.full_name)
        self.repo_url = f"{self.api_url}/repos/{self.full_name}"
        self._status_ids: dict[tuple[int, str], int] = {}
        self._pulls: dict[int, PullRequest] = {}  # the pull requests read, with their node ids
        self._written: dict[int, datetime | None] = {}  # comment id -> when it was written

    # --- the Forge protocol ------------------------------------------------

    def push_branch(self, branch: str, sha: str) -> None:
        """Push ``sha`` to ``branch`` on origin; git refuses anything but a fast-forward."""
        push_to_origin(self.repo, branch, sha)

    def find_open(self, head: str) -> ProposalInfo | None:
        with self._errors(f"list open pull requests of {head}"):
            pulls = self.gh_repo.get_pulls(state="open", head=f"{self.owner}:{head}")
            for pull in pulls:
                if pull.head.ref == head:
                    return self._info(pull)
        return None

    def open_draft(
        self, title: str, body: str, head: str, base: str, build: str | None
    ) -> ProposalInfo:
        with self._errors(f"open a draft pull request of {head} into {base}"):
            pull = self.gh_repo.create_pull(base, head, title=title, body=body, draft=True)
            return self._info(pull)

    def get(self, number: int) -> ProposalInfo:
        with self._errors(f"read pull request #{number}"):
            return self._info(self.gh_repo.get_pull(number))

    def list(self) -> builtins.list[ProposalInfo]:
        with self._errors("list pull requests"):
            pulls = self.gh_repo.get_pulls(state="all", sort="created", direction="desc")
            return [self._info(pull) for pull in pulls]

    def update_body(self, number: int, body: str) -> None:
        with self._errors(f"update the description of #{number}"):
            self.gh_repo.get_pull(number).edit(body=body)

    def upsert_status_comment(self, number: int, body: str) -> Comment:
        """Edit the comment whose first line is ``body``'s marker line, or post it.

        A body that does not start with an ``<!-- agentrun:… -->`` marker gets
        ``STATUS_MARKER`` as its first line.
        """
        first, body = status_marked(body)
        key = (number, first)
        with self._errors(f"update the status comment on #{number}"):
            known = self._status_ids.get(key)
            if known is None:
                for old in self._pages(f"{self.repo_url}/issues/{number}/comments"):
                    if str(old.get("body") or "").split("\n", 1)[0] == first:
                        known = int(old["id"])
                        break
            if known is not None:
                comment = self._issue_comment(known)
                comment.edit(body)
            else:
                comment = self.gh_repo.get_issue(number).create_comment(body)
            self._status_ids[key] = comment.id
            return _comment(comment, body)

    def comment(self, number: int, body: str, author: str = "agentrun") -> Comment:
        """Post a comment; GitHub credits the token's owner, whatever ``author`` says."""
        with self._errors(f"comment on #{number}"):
            return _comment(self.gh_repo.get_issue(number).create_comment(body))

    def comments_since(self, number: int, after_id: int) -> builtins.list[Comment]:
        """Comments updated since the cursor's comment was written, newer than it.

        ``since`` is about update time: an older comment edited since comes too, and
        the id filter drops it (the cursor was past it already).
        """
        with self._errors(f"read the comments of #{number}"):
            since = self._written_at(after_id)
            issue = self.gh_repo.get_issue(number)
            listed = issue.get_comments(since=since) if since else issue.get_comments()
            found = [_comment(c) for c in listed]
        return sorted((c for c in found if c.id > after_id), key=lambda c: c.id)

    def mark_ready(self, number: int) -> None:
        """Take the pull request out of draft (a GraphQL mutation: REST cannot)."""
        with self._errors(f"mark #{number} ready for review"):
            self._pull(number).mark_ready_for_review()

    def mark_draft(self, number: int) -> None:
        """Put the pull request back into draft (a GraphQL mutation: REST cannot)."""
        with self._errors(f"put #{number} back into draft"):
            self._pull(number).convert_to_draft()

    # --- HostedForge -----------------------------------------------------------

    def issue(self, number: int) -> Issue:
        with self._errors(f"read issue #{number}"):
            found = self.gh_repo.get_issue(number)
            return Issue(
                number=found.number,
                title=found.title or "",
                body=found.body or "",
                author=found.user.login if found.user else "ghost",
                labels=tuple(label.name for label in found.labels),
                is_proposal=found.pull_request is not None,
            )

    def access(self, login: str) -> Access:
        """``login``'s role; a 404 (not a collaborator, no such user) is ``none``."""
        url = f"{self.repo_url}/collaborators/{quote(login, safe='')}/permission"
        try:
            with self._errors(f"read the permission of {login}"):
                _, data = self.gh.requester.requestJsonAndCheck("GET", url)
        except ForgeError as exc:
            if _status(exc) == 404:
                return Access.NONE
            raise
        role = ROLES.get(str(data.get("role_name")))
        # A custom role is named after itself: its base permission says what it may do.
        return role or ROLES.get(str(data.get("permission")), Access.NONE)

    def is_bot(self, login: str) -> bool:
        """GitHub names every App's account ``name[bot]``."""
        return login.endswith("[bot]")

    def set_labels(self, number: int, add: Sequence[str], remove: Sequence[str]) -> None:
        """Add, then remove; removing a label the issue does not have is not an error."""
        requester = self.gh.requester
        if add:
            with self._errors(f"label #{number}"):
                # PyGithub's add_to_labels sends a bare list; GitHub documents an object.
                requester.requestJsonAndCheck(
                    "POST", f"{self.repo_url}/issues/{number}/labels", input={"labels": [*add]}
                )
        for name in remove:
            url = f"{self.repo_url}/issues/{number}/labels/{quote(name, safe='')}"
            try:
                with self._errors(f"remove label {name!r} from #{number}"):
                    requester.requestJsonAndCheck("DELETE", url)
            except ForgeError as exc:
                if _status(exc) != 404:
                    raise

    def set_commit_status(
        self, sha: str, context: str, state: CommitState, description: str, url: str | None
    ) -> None:
        status: dict[str, Any] = {
            "state": state,
            "context": context,
            "description": description[:140],  # GitHub's limit
        }
        if url:
            status["target_url"] = url
        with self._errors(f"set status {context} on {sha[:10]}"):
            self.gh.requester.requestJsonAndCheck(
                "POST", f"{self.repo_url}/statuses/{sha}", input=status
            )

    def request_review(self, number: int, login: str) -> None:
        with self._errors(f"request a review of #{number} from {login}"):
            self.gh_repo.get_pull(number).create_review_request(reviewers=[login])

    def react(self, comment_id: int, content: str) -> None:
        # Not PyGithub's create_reaction: it still sends a long-gone preview media type.
        url = f"{self.repo_url}/issues/comments/{comment_id}/reactions"
        with self._errors(f"react to comment {comment_id}"):
            self.gh.requester.requestJsonAndCheck("POST", url, input={"content": content})

    def reviews_since(self, number: int, after_id: int) -> builtins.list[Review]:
        """Reviews newer than ``after_id``, each with its inline comments."""
        url = f"{self.repo_url}/pulls/{number}/reviews"
        with self._errors(f"read the reviews of #{number}"):
            found = []
            for review in sorted(self._pages(url), key=lambda r: int(r["id"])):
                if int(review["id"]) <= after_id:
                    continue
                inline = tuple(
                    f"{c.get('path')}:{c.get('line') or c.get('original_line') or 0}: "
                    f"{c.get('body') or ''}"
                    for c in self._pages(f"{url}/{review['id']}/comments")
                )
                found.append(
                    Review(
                        id=int(review["id"]),
                        author=_login(review.get("user")),
                        state=str(review.get("state") or "").lower(),
                        body=str(review.get("body") or ""),
                        comments=inline,
                    )
                )
            return found

    def checks(self, sha: str) -> builtins.list[Check]:
        from agentrun.forge.github_checks import checks

        with self._errors(f"read the checks on {sha[:10]}"):
            return checks(self.gh.requester, self.repo_url, sha)

    # --- helpers -------------------------------------------------------------

    def _pages(self, url: str) -> Iterator[dict[str, Any]]:
        """Every item of a list endpoint, following ``Link: rel="next"`` page by page.

        Plain dictionaries, not PyGithub's lazy objects, which fetch each item again
        whenever a field is absent from the list.
        """
        params: dict[str, Any] | None = {"per_page": self.gh.per_page}
        next_url: str | None = url
        while next_url is not None:
            headers, data = self.gh.requester.requestJsonAndCheck("GET", next_url, params)
            yield from data if isinstance(data, list) else []
            found = _NEXT.search(str(headers.get("link") or ""))
            next_url, params = (found.group(1), None) if found else (None, None)

    def _pull(self, number: int) -> PullRequest:
        """The pull request as last read (its node id known), else a lazy one."""
        known = self._pulls.get(number)
        return known if known is not None else self.gh_repo.get_pull(number)

    def _written_at(self, comment_id: int) -> datetime | None:
        """When comment ``comment_id`` was written, less ``SINCE_MARGIN``: every comment
        with a greater id was updated since. ``None`` for no comment or a deleted one."""
        from github import GithubException

        if comment_id <= 0:
            return None
        if comment_id not in self._written:
            try:
                created = self._issue_comment(comment_id).created_at
            except GithubException as exc:
                if exc.status != 404:
                    raise
                created = None
            self._written[comment_id] = created - SINCE_MARGIN if created else None
        return self._written[comment_id]

    def _issue_comment(self, comment_id: int) -> IssueComment:
        from github.IssueComment import IssueComment

        url = f"{self.repo_url}/issues/comments/{comment_id}"
        return IssueComment(self.gh.requester, url=url)

    def _info(self, pull: PullRequest) -> ProposalInfo:
        self._pulls[pull.number] = pull
        head = pull.head.ref
        state: Literal["open", "merged", "closed"] = (
            # merged_at, not merged: list items lack ``merged``, and reading it refetches.
            "open" if pull.state == "open" else "merged" if pull.merged_at else "closed"
        )
        return ProposalInfo(
            number=pull.number,
            title=pull.title or "",
            body=pull.body or "",
            head=head,
            base=pull.base.ref,
            state=state,
            draft=bool(pull.draft),
            url=pull.html_url,
            build=head[len(BRANCH_PREFIX) :] if head.startswith(BRANCH_PREFIX) else None,
            head_sha=pull.head.sha,
        )

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        from agentrun.forge.github_http import failures

        with failures(what, self.full_name, self.api_url):
            yield


def _comment(found: IssueComment, body: str | None = None) -> Comment:
    created = found.created_at
    return Comment(
        id=found.id,
        author=found.user.login if found.user else "ghost",
        body=body if body is not None else (found.body or ""),
        created_at=created,
        updated_at=found.updated_at or created,
    )


def _login(user: Any) -> str:
    return str(user.get("login") or "ghost") if isinstance(user, dict) else "ghost"


def _status(exc: ForgeError) -> int | None:
    """The HTTP status behind a ``ForgeError``, when GitHub answered."""
    cause = exc.__cause__
    status = getattr(cause, "status", None)
    return status if isinstance(status, int) else None


register("github", GitHubForge)
