"""Guards over a diff: protected paths and secrets (DESIGN §11, §12).

The same two rules run in the runner before a phase commit and in the pre-push hook
over the commits going to a build branch. A protected path (``protect.paths``) counts
when a change adds, modifies, deletes or renames it. A secret counts only on an
*added* line: a known token shape, or the value of a variable named in
``secrets.env``. A finding names the path and line, never the secret itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pygit2

from agentrun.config import Config
from agentrun.environment import ALWAYS_SECRET
from agentrun.errors import ConfigError, MalformedEventError
from agentrun.kernel.paths import matching_pattern
from agentrun.secrets import MIN_SECRET_LENGTH, shape_in

SHOWN = 5  # findings named in one line; the rest are counted

_DIFF_FIND = pygit2.enums.DiffFind.FIND_RENAMES | pygit2.enums.DiffFind.FIND_FOR_UNTRACKED


@dataclass(frozen=True)
class Rules:
    """What the guards look for: protected patterns and (variable, secret value) pairs.

    ``protected`` holds one list of patterns per config the rules come from: each list
    is read on its own, so one config's ``!pattern`` cannot free what another protects.
    """

    protected: tuple[tuple[str, ...], ...] = ()
    secret_values: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, config: Config, environ: Mapping[str, str]) -> Rules:
        """The rules of ``config``, with the secret variables' values read from ``environ``.

        The variables are those ``secrets.env`` names and the forge tokens. A multi-line
        value is looked for line by line; lines shorter than ``MIN_SECRET_LENGTH`` are
        left out (they would match ordinary text).
        """
        values = tuple(
            (name, part.strip())
            for name in dict.fromkeys((*config.secrets.env, *ALWAYS_SECRET))
            for part in environ.get(name, "").splitlines()
            if len(part.strip()) >= MIN_SECRET_LENGTH
        )
        groups = (config.protect.paths,) if config.protect.paths else ()
        return cls(groups, values)

    def __or__(self, other: Rules) -> Rules:
        """Both sets of rules: neither can loosen the other."""
        return Rules(
            tuple(dict.fromkeys((*self.protected, *other.protected))),
            tuple(dict.fromkeys((*self.secret_values, *other.secret_values))),
        )


@dataclass(frozen=True)
class Finding:
    """A protected path touched (``line`` is None), or a secret on an added line."""

    path: str
    line: int | None = None
    what: str = ""  # the pattern matched, or what kind of secret

    def text(self) -> str:
        if self.line is None:
            return f"changes {self.path}, a protected path (protect.paths: {self.what!r})"
        return f"adds {self.what} in {self.path} at line {self.line}"


def protected_by(groups: Iterable[Sequence[str]], path: str) -> str | None:
    """The pattern that protects ``path`` (in the first list that does), or None."""
    for patterns in groups:
        pattern = matching_pattern(patterns, path)
        if pattern is not None:
            return pattern
    return None


def secret_in(line: str, values: Sequence[tuple[str, str]] = ()) -> str | None:
    """What kind of secret ``line`` carries (e.g. ``a GitHub token``), or None."""
    # A configured value is named first: "the value of $GITHUB_TOKEN" says more than
    # the shape it may also have ("a secret assignment").
    for name, value in values:
        if value in line:
            return f"the value of ${name}"
    return shape_in(line)


def check_diff(
    repo: pygit2.Repository,
    diff: pygit2.Diff,
    rules: Rules,
    others: Sequence[pygit2.Tree] = (),
    skip: tuple[str, ...] = (),
) -> list[Finding]:
    """The findings of one diff, in path order.

    ``others`` are a merge's other parents: a path whose result one of them already
    has is not the merge's own change, and neither is a line one of them already has.
    Paths under a ``skip`` prefix are not looked at.
    """
    diff.find_similar(_DIFF_FIND)
    findings: list[Finding] = []
    for patch in diff:
        if patch is None:  # an unchanged entry: nothing to say
            continue
        delta = patch.delta
        new, old = delta.new_file, delta.old_file
        if new.path.startswith(skip) and old.path.startswith(skip):
            continue
        if others and any(_blob_id(t, new.path) == _result_id(delta) for t in others):
            continue
        for path in dict.fromkeys((old.path, new.path)):
            pattern = protected_by(rules.protected, path)
            if pattern is not None:
                findings.append(Finding(path, None, pattern))
                break
        if delta.status == pygit2.enums.DeltaStatus.DELETED or delta.is_binary:
            continue
        inherited = _lines_in(repo, others, new.path) if others else frozenset()
        findings.extend(_secrets(patch, new.path, rules, inherited))
    return findings


def check_commit(repo: pygit2.Repository, commit: pygit2.Commit, rules: Rules) -> list[Finding]:
    """The findings of what ``commit`` changes against its parents (a root: everything)."""
    parents = list(commit.parents)
    if parents:
        diff = parents[0].tree.diff_to_tree(commit.tree)
    else:
        diff = commit.tree.diff_to_tree(swap=True)
    return check_diff(repo, diff, rules, [p.tree for p in parents[1:]])


def check_workdir(
    worktree: pygit2.Repository, base: pygit2.Tree, rules: Rules, skip: tuple[str, ...] = ()
) -> list[Finding]:
    """The findings of the working tree against ``base``, untracked files included.

    Nothing is written to the object database: a secret found here never becomes a
    git object (``git add`` would write it as a blob before a tree could be checked).
    """
    flags = (
        pygit2.enums.DiffOption.INCLUDE_UNTRACKED
        | pygit2.enums.DiffOption.RECURSE_UNTRACKED_DIRS
        | pygit2.enums.DiffOption.SHOW_UNTRACKED_CONTENT
    )
    return check_diff(worktree, base.diff_to_workdir(flags), rules, skip=skip)


def summary(where: str, findings: Sequence[Finding]) -> str:
    """One line naming what was refused, e.g. for a phase's failure and the next round."""
    named = "; ".join(f.text() for f in findings[:SHOWN])
    more = len(findings) - SHOWN
    tail = f"; and {more} more" if more > 0 else ""
    return f"{where} {named}{tail}: {advice(findings)}"


