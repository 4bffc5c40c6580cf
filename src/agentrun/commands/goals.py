"""Goals from a push (DESIGN §9): a pushed commit's ``Agentrun-Goal: <text>`` trailers.

Each trailer starts one build from its commit (source ``hook``, base: the branch pushed
to, base sha: the commit), once per (commit, goal). The key is the slug itself: it is
made from the goal's words and a digest of the commit and the goal's text, so the hook,
a CI job that sees the push after it, and a push of the same commit to a second branch
or remote all name the same build, and whichever comes second finds it (here, archived
here, or on the remote, where creating it is a compare-and-swap that only one wins).

Trailers are read with git's own rules (``%(trailers)``), merge commits left out; the
shell shim (``templates/pre-push``) asks git the same question to decide whether to
start Python at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun.config import Config
from agentrun.errors import AgentrunError
from agentrun.refs import BUILD_BRANCHES
from agentrun.sanitize import sanitize

TRAILER = "Agentrun-Goal"
GOAL_LIMIT = 2000  # characters of a trailer's text kept as the goal
DIGEST = 8  # hex digits of the (commit, goal) digest ending the slug
# One record per commit: its id, then each trailer's value, NUL-separated.
FORMAT = f"--format=%H%x00%(trailers:key={TRAILER},valueonly,unfold,separator=%x00)%x01"


class PushPayloadError(AgentrunError):
    """A push event's payload does not say which commits were pushed where."""


@dataclass(frozen=True)
class Goal:
    """One ``Agentrun-Goal`` trailer of one pushed commit, and the branch it went to."""

    commit: str
    text: str
    branch: str

    @property
    def slug(self) -> str:
        from agentrun.commands.build import slugify

        key = f"{self.commit}\n{self.text}".encode()
        return f"{slugify(self.text)}-{hashlib.sha256(key).hexdigest()[:DIGEST]}"

    def not_started(self, why: str) -> str:
        """What the hook says of a goal it could not start (the push goes on)."""
        return (
            f"agentrun: the goal of commit {self.commit[:10]} on {self.branch} was not "
            f"started here: {why}; the push goes on, and its CI job (`git agentrun action`) "
            "starts the goal where it can"
        )

    def line(self, how: str) -> str:
        """What the hook or the job says of the build it started."""
        return (
            f"agentrun: build {self.slug} started for the goal of commit {self.commit[:10]} "
            f"on {self.branch}; {how}"
        )


def goals_in(
    git_dir: Path,
    branch: str,
    tips: Sequence[str],
    hide: Iterable[str],
    environ: Mapping[str, str] | None = None,
) -> list[Goal]:
    """The goals of the commits reachable from ``tips`` and not from ``hide`` (object ids
    or rev-list options such as ``--remotes=origin``), oldest commit first."""
    from agentrun.store.transport import run_git

    argv = [f"--git-dir={git_dir}", "log", "--no-merges", "--reverse", "--ignore-missing"]
    argv += ["--no-show-signature"]
    argv += [FORMAT, *tips, "--not", *hide, "--"]
    done = run_git(argv, git_dir, environ)
    if done is None or done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no answer"])[-1] if done else "no answer"
        raise AgentrunError(f"cannot list the commits pushed to {branch}: {why}")
    found: dict[tuple[str, str], Goal] = {}
    for record in done.stdout.split("\x01"):
        sha, *values = record.strip("\n").split("\x00")
        for value in values:
            text = sanitize(" ".join(value.split()), GOAL_LIMIT)
            if sha and text:
                found.setdefault((sha, text), Goal(sha, text, branch))
    return list(found.values())


def taken(repo: pygit2.Repository, remote_refs: Mapping[str, str] | None = None) -> set[str]:
    """The slugs no goal may take again: builds here (live or archived), build branches
    here, and the builds the remote lists."""
    from agentrun.store.archive import archived
    from agentrun.store.log import BUILDS, EventLog

    slugs = set(EventLog(repo).slugs()) | set(archived(repo))
    heads = BUILD_BRANCHES
    slugs |= {name[len(heads) :] for name in repo.references if name.startswith(heads)}
    slugs |= {name[len(BUILDS) :] for name in remote_refs or {} if name.startswith(BUILDS)}
    return slugs


def create(repo: pygit2.Repository, goal: Goal, config: Config, login: str) -> bool:
    """Create the goal's build here, from its commit; False when its slug is taken."""
    from agentrun.commands.build import new_build, runnable

    config, _ = runnable(config)
    try:
        new_build(
            repo,
            goal.slug,
            login,
            goal.text,
            (goal.branch, goal.commit),
            config,
            source="hook",
            attempts=1,
        )
    except AgentrunError:
        return False  # another process here created it a moment ago
    return True


def check_push(ref: object, before: object, after: object) -> tuple[str, str, str]:
    """A push event's ref and its commits before and after, or one line saying what is
    missing from the payload."""
    from agentrun.refs import is_sha

    if not isinstance(ref, str) or not ref.startswith("refs/"):
        raise PushPayloadError(f"the push payload names no ref that was pushed (got {ref!r})")
    for name, sha in (("before", before), ("after", after)):
        if not isinstance(sha, str) or not is_sha(sha):
            raise PushPayloadError(
                f"the push payload's {name} is not a commit id (got {str(sha)[:80]!r})"
            )
    return ref, str(before), str(after)
