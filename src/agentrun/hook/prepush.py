"""The pre-push hook's work (DESIGN §2, §9): guard the commits going to build branches,
start the builds that pushed ``Agentrun-Goal`` trailers ask for (``commands.goals``), then
push those builds' logs and the notes along.

git runs ``hooks/pre-push`` with the remote's name and URL as arguments and one line per
ref on standard input: ``<local ref> <local sha> <remote ref> <remote sha>``. Under the
pre-commit framework the same facts come as ``PRE_COMMIT_*`` variables, for one ref.

Refs that are build branches (``refs/heads/agentrun/<slug>``, on either side) are
guarded; the commits other branches bring are read for goals. Heavy modules are
imported only once the push has one or the other.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentrun.errors import AgentrunError, ConfigError
from agentrun.hook.push import HookInputError, Push, Update
from agentrun.refs import carries_goals, is_zero

if TYPE_CHECKING:
    import pygit2

    from agentrun.config import Config
    from agentrun.runner.guards import Rules


@dataclass
class Result:
    """What to tell the user (on stderr), and whether the push is refused."""

    lines: list[str] = field(default_factory=list)
    refused: bool = False


def pre_push(push: Push, cwd: Path, environ: Mapping[str, str]) -> Result:
    """Refuse build-branch commits that break the guards; else start the builds that
    pushed ``Agentrun-Goal`` trailers ask for, and push the builds' state."""
    builds = [u for u in push.updates if u.build is not None and not u.deleted]
    heads = [u for u in push.updates if not u.deleted and carries_goals(u.remote_ref)]
    if not builds and not heads:
        return Result()  # a deleted build branch leaves its log alone: nothing to check
    repo = _open(cwd, environ)
    remote_refs = _ls_remote(push.remote, cwd, environ, Path(repo.path))
    result = _guard_builds(repo, push.remote, builds, remote_refs, environ)
    if result.refused:
        return result
    slugs = dict.fromkeys(u.build for u in builds if u.build is not None)
    started = start_goals(repo, push.remote, heads, remote_refs, environ)
    slugs.update(dict.fromkeys(started.slugs))
    result.lines += push_state(repo, push.remote, list(slugs), remote_refs, cwd, environ)
    result.lines += started.lines
    return result


def _guard_builds(
    repo: pygit2.Repository,
    remote: str,
    builds: Sequence[Update],
    remote_refs: Mapping[str, str] | None,
    environ: Mapping[str, str],
) -> Result:
    """The guards' findings in the commits going to build branches (refused if any), by
    the working tree's config and the builds' own snapshots."""
    from agentrun import secrets
    from agentrun.runner.guards import Rules, snapshot_rules

    if not builds:
        return Result()  # goals only: each build reads its own commit's config
    config = _config(repo)
    # Loaded as the runner loads them: whatever this process writes is scrubbed of them.
    secrets.remember_config(config, environ)
    rules = Rules.of(config, environ)
    result, seen = Result(), set[str]()
    for update in builds:
        # The build's own snapshot too: a config edited on the build branch (and checked
        # out) cannot loosen the rules the build was started under.
        own = snapshot_rules(repo, update.build, environ) if update.build else None
        found = _guard(repo, remote, update, remote_refs, rules | own if own else rules, seen)
        if found:
            branch = update.remote_ref.removeprefix("refs/heads/")
            result.lines += [f"agentrun: push refused: commits going to {branch} break a guard"]
            result.lines += found
    if result.lines:
        result.refused = True
        result.lines.append(
            "agentrun: fix those commits (e.g. `git rebase -i`) and push again; "
            "`git push --no-verify` skips this hook"
        )
    return result


