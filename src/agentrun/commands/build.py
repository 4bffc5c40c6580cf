"""Creating a build and running it (``git agentrun run``, ``resume``)."""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2

from agentrun import secrets
from agentrun.commands.doctor import auto_pick, unenforced_budgets
from agentrun.config import CONFIG_FILE, Config, config_from_data, load_config
from agentrun.errors import AgentrunError, ConcurrentUpdateError, ConfigError
from agentrun.events import BuildCreated, HumanActor
from agentrun.gitrepo import require_commits, user_login
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.refs import BRANCH_PREFIX
from agentrun.runner.build import Observer
from agentrun.runner.loop import Outcome, Runner
from agentrun.snapshot import snapshot
from agentrun.store.archive import archived
from agentrun.store.log import EventLog

SLUG_WORDS = 8
SLUG_CHARS = 40


@dataclass(frozen=True)
class Created:
    slug: str
    base_ref: str
    base_sha: str
    dirty: bool
    picked: str | None = None  # the runtime chosen because none was configured
    config_dirty: bool = False  # .agentrun.toml itself has uncommitted changes
    unenforced: tuple[str, ...] = ()  # budgets the build's runtimes cannot hold (warnings)

    def uncommitted_note(self) -> str:
        """What `run` says of uncommitted work; the config is the one file read as it is."""
        said = "note: uncommitted changes in your working tree are not part of the build"
        if self.config_dirty:
            said += f", except {CONFIG_FILE}: the build runs with its settings as they are now"
        return said


def slugify(goal: str) -> str:
    # A secret value in the goal must not become the slug, the branch and every trailer.
    goal = unicodedata.normalize("NFKD", secrets.scrub(goal)).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", goal.lower())[:SLUG_WORDS]
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > SLUG_CHARS:
            break
        slug = candidate
    return slug or "build"


def with_overrides(config: Config, roles: dict[str, str], max_cost: float | None = None) -> Config:
    """The config with this run's ``--role`` and ``--max-cost`` applied."""
    if not roles and max_cost is None:
        return config
    data = config.model_dump(mode="json")
    for role, runtime in roles.items():
        data["roles"][role] = [runtime]
    if max_cost is not None:
        data["budget"]["max_cost_usd"] = max_cost
    return config_from_data(data, "--role/--max-cost")


def parse_roles(values: tuple[str, ...]) -> dict[str, str]:
    roles = {}
    for value in values:
        role, sep, runtime = value.partition("=")
        if not sep or not role or not runtime:
            raise ConfigError(
                f"--role {value!r}: expected ROLE=RUNTIME, e.g. --role implement=my-agent"
            )
        roles[role] = runtime
    return roles


def check_runnable(config: Config) -> None:
    """Refuse to start a build no agent could run, saying how to configure one.

    Also one that would run agents less isolated than CI asks (``[isolation]``), or
    publish to a forge whose extra is not installed.
    """
    from agentrun.forge.base import require_forge
    from agentrun.isolation import resolve

    resolve(config.isolation)
    require_forge(config.forge.kind)
    if not config.roles:
        raise ConfigError(
            "no agent runtime is configured: run `git agentrun init` and edit .agentrun.toml "
            '(set [runtimes.NAME] and roles.default = ["NAME"])'
        )
    needed = ["plan", "implement"]
    needed += ["plan-review"] if config.pipeline.plan_review else []
    needed += ["code-review"] if config.pipeline.code_review else []
    needed += [s.agent for s in config.verify if s.agent] + [
        s.agent for s in config.finalize if s.agent
    ]
    for role in needed:
        names = config.runtimes_for(role)
        if not names:
            raise ConfigError(
                f"no runtime for role {role!r}: set roles.{role} or roles.default in .agentrun.toml"
            )
        for name in names:
            if config.runtime(name) is None:
                raise ConfigError(
                    f"roles.{role} names runtime {name!r}, but there is no [runtimes.{name}]"
                )


def resolve_base(repo: pygit2.Repository, base: str | None) -> tuple[str, str]:
    require_commits(repo)
    if base is None:
        if repo.head_is_detached:
            sha = str(repo.head.target)
            return sha, sha
        return repo.head.shorthand, str(repo.head.target)
    try:
        commit, ref = repo.resolve_refish(base)
    except (KeyError, pygit2.InvalidSpecError):
        raise AgentrunError(f"--base {base!r} is not a branch, tag or commit here") from None
    name = ref.shorthand if ref is not None else base
    return name, str(commit.id)


def uncommitted(repo: pygit2.Repository) -> list[str]:
    """The paths with changes that are not committed (ignored files aside)."""
    if repo.is_bare:
        return []
    return [
        path
        for path, flags in repo.status().items()
        if flags != pygit2.GIT_STATUS_IGNORED and flags != pygit2.GIT_STATUS_CURRENT
    ]


