"""Payloads of publication and the forge: proposals, reviews read back, base moves, reconcile."""

from __future__ import annotations

from typing import Literal

from agentrun.events.base import (
    Frozen,
)


class ProposalOpened(Frozen):
    type: Literal["proposal.opened"] = "proposal.opened"
    forge: str
    number: int
    url: str
    head: str

    def summary(self) -> str:
        return f"{self.forge} #{self.number} {self.url}"


class ProposalReady(Frozen):
    type: Literal["proposal.ready"] = "proposal.ready"
    number: int

    def summary(self) -> str:
        return f"#{self.number} ready for review"


class ProposalClosed(Frozen):
    type: Literal["proposal.closed"] = "proposal.closed"
    number: int
    merged: bool

    def summary(self) -> str:
        return f"#{self.number} {'merged' if self.merged else 'closed'}"


class PublicationPushed(Frozen):
    type: Literal["publication.pushed"] = "publication.pushed"
    branch: str
    sha: str

    def summary(self) -> str:
        return f"{self.branch} at {self.sha[:10]}"


class ObservationRecorded(Frozen):
    type: Literal["observation.recorded"] = "observation.recorded"
    phase: str
    text: str

    def summary(self) -> str:
        return f"{self.phase}: {self.text}"


class FeedbackReceived(Frozen):
    """Review feedback from a forge (changes requested): the next implement round's input."""

    type: Literal["feedback.received"] = "feedback.received"
    forge: str
    number: int
    review: int
    author: str
    text: str

    def summary(self) -> str:
        return f"review {self.review} on #{self.number} by {self.author}"


class ForgeCursor(Frozen):
    """The last forge comment (and review) this build has processed."""

    type: Literal["forge.cursor"] = "forge.cursor"
    forge: str
    comment: int = 0
    review: int = 0

    def summary(self) -> str:
        return f"{self.forge}: comments up to {self.comment}, reviews up to {self.review}"


class BaseMoved(Frozen):
    """The base branch moved and the build branch no longer merges cleanly into it."""

    type: Literal["base.moved"] = "base.moved"
    base_sha: str
    conflicts: tuple[str, ...] = ()

    def summary(self) -> str:
        return f"base at {self.base_sha[:10]}, {len(self.conflicts)} conflicting path(s)"


class ReconcileStarted(Frozen):
    type: Literal["reconcile.started"] = "reconcile.started"
    round: int
    base_sha: str

    def summary(self) -> str:
        return f"round {self.round}: merging {self.base_sha[:10]}"


class ReconcileCompleted(Frozen):
    type: Literal["reconcile.completed"] = "reconcile.completed"
    round: int
    base_sha: str
    head: str

    def summary(self) -> str:
        return f"round {self.round}: merged {self.base_sha[:10]} at {self.head[:10]}"