@dataclass
class Started:
    """The builds a push's goals name (new or not yet on the remote), and what to say."""

    slugs: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def start_goals(
    repo: pygit2.Repository,
    remote: str,
    heads: Sequence[Update],
    remote_refs: Mapping[str, str] | None,
    environ: Mapping[str, str],
) -> Started:
    """Create a build for each goal of the commits these updates bring (once per
    commit and goal); no agent runs here. A goal whose build exists here but not on the
    remote (a push that was refused) has its log pushed again."""
    from agentrun.commands.config_at import config_at
    from agentrun.commands.goals import create, goals_in, taken
    from agentrun.gitrepo import user_login
    from agentrun.store.log import build_ref

    started = Started()
    known = taken(repo, remote_refs)
    for update in heads:
        hide = [update.remote_sha] if not is_zero(update.remote_sha) else []
        tip = update.local_sha or update.local_ref
        branch = update.remote_ref.removeprefix("refs/heads/")
        hide += [f"--remotes={remote}"] if remote else []
        for goal in goals_in(Path(repo.path), branch, [tip], hide, environ):
            slug = goal.slug
            if slug in known:
                if remote_refs is not None and build_ref(slug) not in remote_refs:
                    started.slugs.append(slug)  # ours, never pushed: it goes along now
                continue
            try:
                config = config_at(repo, goal.commit)
                if not create(repo, goal, config, user_login(repo)):
                    continue
            except AgentrunError as exc:
                # The push is not the build: it goes on, and a CI job may start the goal.
                started.lines.append(goal.not_started(str(exc)))
                continue
            known.add(slug)
            started.slugs.append(slug)
            started.lines.append(goal.line(_how(repo, config, slug, remote)))
    return started


def _how(repo: pygit2.Repository, config: Config, slug: str, remote: str) -> str:
    """How the build a push started runs: the forge's CI job for the push, or by hand (a
    clone's sweep fetches the log only when told where from)."""
    from agentrun.forge.base import origin_on_github, origin_on_gitlab

    here = f"`git agentrun resume {slug}` runs it here"
    kind = config.forge.kind
    hosted = kind != "local" and (
        kind != "auto" or origin_on_github(repo) or origin_on_gitlab(repo)
    )
    if hosted:
        return f"the CI job of this push runs it (agentrun's push job), or {here}"
    fetch = f" --remote {remote}" if remote and not remote.startswith("-") else " --remote REMOTE"
    return f"{here}, or `git agentrun sweep{fetch}` in any clone"


def _guard(
    repo: pygit2.Repository,
    remote: str,
    update: Update,
    remote_refs: Mapping[str, str] | None,
    rules: Rules,
    seen: set[str],
) -> list[str]:
    """One line per finding in the commits ``update`` brings (each commit judged once)."""
    from agentrun.runner.guards import check_commit

    lines = []
    for commit in pushed_commits(repo, remote, update, remote_refs):
        if str(commit.id) in seen:
            continue
        seen.add(str(commit.id))
        for finding in check_commit(repo, commit, rules):
            lines.append(f"  commit {str(commit.id)[:10]} {finding.text()}")
    return lines


def pushed_commits(
    repo: pygit2.Repository,
    remote: str,
    update: Update,
    remote_refs: Mapping[str, str] | None,
) -> list[pygit2.Commit]:
    """The commits this update brings to the remote that the build itself added.

    Left out: what the remote has (its refs, as ``ls-remote`` lists them; the remote's
    tracking refs when it could not be asked) and the build's base and history before
    it (the people's work the build started from is not the build's to answer for).
    """
    import pygit2

    from agentrun.gitrepo import WALK_NEWEST_FIRST
    from agentrun.store.created import build_base

    tip = _commit(repo, update.local_sha or update.local_ref)
    if tip is None:
        raise HookInputError(f"{update.local_ref} ({update.local_sha}) is not a commit here")
    known: list[str] = [update.remote_sha]
    if remote_refs is not None:
        known += remote_refs.values()
    else:
        tracking = f"refs/remotes/{remote}/"
        known += [str(repo.references[n].target) for n in repo.references if n.startswith(tracking)]
    if update.build is not None:
        known += [sha for sha in [build_base(repo, update.build)] if sha]
    walker = repo.walk(tip.id, WALK_NEWEST_FIRST)
    for sha in dict.fromkeys(known):
        commit = _commit(repo, sha) if sha and not is_zero(sha) else None
        if commit is not None:
            walker.hide(commit.id)
    return [c for c in walker if isinstance(c, pygit2.Commit)]


