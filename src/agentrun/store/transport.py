"""The git CLI's way to a remote (DESIGN §2): fetch, ls-remote and compare-and-swap pushes.

A ``Remote`` fetches the remote's ``refs/agentrun/*``, notes and build branches into
``refs/agentrun-remotes/<remote>/*`` (never into live refs, never under
``refs/remotes/``) and pushes explicit refs in one ``--atomic`` push, each with
``--force-with-lease=<ref>:<oid seen>``. What the fetched refs mean is ``store/sync.py``'s
business; the pre-push hook pushes with ``push_atomic`` too.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun import gitcli
from agentrun.errors import AgentrunError
from agentrun.gitrepo import common_dir
from agentrun.store.notes import NOTES_REF

TRACKED = "refs/agentrun-remotes/"  # what a fetch saw on each remote: TRACKED<remote>/…

BRANCHES = "refs/heads/agentrun/"
REMOTE_TIMEOUT = 300  # seconds for one fetch, ls-remote or push


class SyncError(AgentrunError):
    """The remote could not be reached, or refused a push: say what to run next."""


@dataclass(frozen=True)
class RefUpdate:
    """Set ``ref`` on the remote to ``new`` ("" deletes it) if it still is ``expected``
    (``None``: the remote must not have the ref yet)."""

    ref: str
    new: str
    expected: str | None


def run_git(
    args: Sequence[str], cwd: Path, base: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    """``git ARGS`` (hardened, see ``gitcli``); ``None`` when it could not be started or ran
    past ``REMOTE_TIMEOUT``. ``base``: the environment to pick from (default: ours)."""
    try:
        return gitcli.run(args, cwd=cwd, timeout=REMOTE_TIMEOUT, base=base)
    except (OSError, subprocess.TimeoutExpired):
        return None


def push_atomic(
    remote: str,
    updates: Sequence[RefUpdate],
    cwd: Path,
    base: Mapping[str, str] | None = None,
    git_dir: Path | None = None,
) -> subprocess.CompletedProcess[str] | None:
    """One ``git push --atomic --no-verify`` of explicit refs, each compare-and-swap."""
    leases = [f"--force-with-lease={u.ref}:{u.expected or ''}" for u in updates]
    refspecs = [f"{u.new}:{u.ref}" for u in updates]
    where = [f"--git-dir={git_dir}"] if git_dir is not None else []
    argv = [*where, "push", "--atomic", "--no-verify", "--quiet", remote, *leases, *refspecs]
    return run_git(argv, cwd, base)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


class Remote:
    """A named remote of ``repo``, reached with the git CLI."""

    def __init__(self, repo: pygit2.Repository, name: str) -> None:
        names = [n for n in repo.remotes.names() if n]
        if name not in names:
            known = ", ".join(sorted(names)) or "none"
            raise SyncError(
                f"no remote named {name!r} (remotes here: {known}); add it with "
                f"`git remote add {name} URL`"
            )
        if repo.is_shallow:
            raise SyncError(
                "this clone is shallow, so build logs cannot be compared: run "
                "`git fetch --unshallow` first"
            )
        self.repo, self.name = repo, name
        self.tracking = f"{TRACKED}{name}/"
        self._dir = common_dir(repo)

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = run_git([f"--git-dir={self._dir}", *args], self._dir)
        if done is None or done.returncode != 0:
            why = last_line(done.stderr if done else "") or "no answer"
            raise SyncError(f"`git {args[0]}` with {self.name} failed ({why})")
        return done

    def push(self, updates: Sequence[RefUpdate]) -> subprocess.CompletedProcess[str] | None:
        return push_atomic(self.name, updates, self._dir, git_dir=self._dir)

    def ls(self, *patterns: str) -> dict[str, str]:
        found = {}
        for line in self.git("ls-remote", self.name, *patterns).stdout.splitlines():
            sha, _, ref = line.partition("\t")
            found[ref] = sha
        return found

    def fetch(self) -> None:
        """Bring the remote's agentrun refs, notes and build branches under ``tracking``."""
        specs = [f"+refs/agentrun/*:{self.tracking}*"]
        specs.append(f"+{BRANCHES}*:{self.tracking}branches/*")
        if NOTES_REF in self.ls(NOTES_REF):
            specs.append(f"+{NOTES_REF}:{self.tracking}notes")
        # --prune drops tracking refs the remote no longer has (the notes ref too, when
        # the remote has none: it then matches only the wildcard, whose source is gone).
        self.git("fetch", "--prune", "--no-tags", "--quiet", self.name, *specs)

    def seen(self, ref: str) -> str | None:
        """The oid the last fetch saw for tracking ref ``ref``."""
        found = self.repo.references.get(self.tracking + ref)
        return None if found is None else str(found.target)

    def tracking_ref(self, ref: str) -> str:
        """Where ``fetch`` keeps the remote's ``ref`` here."""
        if ref == NOTES_REF:
            return self.tracking + "notes"
        if ref.startswith(BRANCHES):
            return self.tracking + "branches/" + ref[len(BRANCHES) :]
        return self.tracking + ref.removeprefix("refs/agentrun/")

    def record(self, updates: Sequence[RefUpdate]) -> None:
        """After a push the remote accepted: the tracking refs say what it now holds."""
        for update in updates:
            name = self.tracking_ref(update.ref)
            if update.new:
                self.repo.references.create(name, pygit2.Oid(hex=update.new), force=True)
            elif name in self.repo.references:
                self.repo.references.delete(name)

    def seen_under(self, prefix: str) -> dict[str, str]:
        full = self.tracking + prefix
        return {
            name[len(full) :]: str(self.repo.references[name].target)
            for name in self.repo.references
            if name.startswith(full)
        }