def create_build(
    repo: pygit2.Repository,
    goal: str,
    base: str | None = None,
    roles: dict[str, str] | None = None,
    config: Config | None = None,
    max_cost: float | None = None,
    allow_empty: bool = False,
) -> Created:
    goal = goal.strip()
    if not goal:
        raise AgentrunError("the goal is empty: say what the build should achieve")
    if config is None:
        config = load_config(Path(repo.workdir)) if repo.workdir else Config()
    config, picked = runnable(with_overrides(config, roles or {}, max_cost))
    base_ref, base_sha = resolve_base(repo, base)
    changed = uncommitted(repo)
    slug = new_build(
        repo,
        slugify(goal),
        user_login(repo),
        goal,
        (base_ref, base_sha),
        config,
        allow_empty=allow_empty,
    )
    unenforced = tuple(unenforced_budgets(config))
    return Created(
        slug, base_ref, base_sha, bool(changed), picked, CONFIG_FILE in changed, unenforced
    )


def runnable(config: Config) -> tuple[Config, str | None]:
    """The config a new build runs with, and the runtime picked when none is configured;
    a build no agent could run is refused before anything is written."""
    picked = None
    if not config.roles:
        config, picked = auto_pick(config)
    check_runnable(config)
    # Before anything is written: the goal may hold a secret value (scrubbed, slug too).
    secrets.remember_config(config, os.environ)
    return config, picked


def new_build(
    repo: pygit2.Repository,
    stem: str,
    login: str,
    goal: str,
    base: tuple[str, str],
    config: Config,
    source: Literal["cli", "issue", "hook"] = "cli",
    issue: str | None = None,
    requested_by: str | None = None,
    allow_empty: bool = False,
    attempts: int = 1000,
) -> str:
    """Create a build (its ``build.created``, by ``login``, from ``base``: the branch and
    its commit) under the first free slug of ``stem``, ``stem-2``, …, its branch
    ``agentrun/SLUG``; the slug is returned. ``attempts=1``: ``stem`` or nothing (a
    push's goal, whose slug is its key).

    A slug is free when no build, archived build or branch has it; of two processes
    taking one at once, the one that loses the compare-and-swap takes the next."""
    from agentrun.forge.base import check_gate_forge, forge_kind

    check_gate_forge(forge_kind(repo, config.forge.kind), config.forge.require_checks)
    log = EventLog(repo)
    taken = set(log.slugs()) | set(archived(repo))
    for n in range(1, attempts + 1):
        slug = stem if n == 1 else f"{stem}-{n}"
        branch = f"{BRANCH_PREFIX}{slug}"
        if slug in taken or f"refs/heads/{branch}" in repo.references:
            continue
        created = BuildCreated(
            goal=goal,
            base_ref=base[0],
            base_sha=base[1],
            branch=branch,
            source=source,
            issue=issue,
            requested_by=requested_by,
            config=snapshot(config),
            allow_empty=allow_empty,
        )
        first = Draft(created, HumanActor(login=login))
        try:
            log.append(slug, [first], None)
        except ConcurrentUpdateError:
            continue  # another process took this slug a moment ago
        return slug
    raise AgentrunError(f"too many builds named {stem}-N: archive some with `git agentrun pulls`")


def run_build(
    repo: pygit2.Repository,
    slug: str,
    observer: Observer | None = None,
    remote: str | None = None,
    stop_at: float | None = None,
) -> Outcome:
    """Run ``slug``; with ``remote`` (or ``[sync] remote``), claimed and synced there."""
    return Runner(repo, slug, observer, remote=remote, stop_at=stop_at).run()


def run_task(
    repo: pygit2.Repository,
    slug: str,
    task: str,
    observer: Observer | None = None,
    remote: str | None = None,
    stop_at: float | None = None,
) -> Outcome:
    """Run one task of ``slug``'s graph under the task's lease; with ``remote``, the log is
    first brought up to the remote's, and the task's events and branch are pushed there."""
    from agentrun.runner.remote import configured_remote
    from agentrun.store.sync import pull

    remote = remote if remote is not None else configured_remote(repo, slug)
    if remote:
        pull(repo, remote, slug)
    runner = Runner(repo, slug, observer, remote=remote or "", stop_at=stop_at, task=task)
    return runner.run()


def resume_build(
    repo: pygit2.Repository,
    slug: str,
    observer: Observer | None = None,
    remote: str | None = None,
    stop_at: float | None = None,
) -> Outcome | BuildState:
    """Un-pause if paused, then run on from the log. A finished build is left as it is.

    With a remote, the build's log is first brought up to the remote's, so a fresh
    clone continues where the last runner stopped.
    """
    from agentrun.commands.control import request_resume
    from agentrun.kernel.requests import NotRunningError
    from agentrun.runner.remote import configured_remote
    from agentrun.store.cache import StateCache, load_state
    from agentrun.store.lease import clear_stale
    from agentrun.store.remote_lease import clear_stale_remote
    from agentrun.store.sync import pull

    remote = remote if remote is not None else configured_remote(repo, slug)
    where = pull(repo, remote, slug) if remote else None
    try:
        state = request_resume(repo, slug)
    except NotRunningError:  # finished: left as it is
        state = load_state(EventLog(repo), StateCache(repo), slug)[1]
    if state.status != "running":
        clear_stale(repo, slug)  # a runner killed right after the end left its lease
        if where is not None:
            clear_stale_remote(where, slug)
        return state
    return run_build(repo, slug, observer, remote=remote or "", stop_at=stop_at)


def deadline(minutes: float | None) -> float | None:
    """``--time-limit MINUTES`` as a ``time.monotonic()`` deadline."""
    import time

    return None if minutes is None else time.monotonic() + minutes * 60