def push_state(
    repo: pygit2.Repository,
    remote: str,
    slugs: Sequence[str],
    remote_refs: Mapping[str, str] | None,
    cwd: Path,
    environ: Mapping[str, str],
) -> list[str]:
    """Push the builds' logs, ``refs/notes/agentrun`` and ``refs/agentrun/memory``, each
    compare-and-swap.

    A ref is pushed only where the remote lacks it or has an ancestor of ours, with
    ``--force-with-lease=<ref>:<what the remote had>``, all in one ``--atomic`` push
    with ``--no-verify`` (so this hook is not run again).

    Nothing here refuses the branch push. The branch is the build's work and stands on
    its own; the log names branch commits by id, never the other way round, so a log
    that travels later (``git agentrun sync``) loses nothing. Refusing would leave the
    user unable to push their work over state that only needs merging.
    """
    from agentrun.store.log import build_ref
    from agentrun.store.memory import MEMORY_REF
    from agentrun.store.notes import NOTES_REF
    from agentrun.store.transport import RefUpdate, push_atomic

    if remote_refs is None:
        return [
            f"agentrun: could not list the refs of {remote}, so the builds' logs were not "
            f"pushed; `git agentrun sync {remote}` pushes them later"
        ]
    wanted: list[tuple[str, str]] = []
    for slug in slugs:
        try:
            wanted.append((build_ref(slug), f"the log of build {slug}"))
        except AgentrunError:
            continue  # agentrun/<name> that no build could have: a branch like any other
    wanted.append((NOTES_REF, NOTES_REF))
    wanted.append((MEMORY_REF, "the memory"))  # facts a build added (verify, setup, agents)
    updates: list[RefUpdate] = []
    pushed: list[str] = []
    lines: list[str] = []
    for ref, what in wanted:
        found = repo.references.get(ref)
        if found is None:
            continue
        ours, theirs = str(found.target), remote_refs.get(ref)
        if theirs == ours:
            continue
        if theirs is not None and not _descends(repo, ours, theirs):
            lines.append(
                f"agentrun: {remote} has entries in {what} that this clone lacks, so it was "
                f"left as it is (nothing overwritten); `git agentrun sync {remote}` merges them"
            )
            continue
        updates.append(RefUpdate(ref, ours, theirs))
        pushed.append(what)
    if not updates:
        return lines
    done = push_atomic(remote, updates, cwd, environ, git_dir=Path(repo.path))
    if done is not None and done.returncode == 0:
        return [*lines, f"agentrun: pushed {_and(pushed)} to {remote}"]
    why = _last_line(done.stderr if done else "") or "no answer"
    return [
        *lines,
        f"agentrun: {_and(pushed)} not pushed ({why}); the branch push goes on, and "
        f"`git agentrun sync {remote}` pushes them later",
    ]


# --- helpers -------------------------------------------------------------------


def _open(cwd: Path, environ: Mapping[str, str]) -> pygit2.Repository:
    import pygit2

    from agentrun.gitrepo import open_repo

    git_dir = environ.get("GIT_DIR")
    if git_dir:
        return pygit2.Repository(str(cwd / git_dir))
    return open_repo(cwd)


def _config(repo: pygit2.Repository) -> Config:
    from agentrun.config import Config, load_config

    if not repo.workdir:
        return Config()
    try:
        return load_config(Path(repo.workdir))
    except ConfigError as exc:
        raise ConfigError(
            f"{exc} (pushes of build branches are checked against it; fix it and push again)"
        ) from None


def _ls_remote(
    remote: str, cwd: Path, environ: Mapping[str, str], git_dir: Path
) -> dict[str, str] | None:
    """The remote's branches, tags and agentrun state, or None when it cannot be asked.

    Not every ref: a forge's remote can hold many more (pull requests' refs) that no
    commit pushed here needs to be told from.
    """
    patterns = ["refs/heads/*", "refs/tags/*", "refs/agentrun/builds/*", "refs/notes/agentrun"]
    patterns.append("refs/agentrun/memory")
    done = _git([f"--git-dir={git_dir}", "ls-remote", remote, *patterns], cwd, environ)
    if done is None or done.returncode != 0:
        return None
    refs = {}
    for line in done.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name and not name.endswith("^{}"):
            refs[name] = sha
    return refs


def _git(
    argv: list[str], cwd: Path, environ: Mapping[str, str]
) -> subprocess.CompletedProcess[str] | None:
    from agentrun.store.transport import run_git

    return run_git(argv, cwd, environ)


def _commit(repo: pygit2.Repository, name: str) -> pygit2.Commit | None:
    import pygit2

    try:
        obj = repo.revparse_single(name)
        found = obj.peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None
    return found if isinstance(found, pygit2.Commit) else None


def _descends(repo: pygit2.Repository, ours: str, theirs: str) -> bool:
    """Ours already holds everything theirs does (theirs is known here and an ancestor)."""
    if _commit(repo, theirs) is None:
        return False
    return bool(repo.descendant_of(ours, theirs))


def _and(items: Iterable[str]) -> str:
    names = list(items)
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
