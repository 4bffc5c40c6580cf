"""Publication is kernel work: only the runner opens, updates and readies proposals.

On the local forge one status comment per proposal is edited in place and the
proposal's body mirrors it. On a hosted forge (github) the build shows where people
are (DESIGN §12):

- one status comment per build on the issue that started it (on the proposal for a
  build started elsewhere), kept current from the first phase on;
- the proposal's body: goal, plan summary, verification table, ``Closes #N``;
- each escalation once, as a comment of its own with the reply syntax, on the proposal
  when there is one, else on the issue;
- a commit status per verify step on the head, and labels that show the state;
- a failed build's branch is pushed anyway, and the status comment says so.

Everything posted is scrubbed of secrets first. What was last sent is kept in memory, so
unchanged text is never sent twice. A forge failure while syncing is recorded once as an
observation and the build goes on; the publication operations themselves raise.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import pygit2

from agentrun import secrets
from agentrun.errors import ConfigError, ForgeError
from agentrun.events import (
    ObservationRecorded,
    VerifyCompleted,
)
from agentrun.forge import Forge, open_forge
from agentrun.forge.base import HostedForge, check_gate_forge, forge_kind
from agentrun.kernel import approval
from agentrun.kernel.draft import Draft
from agentrun.kernel.runner import published
from agentrun.kernel.state import BuildState, Escalation, Proposal
from agentrun.runner.build import BuildHandle
from agentrun.runner.status_text import (
    CHECK,
    PLAN_LINES,
    QUESTION_MARK,
    TEXT_LIMIT,
    clip,
    hosted_reply,
    render_body,
    render_hosted_body,
    render_hosted_status,
    render_status,
    state_label,
)


def _run_url() -> str | None:
    """The Actions run this job is, when it is one."""
    server, repo, run = (
        os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None


class Publisher:
    def __init__(
        self,
        repo: pygit2.Repository,
        build: BuildHandle,
        stop_at: float | None = None,
        quiet: bool = False,
    ) -> None:
        """``quiet``: never mirror the state (a task's runner: the build's does it)."""
        self.repo = repo
        self.build = build
        self.stop_at = stop_at  # the forge's retries end before it
        self.quiet = quiet
        self._forge: Forge | None = None
        self._synced_seq = -1
        self._sent: dict[tuple[str, int], str] = {}  # (what, number) -> the text last sent
        self._labels: dict[int, str | None] = {}  # number -> the state label it carries
        self._statuses: set[tuple[str, str, str]] = set()  # (sha, step, outcome) sent
        self._asked: set[tuple[int, str]] = set()  # (number, escalation id) posted
        self._plan: tuple[str, str] | None = None  # (artifact, summary)
        self._noted: set[str] = set()
        self._seen_tip: str | None = None  # the log tip up to which failures were read

    @property
    def forge(self) -> Forge:
        if self._forge is None:
            config = self.build.state.config
            check_gate_forge(forge_kind(self.repo, config.forge.kind), config.forge.require_checks)
            self._forge = open_forge(self.repo, config.forge.kind, self.stop_at)
        return self._forge

    def publish(self, operation: str) -> None:
        state = self.build.state
        forge = self.forge
        if operation == "open-draft":
            forge.push_branch(state.branch, state.head)
            found = forge.find_open(state.branch)
            if found is None:
                title = clip(secrets.scrub(state.goal.strip().splitlines()[0]), 100)
                body = self._body(state)
                found = forge.open_draft(title, body, state.branch, state.base_ref, state.slug)
                self._sent[("body", found.number)] = body
                self._labels[found.number] = None  # a new proposal has no labels yet
            opened = published(state, operation, forge.name, found.number, found.url)
            self.build.append([opened], fact=False)
        elif operation == "push":
            forge.push_branch(state.branch, state.head)
            self.build.append([published(state, operation)], fact=False)
        elif operation == "mark-ready":
            assert state.proposal is not None
            number = state.proposal.number
            forge.mark_ready(number)
            self.build.append([published(state, operation)], fact=False)
            if isinstance(forge, HostedForge) and state.requested_by:
                login = state.requested_by
                self._try(lambda: forge.request_review(number, login))

    def sync_status(self) -> None:
        """Mirror the state onto the forge, when it changed since the last sync."""
        state = self.build.state
        if self.quiet or state.seq == self._synced_seq:
            return
        proposal = state.proposal if state.proposal and not state.proposal.closed else None
        if proposal is None and forge_kind(self.repo, state.config.forge.kind) == "local":
            self._synced_seq = state.seq  # nothing to show yet
            return
        try:
            forge = self.forge
        except (ForgeError, ConfigError) as exc:
            self._note(f"cannot reach the forge: {exc}")
            return
        if isinstance(forge, HostedForge):
            ok = self._sync_hosted(forge, state, proposal)
        else:
            ok = proposal is None or self._sync_local(forge, state, proposal.number)
        if ok:
            self._synced_seq = self.build.state.seq

    # --- the local forge ---------------------------------------------------------

    def _sync_local(self, forge: Forge, state: BuildState, number: int) -> bool:
        return all(
            (
                self._try(lambda: self._send_body(forge, number, render_body(state))),
                self._try(lambda: self._send_status(forge, number, render_status(state))),
                self._try(lambda: self._post_local_questions(forge, state, number)),
            )
        )

    def _post_local_questions(self, forge: Forge, state: BuildState, number: int) -> None:
        """Each open escalation also gets a comment of its own, once."""
        pending = [e for e in state.open_escalations if (number, e.id) not in self._asked]
        if not pending:
            return
        posted = " ".join(c.body for c in forge.comments_since(number, 0))
        for esc in pending:
            marker = f"**Question {esc.id}**"
            if marker not in posted:
                forge.comment(
                    number,
                    secrets.scrub(
                        f"{marker} ({esc.phase}@{esc.round}): {esc.question}"
                        + _reply(
                            esc,
                            f'Reply with `git agentrun answer {state.slug} "…" '
                            f"--escalation {esc.id}`.",
                        )
                    ),
                )
            self._asked.add((number, esc.id))

    # --- a hosted forge ------------------------------------------------------------

    def _sync_hosted(
        self, forge: HostedForge, state: BuildState, proposal: Proposal | None
    ) -> bool:
        issue = state.issue_number
        ok = self._try(lambda: self._push_failed(forge, state))
        state = self.build.state
        home = issue if issue is not None else proposal.number if proposal else None
        steps: list[Callable[[], None]] = []
        if home is not None:
            text = render_hosted_status(state, _run_url())
            steps.append(lambda: self._send_status(forge, home, text))
        if proposal is not None:
            body = self._body(state)
            number = proposal.number
            steps.append(lambda: self._send_body(forge, number, body))
            steps.append(lambda: self._commit_statuses(forge, state, proposal))
        ask_on = proposal.number if proposal is not None else issue
        if ask_on is not None:
            steps.append(lambda: self._post_questions(forge, state, ask_on))
        want = state_label(state)
        targets = [n for n in (issue, proposal.number if proposal else None) if n is not None]
        for target in dict.fromkeys(targets):
            steps.append(functools.partial(self._label, forge, target, state, want))
        for step in steps:
            ok = self._try(step) and ok
        return ok

    def _push_failed(self, forge: HostedForge, state: BuildState) -> None:
        """A failed build's work is pushed anyway, for a person to pick up."""
        if state.status != "failed" or state.head in ("", state.base_sha):
            return
        if state.published_head == state.head:
            return
        forge.push_branch(state.branch, state.head)
        self.build.append([published(state, "push")])

    def _post_questions(self, forge: HostedForge, state: BuildState, number: int) -> None:
        """Each open escalation once, as its own comment with the reply syntax."""
        pending = [e for e in state.open_escalations if (number, e.id) not in self._asked]
        if not pending:
            return
        posted = "\n".join(c.body for c in forge.comments_since(number, 0))
        for esc in pending:
            marker = QUESTION_MARK.format(slug=state.slug, id=esc.id)
            if marker not in posted:
                text = (
                    f"{marker}\n**Question {esc.id}** from build `{state.slug}` "
                    f"({esc.phase}@{esc.round}):\n\n{esc.question}"
                    + _reply(esc, hosted_reply(esc))
                    + "\n"
                )
                forge.comment(number, secrets.scrub(text))
            self._asked.add((number, esc.id))

    def _commit_statuses(self, forge: HostedForge, state: BuildState, proposal: Proposal) -> None:
        """A commit status per verify step: failures at once, then all on the final head.

        Every phase, verify steps included, ends with a commit, and a pull request shows
        the statuses of its head only; so the green statuses go on the head the build
        ends with. A failure starts the next round at once (the state forgets it), so it
        is read from the new events and set on the head the checks ran on.
        """
        for failed in self._new_failures():
            sha = state.published_head
            if sha is None or (sha, failed.step, "fail") in self._statuses:
                continue
            text = f"failed in round {failed.round}: {failed.reason}"
            forge.set_commit_status(
                sha, f"agentrun/{failed.step}", "failure", secrets.scrub(text), proposal.url
            )
            self._statuses.add((sha, failed.step, "fail"))
        if state.stage != "done" or state.published_head != state.head:
            return
        for step in state.config.verify:
            result = state.verify_results.get(step.name)
            if result is None or (state.head, step.name, result.outcome) in self._statuses:
                continue
            text = CHECK[result.outcome] + (f": {result.reason}" if result.reason else "")
            forge.set_commit_status(
                state.head, f"agentrun/{step.name}", "success", secrets.scrub(text), proposal.url
            )
            self._statuses.add((state.head, step.name, result.outcome))

    def _new_failures(self) -> list[VerifyCompleted]:
        """Verify failures appended since the last look (none on the first: old news)."""
        tip, seen = self.build.tip, self._seen_tip
        self._seen_tip = tip
        if seen is None or tip is None or tip == seen:
            return []
        return [
            stored.event.payload
            for stored in self.build.log.walk(tip, stop=seen)
            if isinstance(stored.event.payload, VerifyCompleted)
            and stored.event.payload.outcome == "fail"
        ]

    def _label(self, forge: HostedForge, number: int, state: BuildState, want: str | None) -> None:
        """Give ``number`` the state label ``want``, removing the other state labels."""
        if number in self._labels and self._labels[number] == want:
            return
        labels = state.config.forge.labels
        ours = {labels.running, labels.parked, labels.done, labels.failed}
        known = self._labels.get(number)
        if number in self._labels:
            have = {known} if known is not None else set()
        else:
            have = set(forge.issue(number).labels) & ours
        add = [want] if want is not None and want not in have else []
        remove = sorted(label for label in have if label != want)
        if add or remove:
            forge.set_labels(number, add, remove)
        self._labels[number] = want

    # --- shared ---------------------------------------------------------------------

    def _body(self, state: BuildState) -> str:
        if isinstance(self.forge, HostedForge):
            text = render_hosted_body(state, self._plan_summary(state), state.issue_number)
        else:
            text = render_body(state)
        return secrets.scrub(text)

    def _plan_summary(self, state: BuildState) -> str | None:
        if state.plan is None:
            return None
        if self._plan is None or self._plan[0] != state.plan:
            text = self.build.log.text(self.build.tip, state.plan) or ""
            lines = [line for line in text.strip().splitlines() if line.strip()]
            summary = "\n".join(lines[:PLAN_LINES])
            if len(lines) > PLAN_LINES:
                summary += f"\n\n… and {len(lines) - PLAN_LINES} more lines"
            self._plan = (state.plan, clip(summary, TEXT_LIMIT))
        return self._plan[1]

    def _send_body(self, forge: Forge, number: int, body: str) -> None:
        body = secrets.scrub(body)
        if self._sent.get(("body", number)) != body:
            forge.update_body(number, body)
            self._sent[("body", number)] = body

    def _send_status(self, forge: Forge, number: int, text: str) -> None:
        text = secrets.scrub(text)
        if self._sent.get(("status", number)) != text:
            forge.upsert_status_comment(number, text)
            self._sent[("status", number)] = text

    def _try(self, step: Callable[[], None]) -> bool:
        """Run one forge step; a failure is noted, never fatal to the build."""
        try:
            step()
        except ForgeError as exc:
            self._note(str(exc))
            return False
        return True

    def _note(self, text: str) -> None:
        """Record a forge failure as an observation, once per distinct message."""
        if text in self._noted:
            return
        self._noted.add(text)
        observed = ObservationRecorded(phase="publish", text=clip(secrets.scrub(text), 500))
        self.build.append([Draft(observed)])


def _reply(esc: Escalation, how: str) -> str:
    """The reply syntax after a posted question (the plan's question says it itself)."""
    return "" if esc.cause == approval.CAUSE else f"\n\n{how}"
