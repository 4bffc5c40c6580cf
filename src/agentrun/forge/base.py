"""The forge contract every implementation (local, github, gitlab) fulfils."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

import pygit2

from agentrun.errors import ConfigError


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ProposalInfo:
    number: int
    title: str
    body: str
    head: str
    base: str
    state: Literal["open", "merged", "closed"]
    draft: bool
    url: str
    build: str | None = None
    head_sha: str | None = None
    comments: tuple[Comment, ...] = field(default_factory=tuple)


class Forge(Protocol):
    """Where proposals live. Implementations must be idempotent where noted."""

    name: str

    def push_branch(self, branch: str, sha: str) -> None:
        """Publish ``branch`` at ``sha`` (fast-forward only)."""

    def find_open(self, head: str) -> ProposalInfo | None:
        """The open proposal whose head is ``head``, if any (so a re-run never opens two)."""

    def open_draft(
        self, title: str, body: str, head: str, base: str, build: str | None
    ) -> ProposalInfo:
        """Open a draft proposal of branch ``head`` into ``base``."""

    def get(self, number: int) -> ProposalInfo:
        """One proposal; ``ForgeError`` when there is none."""

    def list(self) -> builtins.list[ProposalInfo]:
        """All proposals, newest first."""

    def update_body(self, number: int, body: str) -> None:
        """Replace the proposal's description."""

    def upsert_status_comment(self, number: int, body: str) -> Comment:
        """Create the one status comment of a proposal, or edit it in place."""

    def comment(self, number: int, body: str, author: str = "agentrun") -> Comment:
        """Add a comment."""

    def comments_since(self, number: int, after_id: int) -> builtins.list[Comment]:
        """Comments with an id greater than ``after_id``, oldest first."""

    def mark_ready(self, number: int) -> None:
        """Take the proposal out of draft: it is ready for review."""


ForgeFactory = Callable[[pygit2.Repository], Forge]
_REGISTRY: dict[str, ForgeFactory] = {}


def register(kind: str, factory: ForgeFactory) -> None:
    _REGISTRY[kind] = factory


def open_forge(repo: pygit2.Repository, kind: str) -> Forge:
    if kind not in _REGISTRY:
        import agentrun.forge.local  # noqa: F401 - registers itself

    try:
        return _REGISTRY[kind](repo)
    except KeyError:
        raise ConfigError(
            f"unknown forge {kind!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None
