"""The forge a hosted job works for, as the job's adapter (the GitHub Action) names it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Site:
    kind: str  # the forge's name, as its builds' proposals record it: "github"
    repository: str  # the project on it, e.g. owner/name; issues are "repository#number"
    bot: str  # the login the job's token writes as: its comments are agentrun's own words
    default_branch: str = ""  # the branch builds start from, when the event says it
    proposal_word: str = "pull request"  # what the forge calls a proposal
    proposal_mark: str = "#"  # what precedes a proposal's number in the forge's text
    shown: Callable[[int], int] = int  # a proposal's number as people see it

    def issue_ref(self, number: int) -> str:
        """How a build records the issue it was made for."""
        return f"{self.repository}#{number}"

    def proposal(self, number: int) -> str:
        """A proposal as the forge's people name it: ``pull request #7``."""
        return f"{self.proposal_word} {self.proposal_mark}{self.shown(number)}"
