"""Facts across builds (``refs/agentrun/memory``): adding, accepting, forgetting, listing.

Who adds a fact decides its first state (the rules are the kernel's, ``kernel.memory``).
Deterministic sources (a verify command that passed, setup that worked) and people add
``accepted`` facts; agents (``git agentrun agent remember``) and code-review findings
that recurred across rounds add ``proposed`` ones, because agents read untrusted issue
text: nothing they write reaches a later prompt until a person accepts it. Every text is
scrubbed of secrets before it is compared or written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun import secrets
from agentrun.config import Config, load_config
from agentrun.errors import AgentrunError
from agentrun.events import Actor, HumanActor, KernelActor, MemoryAdded
from agentrun.gitrepo import user_login
from agentrun.kernel import memory
from agentrun.kernel.draft import Draft
from agentrun.kernel.memory import Fact
from agentrun.store import memory as store

MEMORY = "refs/agentrun/memory"


@dataclass(frozen=True)
class Added:
    fact: Fact
    new: bool  # False: the same text was already a fact (``fact`` is that one)


def clean_text(text: str) -> str:
    """The fact's text as it is stored: stripped, scrubbed, checked."""
    return memory.check_text(secrets.scrub(text.strip()))


def add(
    repo: pygit2.Repository,
    text: str,
    who: str,
    *,
    accepted: bool,
    actor: Actor,
    build: str = "",
    phase: str = "",
    paths: Sequence[str] = (),
    over_forgotten: bool = False,
) -> Added:
    """Add a fact unless one says the same already (``kernel.memory.added``); returns the
    fact and whether it is new."""
    text, globs = clean_text(text), memory.clean_paths(paths)
    twins: list[Fact] = []

    def decide(facts: dict[str, Fact]) -> list[Draft]:
        adding = memory.added(
            facts,
            text,
            who,
            accepted=accepted,
            actor=actor,
            build=build,
            phase=phase,
            paths=globs,
            over_forgotten=over_forgotten,
        )
        twins[:] = [adding.twin] if adding.twin is not None else []
        return adding.drafts

    stored = store.append(repo, decide, MEMORY)
    last = stored[-1].event.payload if stored else None
    if isinstance(last, MemoryAdded):
        return Added(store.read(repo).facts[last.id], True)
    return Added(store.read(repo).facts[twins[0].id], False)


def learned(repo: pygit2.Repository, text: str, who: str, build: str, phase: str) -> Added | None:
    """A deterministic source's fact (``verify``, ``setup``), accepted at once. A failure to
    write it is not the build's: None, and the build goes on."""
    try:
        return add(repo, text, who, accepted=True, actor=KernelActor(), build=build, phase=phase)
    except AgentrunError:
        return None


def accept(repo: pygit2.Repository, fact_id: str, login: str | None = None) -> tuple[Fact, bool]:
    """A person accepts a proposed fact; returns it and whether this changed it."""
    return _mark(repo, fact_id, login or user_login(repo), accept=True)


def forget(repo: pygit2.Repository, fact_id: str, login: str | None = None) -> tuple[Fact, bool]:
    """A person forgets a fact: no later prompt carries it, on any clone that syncs."""
    return _mark(repo, fact_id, login or user_login(repo), accept=False)


def _mark(repo: pygit2.Repository, fact_id: str, by: str, accept: bool) -> tuple[Fact, bool]:
    secrets.remember_config(_config(repo), os.environ)
    stored = store.append(repo, lambda facts: memory.marked(facts, fact_id, by, accept), MEMORY)
    return store.read(repo).facts[fact_id.strip()], bool(stored)


def person_add(repo: pygit2.Repository, text: str, paths: Sequence[str]) -> Added:
    """``git agentrun memory add``: a person's fact, accepted."""
    secrets.remember_config(_config(repo), os.environ)
    login = user_login(repo)
    actor = HumanActor(login=login)
    return add(repo, text, login, accepted=True, actor=actor, paths=paths, over_forgotten=True)


def facts(repo: pygit2.Repository) -> dict[str, Fact]:
    return store.read(repo).facts


def _config(repo: pygit2.Repository) -> Config:
    """The working tree's config, for the secret variables it names (none: the default)."""
    if not repo.workdir:
        return Config()
    try:
        return load_config(Path(repo.workdir))
    except AgentrunError:
        return Config()
