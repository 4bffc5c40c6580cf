"""The forge contract every implementation (local, github, gitlab) fulfils."""

from __future__ import annotations

import builtins
import enum
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

import pygit2

from agentrun import extras
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


CheckState = Literal["pending", "success", "failure"]


@dataclass(frozen=True)
class Check:
    """One check on a commit, as the forge reports it: a GitHub check run or commit
    status, a GitLab pipeline job (``[forge] require_checks`` names them).

    ``state`` is what the gate reads (pending: queued or running); ``conclusion`` is the
    forge's own word (success, failure, cancelled, timed_out, skipped, ...). ``summary``
    and ``log_tail`` are read only for failures, as far as the forge's API gives them.
    """

    name: str
    state: CheckState
    conclusion: str = ""
    summary: str = ""
    log_tail: str = ""
    url: str = ""


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

    def mark_draft(self, number: int) -> None:
        """Put the proposal back into draft (its build works on it again)."""


STATUS_MARKER = "<!-- agentrun:status -->"


def status_marked(body: str) -> tuple[str, str]:
    """A hosted forge's status comment is found again by its first line, a marker:
    ``body``'s own ``<!-- agentrun:… -->`` line, else ``STATUS_MARKER`` put before it.
    The marker line, and the body to post."""
    first = body.split("\n", 1)[0]
    if first.startswith("<!-- agentrun:") and first.endswith("-->"):
        return first, body
    return STATUS_MARKER, f"{STATUS_MARKER}\n{body}"


class Access(enum.IntEnum):
    """What a person may do in a repository, on one scale for every forge, lowest first.

    Each forge maps its own roles onto it (GitHub: none, read, triage, write, maintain,
    admin). Steering a build takes ``WRITE`` or above: people who may push to the
    repository may also tell its builds what to do.
    """

    NONE = 0
    READ = 1  # sees the repository and its issues
    TRIAGE = 2  # manages issues and labels, pushes nothing
    WRITE = 3  # pushes branches: may steer builds
    MAINTAIN = 4  # manages the repository's settings, short of destroying it
    ADMIN = 5  # owns it

    def __str__(self) -> str:
        return self.name.lower()


STEER = Access.WRITE  # the least access whose comments and reviews steer builds
CommitState = Literal["pending", "success", "failure", "error"]


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    author: str
    labels: tuple[str, ...] = ()
    is_proposal: bool = False  # GitHub: a pull request is an issue too


@dataclass(frozen=True)
class Review:
    """A submitted review: its verdict, its body and its inline comments."""

    id: int
    author: str
    state: str  # "changes_requested", "approved", "commented", ...
    body: str
    comments: tuple[str, ...] = ()  # "path:line: text"


@runtime_checkable
class HostedForge(Forge, Protocol):
    """A forge with issues, people and checks (github, gitlab): what the Action needs.

    ``number`` is an issue or a proposal: comments, labels and status comments work on
    both. Comment ids grow with time across a repository, so one cursor covers both.
    """

    def issue(self, number: int) -> Issue:
        """An issue (or a proposal seen as an issue)."""

    def access(self, login: str) -> Access:
        """What ``login`` may do in the repository, asked of the forge (never the payload)."""

    def is_bot(self, login: str) -> bool:
        """Whether ``login`` is a bot's account, as the forge tells them apart."""

    def set_labels(self, number: int, add: Sequence[str], remove: Sequence[str]) -> None:
        """Add and remove labels; removing an absent label is not an error."""

    def set_commit_status(
        self, sha: str, context: str, state: CommitState, description: str, url: str | None
    ) -> None:
        """A commit status (one per verify step) on ``sha``."""

    def request_review(self, number: int, login: str) -> None:
        """Ask ``login`` to review the proposal."""

    def react(self, comment_id: int, content: str) -> None:
        """Add a reaction (``+1``, ``eyes``, …) to an issue or proposal comment."""

    def reviews_since(self, number: int, after_id: int) -> builtins.list[Review]:
        """Reviews of the proposal with an id greater than ``after_id``, oldest first."""

    def checks(self, sha: str) -> builtins.list[Check]:
        """Every check and status on commit ``sha`` (agentrun's own ``agentrun/<step>``
        statuses excluded), the newest run of each name; failures with their summary and
        log tail (scrubbed by the caller)."""


# (repository, stop_at): ``stop_at`` is the job's ``time.monotonic()`` deadline, or None.
ForgeFactory = Callable[[pygit2.Repository, float | None], Forge]
_REGISTRY: dict[str, ForgeFactory] = {}
MODULES = {
    "local": "agentrun.forge.local",
    "github": "agentrun.forge.github",
    "gitlab": "agentrun.forge.gitlab",
}


def register(kind: str, factory: ForgeFactory) -> None:
    _REGISTRY[kind] = factory


def forge_kind(repo: pygit2.Repository, kind: str) -> str:
    """``auto`` is ``github`` when ``origin`` is on github.com, ``gitlab`` when it is on
    gitlab.com or on the host of ``[forge] url``, each when its extra is installed, else
    ``local``: a clone of a hosted project builds locally without the extra."""
    if kind != "auto":
        return kind
    if origin_on_github(repo):
        return "github" if extras.installed("github") else "local"
    return "gitlab" if origin_on_gitlab(repo) and extras.installed("gitlab") else "local"


def origin_on_github(repo: pygit2.Repository) -> bool:
    return "github.com" in _origin(repo)


def origin_url(repo: pygit2.Repository) -> str | None:
    """The ``origin`` remote's URL, if the repository has one."""
    return _origin(repo) or None


def origin_on_gitlab(repo: pygit2.Repository) -> bool:
    """``origin`` is on gitlab.com, or on the host of the config's ``[forge] url``."""
    origin = _origin(repo)
    if not origin:
        return False
    from agentrun.forge.gitlab_site import configured_url, on_gitlab

    return on_gitlab(origin, lambda: configured_url(repo))


def _origin(repo: pygit2.Repository) -> str:
    names = [n for n in repo.remotes.names() if n]
    return (repo.remotes["origin"].url or "") if "origin" in names else ""


def forge_token(kind: str, token: str | None, set_it: str, hint: str = "") -> str:
    """The hosted forge's token, or the one line that says how to give it one."""
    if token:
        return token
    from agentrun.credentials import TOKEN_FD
    from agentrun.errors import ForgeError

    raise ForgeError(
        f"the {kind} forge needs a token: {set_it}, or pass it on the file descriptor "
        f"{TOKEN_FD} names{hint}"
    )


def check_gate_forge(kind: str, require_checks: object) -> None:
    """``[forge] require_checks`` waits for a hosted forge's CI: the local forge has none."""
    if require_checks is not None and kind == "local":
        raise ConfigError(
            "[forge] require_checks waits for a hosted forge's CI, but this build's forge "
            "is local: remove require_checks from .agentrun.toml, or publish to github or "
            "gitlab ([forge] kind)"
        )


def require_forge(kind: str) -> None:
    """Refuse a forge asked for by name whose extra is not installed (one line, exit 1)."""
    if kind in extras.EXTRAS:
        extras.require(kind, f"the {kind} forge")


def open_forge(repo: pygit2.Repository, kind: str, stop_at: float | None = None) -> Forge:
    """The forge of ``kind``; a hosted one waits out no rate limit past ``stop_at``."""
    kind = forge_kind(repo, kind)
    if kind not in _REGISTRY and kind in MODULES:
        require_forge(kind)
        importlib.import_module(MODULES[kind])  # registers itself

    try:
        return _REGISTRY[kind](repo, stop_at)
    except KeyError:
        raise ConfigError(
            f"unknown forge {kind!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None
