"""Steering a build from its forge: ``/agentrun …`` comments and changes-requested reviews.

Every comment and review since the build's ``forge.cursor`` is read, not only the one
that started the job (a forge may cancel queued jobs, as GitHub does within a
concurrency group). Commands are accepted only from people with ``forge.base.STEER``
access or above, asked of the forge; bots only when the config lists them. Every
refusal is answered with a short comment, every accepted command acknowledged with a
reaction. Text that reaches an agent is sanitised.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import pygit2

from agentrun import secrets
from agentrun.errors import AgentrunError
from agentrun.events import FeedbackReceived, ForgeCursor
from agentrun.forge.base import STEER, Access, Comment, HostedForge
from agentrun.hosted.commands import Command, Refusal, parse
from agentrun.hosted.site import Site
from agentrun.kernel import requests
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.sanitize import sanitize
from agentrun.secrets import scrub
from agentrun.store.append import append_decided
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

MARK = "<!-- agentrun -->"  # on every comment agentrun posts, so it never reads its own
OWN = "<!-- agentrun"  # the start of MARK and of the forge's markers (status, questions)
READERS = 8  # forge reads in flight at once when many builds are steered
NAME_IT = "write `/agentrun answer ID TEXT`"  # how a comment names one of several questions


class Steering:
    """Reads a forge for builds' comments and reviews and appends what they ask."""

    def __init__(
        self,
        repo: pygit2.Repository,
        site: Site,
        open_forge: Callable[[], HostedForge],
        allow_bots: Callable[[], Sequence[str]],
        say: Callable[[str], object],
        remote: str | None = None,
    ) -> None:
        """``remote``: where the base branch is read for ``/agentrun reconcile``."""
        self.repo, self.site = repo, site
        self.remote = remote
        self._open_forge, self._allow_bots, self._say = open_forge, allow_bots, say
        self.log, self.cache = EventLog(repo), StateCache(repo)
        self._forge: HostedForge | None = None
        self._access: dict[str, Access] = {}
        self._bots: set[str] = set()  # logins the event marks as bots
        self._read: dict[tuple[str, int, int], list[Any]] = {}  # filled by ``prefetch``

    @property
    def forge(self) -> HostedForge:
        if self._forge is None:
            self._forge = self._open_forge()
        return self._forge

    def steer(self, state: BuildState) -> bool:
        """Act on every comment and review since the build's cursor, then advance it.
        True when anything was appended to the build's log."""
        # A comment or review may quote a secret value: scrubbed before it is appended.
        secrets.remember_config(state.config, os.environ)
        before = self.log.tip_oid(state.slug)
        numbers = [n for n in (state.issue_number, self.proposal(state)) if n]
        seen: dict[int, tuple[int, Comment]] = {}
        for number in numbers:
            for comment in self._since("comments", number, state.forge_comment):
                seen.setdefault(comment.id, (number, comment))
        last_comment = state.forge_comment
        for comment_id in sorted(seen):
            number, comment = seen[comment_id]
            last_comment = max(last_comment, comment_id)
            self._comment(state.slug, number, comment)
        last_review = state.forge_review
        pr = self.proposal(state)
        if pr is not None:
            for review in self._since("reviews", pr, state.forge_review):
                last_review = max(last_review, review.id)
                if review.state.lower() != "changes_requested":
                    continue
                if (why := self._refusal(review.author)) is not None:
                    self._reply(pr, review.author, f"your review was not taken: {why}")
                    continue
                text = sanitize("\n\n".join([review.body, *review.comments]).strip())
                feedback = FeedbackReceived(
                    forge=self.site.kind,
                    number=pr,
                    review=review.id,
                    author=review.author,
                    text=text,
                )
                self._request(state.slug, review.author, _always(feedback))
                self._say(f"review {review.id} by {review.author}: feedback for the next round")
        if last_comment > state.forge_comment or last_review > state.forge_review:
            cursor = ForgeCursor(forge=self.site.kind, comment=last_comment, review=last_review)
            self._append(state.slug, cursor)
        return self.log.tip_oid(state.slug) != before

    def _since(self, kind: str, number: int, after: int) -> list[Any]:
        found = self._read.pop((kind, number, after), None)
        if found is not None:
            return found
        if kind == "comments":
            return list(self.forge.comments_since(number, after))
        return list(self.forge.reviews_since(number, after))

    def prefetch(self, states: list[BuildState]) -> None:
        """Read the comments and reviews of many builds at once, ``READERS`` requests in
        flight (a sweep over many parked builds waits on the forge, not on itself)."""
        from concurrent.futures import ThreadPoolExecutor
        from queue import SimpleQueue

        wanted: list[tuple[str, int, int]] = []
        for state in states:
            if state.issue_number:
                wanted.append(("comments", state.issue_number, state.forge_comment))
            if (pr := self.proposal(state)) is not None:
                wanted += [
                    ("comments", pr, state.forge_comment),
                    ("reviews", pr, state.forge_review),
                ]
        if len(wanted) < 2:
            return
        # One client per thread: PyGithub's keeps one connection and is not thread-safe.
        forges: SimpleQueue[HostedForge] = SimpleQueue()
        for _ in range(min(READERS, len(wanted))):
            forges.put(self._open_forge())

        def read(item: tuple[str, int, int]) -> list[Any]:
            kind, number, after = item
            forge = forges.get()
            try:
                if kind == "comments":
                    return list(forge.comments_since(number, after))
                return list(forge.reviews_since(number, after))
            finally:
                forges.put(forge)

        with ThreadPoolExecutor(READERS) as pool:
            self._read = dict(zip(wanted, pool.map(read, wanted), strict=True))

    def _comment(self, slug: str, number: int, comment: Comment) -> None:
        if OWN in comment.body or comment.author == self.site.bot:
            return  # agentrun's own words
        found = parse(comment.body)
        if not found:
            return
        if (why := self._refusal(comment.author)) is not None:
            self._reply(number, comment.author, f"this command was not run: {why}")
            self._say(f"comment {comment.id} by {comment.author} refused: {why}")
            return
        accepted = False
        for item in found:
            if isinstance(item, Refusal):
                self._reply(number, comment.author, item.message)
                continue
            try:
                said = self._apply(slug, number, item, comment.author)
            except AgentrunError as exc:
                self._reply(number, comment.author, str(exc))
                self._say(f"comment {comment.id}: {exc}")
                continue
            accepted = True
            self._say(f"comment {comment.id} by {comment.author}: {said}")
        if accepted:
            self.forge.react(comment.id, "+1")

    def _apply(self, slug: str, number: int, command: Command, login: str) -> str:
        from agentrun.commands.control import answer

        if command.verb == "answer":
            text = sanitize(command.text)
            esc, _ = answer(self.repo, slug, text, command.escalation, login, NAME_IT)
            return f"answered {esc}"
        if command.verb == "approve":
            from agentrun.commands.control import approve

            esc, _ = approve(self.repo, slug, login)
            return f"plan approved ({esc})"
        if command.verb == "reconcile":
            from agentrun.commands.reconcile import request_reconcile

            done = request_reconcile(self.repo, slug, login, self.remote, self.forge)
            if done.note:
                self._say(f"build {slug}: {done.note}")
            return f"reconcile requested (base at {done.base[:10]})"
        if command.verb == "remember":
            from agentrun.store.facts import accept

            assert command.fact is not None
            fact, changed = accept(self.repo, command.fact, login)
            return f"fact {fact.id} {'accepted' if changed else 'was already accepted'}"
        if command.verb == "status":
            from agentrun.runner.status_text import render_hosted_status

            state = load_state(self.log, self.cache, slug)[1]
            # Without the status comment's marker line, which would make this reply the
            # comment the publisher edits in place.
            text = render_hosted_status(state).split("\n", 1)[1]
            self.forge.comment(number, scrub(f"@{login}\n{text}\n{MARK}"))
            return "status posted"
        make = {
            "pause": requests.pause,
            "resume": requests.resume,
            "abort": requests.abort,
            "retry": requests.retry,
        }[command.verb]
        self._request(slug, login, make)
        return f"{command.verb} requested"

    def _refusal(self, login: str) -> str | None:
        """Why ``login`` may not steer builds (None: they may)."""
        if self._is_bot(login):
            if login in self._allow_bots():
                return None
            return f"{login} is a bot, and bots are not listed in [forge] allow_bots"
        access = self._access.get(login)
        if access is None:
            access = self._access[login] = self.forge.access(login)
        if access < STEER:
            return f"{login} has {access} permission here; {STEER} or above is needed"
        return None

    def proposal(self, state: BuildState) -> int | None:
        """The number of the build's proposal on this forge, if it has one here."""
        proposal = state.proposal
        return (
            proposal.number if proposal is not None and proposal.forge == self.site.kind else None
        )

    def _is_bot(self, login: str) -> bool:
        return login in self._bots or self.forge.is_bot(login)

    def note_bot(self, login: str) -> None:
        """The event says ``login`` is a bot's, beyond the ``[bot]`` suffix: remember it."""
        self._bots.add(login)

    def _reply(self, number: int, login: str, text: str) -> None:
        self.forge.comment(number, scrub(f"@{login} {text}\n\n{MARK}"))

    def _request(self, slug: str, login: str, make: Callable[[BuildState], object | None]) -> None:
        from agentrun.commands.control import request

        request(self.repo, slug, make, login)

    def _append(self, slug: str, payload: object) -> None:
        """Append a kernel fact (the cursor) on the current tip, re-reading on a lost race."""
        append_decided(
            self.log,
            slug,
            lambda state: [Draft(payload)],
            cache=self.cache,
            what=f"the forge cursor of {slug}",
        )


def _always(payload: object) -> Callable[[BuildState], object]:
    return lambda state: payload