def advice(findings: Sequence[Finding]) -> str:
    secrets = any(f.line is not None for f in findings)
    paths = any(f.line is None for f in findings)
    parts = []
    if paths:
        parts.append("leave protected paths as they are")
    if secrets:
        parts.append("remove the secret (and treat it as leaked if it was real)")
    return " and ".join(parts)


def _secrets(
    patch: pygit2.Patch, path: str, rules: Rules, inherited: frozenset[str]
) -> Iterable[Finding]:
    for hunk in patch.hunks:
        for line in hunk.lines:
            if line.origin != "+":
                continue
            text = line.raw_content.decode("utf-8", "replace")
            if text in inherited:
                continue
            kind = secret_in(text, rules.secret_values)
            if kind is not None:
                yield Finding(path, line.new_lineno, kind)


def _result_id(delta: pygit2.DiffDelta) -> pygit2.Oid | None:
    if delta.status == pygit2.enums.DeltaStatus.DELETED:
        return None
    return delta.new_file.id


def _blob_id(tree: pygit2.Tree, path: str) -> pygit2.Oid | None:
    try:
        return tree[path].id
    except KeyError:
        return None


def _lines_in(repo: pygit2.Repository, trees: Sequence[pygit2.Tree], path: str) -> frozenset[str]:
    lines: set[str] = set()
    for tree in trees:
        oid = _blob_id(tree, path)
        blob = repo.get(oid) if oid is not None else None
        if isinstance(blob, pygit2.Blob):
            lines.update(bytes(blob.data).decode("utf-8", "replace").splitlines(keepends=True))
    return frozenset(lines)


# The rules a pushed or running build is held to: its own config snapshot's.
def snapshot_rules(repo: pygit2.Repository, slug: str, environ: Mapping[str, str]) -> Rules | None:
    """The guards of the config snapshotted in the build's first event, if it has a log."""
    from agentrun.snapshot import read
    from agentrun.store.created import created_payload

    created = created_payload(repo, slug)
    config = getattr(created, "config", None)
    if not isinstance(config, dict):
        return None
    try:
        return Rules.of(read(config, f"the config of build {slug}"), environ)
    except (ConfigError, MalformedEventError):
        return None
