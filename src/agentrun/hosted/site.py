"""The forge a hosted job works for, as the job's adapter (the GitHub Action) names it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Site:
    kind: str  # the forge's name, as its builds' proposals record it: "github"
    repository: str  # the project on it, e.g. owner/name; issues are "repository#number"
    bot: str  # the login the job's token writes as: its comments are agentrun's own words
    default_branch: str = ""  # the branch builds start from, when the event says it

    def issue_ref(self, number: int) -> str:
        """How a build records the issue it was made for."""
        return f"{self.repository}#{number}"
