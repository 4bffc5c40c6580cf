"""The forge a hosted job works for, as the job's adapter (the GitHub Action) names it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrun.errors import AgentrunError


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


def payload_at(path: str, what: str) -> dict[str, Any]:
    """The JSON object a CI job was handed in the file ``path`` (``what``: whose it is, for
    the one line that says it cannot be read)."""
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AgentrunError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(loaded, dict):
        raise AgentrunError(f"the {what} {path} is not a JSON object")
    return loaded
