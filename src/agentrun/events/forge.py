"""Payloads of publication and the forge: proposals, reviews read back, base moves, reconcile."""

from __future__ import annotations

from typing import Literal

from agentrun.events.base import PayloadModel


class ProposalOpened(PayloadModel, summary="{forge} #{number} {url}"):
    type: Literal["proposal.opened"] = "proposal.opened"
    forge: str
    number: int
    url: str
    head: str


class ProposalReady(PayloadModel, summary="#{number} ready for review"):
    type: Literal["proposal.ready"] = "proposal.ready"
    number: int


class ProposalClosed(PayloadModel):
    type: Literal["proposal.closed"] = "proposal.closed"
    number: int
    merged: bool

    def summary(self) -> str:
        return f"#{self.number} {'merged' if self.merged else 'closed'}"


class PublicationPushed(PayloadModel, summary="{branch} at {sha:.10}"):
    type: Literal["publication.pushed"] = "publication.pushed"
    branch: str
    sha: str


class ObservationRecorded(PayloadModel, summary="{phase}: {text}"):
    type: Literal["observation.recorded"] = "observation.recorded"
    phase: str
    text: str


class FeedbackReceived(PayloadModel, summary="review {review} on #{number} by {author}"):
    """Review feedback from a forge (changes requested): the next implement round's input."""

    type: Literal["feedback.received"] = "feedback.received"
    forge: str
    number: int
    review: int
    author: str
    text: str


class ForgeCursor(
    PayloadModel, summary="{forge}: comments up to {comment}, reviews up to {review}"
):
    """The last forge comment (and review) this build has processed."""

    type: Literal["forge.cursor"] = "forge.cursor"
    forge: str
    comment: int = 0
    review: int = 0


class BaseMoved(PayloadModel):
    """The base branch moved and the build branch no longer merges cleanly into it."""

    type: Literal["base.moved"] = "base.moved"
    base_sha: str
    conflicts: tuple[str, ...] = ()

    def summary(self) -> str:
        return f"base at {self.base_sha[:10]}, {len(self.conflicts)} conflicting path(s)"


class ReconcileStarted(PayloadModel, summary="round {round}: merging {base_sha:.10}"):
    type: Literal["reconcile.started"] = "reconcile.started"
    round: int
    base_sha: str


class ReconcileCompleted(
    PayloadModel, summary="round {round}: merged {base_sha:.10} at {head:.10}"
):
    type: Literal["reconcile.completed"] = "reconcile.completed"
    round: int
    base_sha: str
    head: str
