"""The git CLI's way to a remote (DESIGN §2): fetch, ls-remote and compare-and-swap pushes.

A ``Remote`` fetches the remote's ``refs/agentrun/*``, notes and build branches into
``refs/agentrun-remotes/<remote>/*`` (never into live refs, never under
``refs/remotes/``) and pushes explicit refs in one ``--atomic`` push, each with
``--force-with-lease=<ref>:<oid seen>``. What the fetched refs mean is ``store/sync.py``'s
business; the pre-push hook pushes with ``push_atomic`` too.

Before its first push to a remote, a clone checks once that the remote takes agentrun's
ref namespaces at all (``Remote.check_namespaces``): some servers take only branches and
tags, and a refusal there would otherwise read as a lost race or a lease held elsewhere.
"""

from __future__ import annotations

import hashlib
import random
import re
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun import credentials, gitcli
from agentrun.credentials import without_userinfo
from agentrun.errors import AgentrunError
from agentrun.gitrepo import agentrun_dir, common_dir, empty_tree, signature
from agentrun.store.notes import NOTES_REF

TRACKED = "refs/agentrun-remotes/"  # what a fetch saw on each remote: TRACKED<remote>/…

BRANCHES = "refs/heads/agentrun/"
REMOTE_TIMEOUT = 300  # seconds for one fetch, ls-remote or push


# The namespaces agentrun pushes outside branches, each with where its selftest pushes: a
# ref of this check's own below it (SELFTEST/<random>), so that jobs checking one remote at
# once never push, or delete, each other's.
NAMESPACES = {"refs/agentrun/*": "refs/agentrun/selftest", "refs/notes/*": "refs/notes/selftest"}
# Where a clone remembers each push URL that took them (one file per URL, in .git/agentrun).
ACCEPTED = "remotes-accepting"


class SyncError(AgentrunError):
    """The remote could not be reached, or refused a push: say what to run next."""


class RefusedNamespaceError(AgentrunError):
    """The remote refuses one of agentrun's ref namespaces: no push there can work."""


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
        return gitcli.run(
            args, cwd=cwd, timeout=REMOTE_TIMEOUT, base=base, credential=credentials.git_config
        )
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


LOCK_TRIES = 8


def _locked(stderr: str) -> bool:
    """git could not take a local ref's lock: another process here was updating it."""
    return "cannot lock ref" in stderr or ".lock': File exists" in stderr


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
        self._checked = False

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A git command with the remote (fetch, ls-remote). Runners of one build in one
        clone (the build's and its tasks') fetch into the same tracking refs: a fetch
        that found one of them locked by another is tried again after a short wait."""
        for attempt in range(LOCK_TRIES):
            done = run_git([f"--git-dir={self._dir}", *args], self._dir)
            if done is None or done.returncode == 0 or not _locked(done.stderr):
                break
            time.sleep(random.uniform(0, 0.05 * 2 ** min(attempt, 4)))
        if done is not None and done.returncode != 0 and _locked(done.stderr):
            held = re.search(r"'([^']+\.lock)'", done.stderr)
            raise SyncError(
                f"`git {args[0]}` with {self.name} failed: a ref of this clone stayed locked "
                f"({held[1] if held else 'a .lock file'}); if no other git runs here, "
                "remove that file"
            )
        if done is None or done.returncode != 0:
            why = last_line(done.stderr if done else "") or "no answer"
            raise SyncError(f"`git {args[0]}` with {self.name} failed ({why})")
        return done

    def push(self, updates: Sequence[RefUpdate]) -> subprocess.CompletedProcess[str] | None:
        self.check_namespaces()
        return push_atomic(self.name, updates, self._dir, git_dir=self._dir)

    def check_namespaces(self) -> None:
        """Once per clone and push URL: does the remote take ``NAMESPACES``?

        Each selftest ref (``NAMESPACES``' ref, then ``/`` and a random name of this
        check's own) is pushed (a commit on the empty tree), then all are deleted again.
        A refusal raises ``RefusedNamespaceError``; a push that failed for any other
        reason (out of reach, no access) proves nothing and is not remembered, so the
        real push that follows reports it as it always did. A pass is kept in this
        clone's ``.git/agentrun``, by push URL (without credentials): asked once per
        clone, again when the remote moves, and the user's git config is left alone.
        """
        found = self.repo.remotes[self.name]
        url = without_userinfo(found.push_url or found.url or self.name)
        memo = agentrun_dir(self.repo) / ACCEPTED / hashlib.sha256(url.encode()).hexdigest()
        wanted = f"{url}\n{' '.join(NAMESPACES)}\n"
        if self._checked or (memo.is_file() and memo.read_text() == wanted):
            self._checked = True
            return
        sig = signature()
        oid = self.repo.create_commit(
            None, sig, sig, "agentrun: namespace selftest\n", empty_tree(self.repo), []
        )
        mine = uuid.uuid4().hex[:12]
        pushed = list[str]()
        try:
            for ref in (f"{base}/{mine}" for base in NAMESPACES.values()):
                refused = self._selftest_push(f"{oid}:{ref}")
                if refused is None:
                    return
                if refused:
                    raise self._refused(*refused[0])
                pushed.append(ref)
        finally:
            gone = self._selftest_push(*[f":{ref}" for ref in pushed]) if pushed else None
        if gone is None:
            return  # the selftest refs may still be there: look again next time
        if gone:
            ref, why = gone[0]
            raise self._refused(f"deleting {ref}", why)
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(wanted)  # a torn write only means asking again
        self._checked = True

    def _selftest_push(self, *refspecs: str) -> list[tuple[str, str]] | None:
        """Push ``refspecs`` (non-atomic, local hooks skipped): the refs the server
        refused, each with its reason (none: all taken); ``None`` when the push failed
        otherwise."""
        argv = [f"--git-dir={self._dir}", "push", "--porcelain", "--no-verify", self.name]
        done = run_git([*argv, *refspecs], self._dir)
        if done is None:
            return None
        refused = []
        for line in done.stdout.splitlines():
            flag, _, rest = line.partition("\t")
            if flag == "!":
                spec, _, why = rest.partition("\t")
                refused.append((spec.partition(":")[2], why.strip() or "refused"))
        return refused if refused or done.returncode == 0 else None

    def _refused(self, what: str, why: str) -> RefusedNamespaceError:
        ref = what.removeprefix("deleting ")
        namespace = next(n for n in NAMESPACES if ref.startswith(n.removesuffix("*")))
        return RefusedNamespaceError(
            f"the remote {self.name} refuses {namespace} (push of {what}: {why}): allow "
            "pushes to refs/agentrun/* and refs/notes/* there (a pre-receive hook or push "
            "rules reject them); agentrun keeps its build logs, leases and notes there. "
            "No build log, lease or note was pushed"
        )

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
