"""What a push hands the pre-push hook: git's arguments and standard input (``<local ref>
<local sha> <remote ref> <remote sha>`` per ref), or pre-commit's ``PRE_COMMIT_*``
variables for its one ref."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from agentrun.errors import AgentrunError
from agentrun.refs import BUILD_BRANCHES, is_sha, is_zero


class HookInputError(AgentrunError):
    """What the hook was handed is not what git gives a pre-push hook."""


@dataclass(frozen=True)
class Update:
    """One ref the push updates, as git describes it to the hook."""

    local_ref: str
    local_sha: str  # "" (pre-commit only): resolve ``local_ref``
    remote_ref: str
    remote_sha: str

    @property
    def deleted(self) -> bool:
        return is_zero(self.local_sha)

    @property
    def build(self) -> str | None:
        """The build branch's name after ``agentrun/`` (the remote side names it first)."""
        for ref in (self.remote_ref, self.local_ref):
            if ref.startswith(BUILD_BRANCHES):
                return ref[len(BUILD_BRANCHES) :]
        return None


@dataclass(frozen=True)
class Push:
    remote: str
    url: str
    updates: tuple[Update, ...]


def parse_updates(text: str) -> tuple[Update, ...]:
    """git's pre-push input; a line that is not four fields with two object ids is refused."""
    updates = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        # The local ref is "supplied as it was originally given": split from the right.
        parts = line.rsplit(maxsplit=3)
        if len(parts) != 4 or not (is_sha(parts[1]) and is_sha(parts[3])):
            raise HookInputError(
                f"line {number} of the pre-push input is not `<local ref> <local sha> "
                f"<remote ref> <remote sha>`: {line[:200]!r}"
            )
        updates.append(Update(*parts))
    return tuple(updates)


def read_push(
    remote: str | None, url: str | None, stdin: TextIO, environ: Mapping[str, str]
) -> Push:
    """What is being pushed where: git's arguments and input, or pre-commit's variables."""
    if remote is None:
        return _precommit_push(environ)
    if stdin.isatty():
        raise HookInputError(
            "`git agentrun hook pre-push` reads the pushed refs that git writes to a "
            "pre-push hook's standard input; install the hook with `git agentrun hook install`"
        )
    return Push(remote, url or remote, parse_updates(stdin.read()))


def _precommit_push(environ: Mapping[str, str]) -> Push:
    names = ("PRE_COMMIT_REMOTE_NAME", "PRE_COMMIT_LOCAL_BRANCH", "PRE_COMMIT_REMOTE_BRANCH")
    if not environ.get("PRE_COMMIT"):
        raise HookInputError(
            "`git agentrun hook pre-push REMOTE URL` is run by git's pre-push hook "
            "(`git agentrun hook install`) or by pre-commit's pre-push stage"
        )
    if not all(environ.get(name) for name in names):
        # `pre-commit run --hook-stage pre-push` outside a push: there is nothing to check.
        return Push("", "", ())
    # pre-commit passes one ref: FROM_REF is what the remote has (or the parent of the
    # first commit it lacks); TO_REF is unset when the push brings a root commit.
    local_sha = environ.get("PRE_COMMIT_TO_REF", "")
    from_ref = environ.get("PRE_COMMIT_FROM_REF", "")
    for sha in (local_sha, from_ref):
        if sha and not is_sha(sha):
            raise HookInputError(f"pre-commit passed {sha!r} where an object id belongs")
    update = Update(
        environ["PRE_COMMIT_LOCAL_BRANCH"],
        local_sha,
        environ["PRE_COMMIT_REMOTE_BRANCH"],
        from_ref or "0" * 40,
    )
    remote = environ["PRE_COMMIT_REMOTE_NAME"]
    return Push(remote, environ.get("PRE_COMMIT_REMOTE_URL") or remote, (update,))
