"""Publication is kernel work: only the runner opens, updates and readies proposals.

One status comment per proposal is edited in place; the proposal's body mirrors it.
"""

from __future__ import annotations

import pygit2

from agentrun.events import ProposalOpened, ProposalReady, PublicationPushed
from agentrun.forge import Forge, open_forge
from agentrun.kernel.state import BuildState
from agentrun.runner.build import BuildHandle
from agentrun.store.log import Draft

CHECK = {"pass": "passed", "fail": "failed", "skipped": "skipped"}


def render_status(state: BuildState) -> str:
    """The status shown on a proposal: where the build is and what was checked."""
    lines = [
        f"**agentrun build `{state.slug}`** — {state.state_name}, at {state.phase_label}",
        "",
        f"Goal: {state.goal}",
        "",
        f"Base: `{state.base_ref}` ({state.base_sha[:10]}) · head: `{state.head[:10]}` · "
        f"implement rounds: {state.impl_round if state.implemented else 0}",
    ]
    if state.config.verify:
        lines += ["", "| verify step | result |", "| --- | --- |"]
        for step in state.config.verify:
            result = state.verify_results.get(step.name)
            lines.append(f"| {step.name} | {CHECK[result.outcome] if result else 'pending'} |")
    for esc in state.open_escalations:
        lines += [
            "",
            f"**Question {esc.id}** ({esc.phase}@{esc.round}): {esc.question}",
            f'Answer with `git agentrun answer {state.slug} "…"`.',
        ]
    if state.observations:
        lines += ["", "Follow-ups:"] + [f"- {o}" for o in state.observations]
    lines += ["", f"Sessions: {state.sessions} · {state.usage.describe()}"]
    if state.phase_usage:
        lines += ["", "| phase | usage |", "| --- | --- |"]
        lines += [f"| {phase} | {used.describe()} |" for phase, used in state.phase_usage.items()]
    if state.unpriced_models:
        lines.append(f"\nUnknown price (not in the total): {', '.join(state.unpriced_models)}")
    return "\n".join(lines) + "\n"


def render_body(state: BuildState) -> str:
    return f"{state.goal}\n\n---\n\n{render_status(state)}"


class Publisher:
    def __init__(self, repo: pygit2.Repository, build: BuildHandle) -> None:
        self.repo = repo
        self.build = build
        self._forge: Forge | None = None
        self._synced_seq = -1

    @property
    def forge(self) -> Forge:
        if self._forge is None:
            self._forge = open_forge(self.repo, self.build.state.config.forge.kind)
        return self._forge

    def publish(self, operation: str) -> None:
        state = self.build.state
        forge = self.forge
        if operation == "open-draft":
            forge.push_branch(state.branch, state.head)
            found = forge.find_open(state.branch)
            if found is None:
                title = state.goal.strip().splitlines()[0][:100]
                found = forge.open_draft(
                    title, render_body(state), state.branch, state.base_ref, state.slug
                )
            opened = ProposalOpened(
                forge=forge.name, number=found.number, url=found.url, head=state.head
            )
            self.build.append([Draft(opened)], fact=False)
        elif operation == "push":
            forge.push_branch(state.branch, state.head)
            pushed = PublicationPushed(branch=state.branch, sha=state.head)
            self.build.append([Draft(pushed)], fact=False)
        elif operation == "mark-ready":
            assert state.proposal is not None
            forge.mark_ready(state.proposal.number)
            self.build.append([Draft(ProposalReady(number=state.proposal.number))], fact=False)

    def sync_status(self) -> None:
        """Mirror the state into the proposal's body and status comment, when it changed."""
        state = self.build.state
        if state.proposal is None or state.proposal.closed or state.seq == self._synced_seq:
            return
        number = state.proposal.number
        self.forge.update_body(number, render_body(state))
        self.forge.upsert_status_comment(number, render_status(state))
        self._post_questions(state, number)
        self._synced_seq = state.seq

    def _post_questions(self, state: BuildState, number: int) -> None:
        """Each open escalation also gets a comment of its own, once."""
        if not state.open_escalations:
            return
        posted = " ".join(c.body for c in self.forge.comments_since(number, 0))
        for esc in state.open_escalations:
            marker = f"**Question {esc.id}**"
            if marker in posted:
                continue
            self.forge.comment(
                number,
                f"{marker} ({esc.phase}@{esc.round}): {esc.question}\n\n"
                f'Reply with `git agentrun answer {state.slug} "…" --escalation {esc.id}`.',
            )
