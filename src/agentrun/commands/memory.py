"""Facts across builds (``refs/agentrun/memory``): adding, accepting, forgetting, listing.

Who adds a fact decides its first state. Deterministic sources (a verify command that
passed, setup that worked) and people add ``accepted`` facts; agents (``git agentrun
agent remember``) and code-review findings that recurred across rounds add ``proposed``
ones, because agents read untrusted issue text: nothing they write reaches a later
prompt until a person accepts it. The same text is never added twice. Every text is
scrubbed of secrets before it is compared or written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import pygit2

from agentrun import secrets
from agentrun.config import Config
from agentrun.errors import AgentrunError
from agentrun.events import (
    Actor,
    HumanActor,
    KernelActor,
    MemoryAccepted,
    MemoryAdded,
    MemoryForgotten,
)
from agentrun.gitrepo import user_login
from agentrun.kernel import memory
from agentrun.kernel.draft import Draft
from agentrun.kernel.memory import Fact
from agentrun.store import memory as store

MAX_TEXT = 2000  # characters of one fact: a fact is a sentence or two, not a document
MAX_PATHS = 20
MAX_PATH = 200


class FactError(AgentrunError):
    """A memory command that cannot be done: one line saying why."""


@dataclass(frozen=True)
class Added:
    fact: Fact
    new: bool  # False: the same text was already a fact (``fact`` is that one)


def clean_text(text: str) -> str:
    """The fact's text as it is stored: stripped, scrubbed, checked."""
    text = secrets.scrub(text.strip())
    if not text:
        raise FactError("the fact is empty: say what later builds should know")
    if len(text) > MAX_TEXT:
        raise FactError(f"the fact has {len(text):,} characters; at most {MAX_TEXT:,}")
    return text


def clean_paths(paths: Sequence[str]) -> tuple[str, ...]:
    """Path globs (``.gitignore`` lines, as verify ``paths``), checked."""
    if len(paths) > MAX_PATHS:
        raise FactError(f"{len(paths)} --path globs; at most {MAX_PATHS}")
    for path in paths:
        if not path.strip() or "\n" in path or len(path) > MAX_PATH:
            raise FactError(
                f"--path {path!r} is not a glob (one line, at most {MAX_PATH} characters, "
                'such as "src/api/**")'
            )
    return tuple(p.strip() for p in paths)


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
    """Add a fact unless one says the same already; returns the fact and whether it is new.

    A fact the same text already made that is only proposed is accepted by an
    ``accepted`` add (a person, or a command that passed, vouches for it now). A forgotten
    fact's text comes back only when ``over_forgotten`` (a person adds it again); a
    command that passes again does not revive what a person forgot.
    """
    text, globs = clean_text(text), clean_paths(paths)
    out: list[Added] = []

    def decide(facts: dict[str, Fact]) -> list[Draft]:
        live = {k: f for k, f in facts.items() if f.state != "forgotten"}
        twin = memory.same_text(live if over_forgotten else facts, text)
        if twin is not None:
            out[:] = [Added(twin, False)]
            if accepted and twin.state == "proposed":
                return [Draft(MemoryAccepted(id=twin.id, by=who), actor)]
            return []
        fact_id = memory.next_id(facts)
        state = "accepted" if accepted else "proposed"
        payload = MemoryAdded(
            id=fact_id, text=text, who=who, build=build, phase=phase, paths=globs, state=state
        )
        return [Draft(payload, actor)]

    stored = store.append(repo, decide, "refs/agentrun/memory")
    last = stored[-1].event.payload if stored else None
    if isinstance(last, MemoryAdded):
        return Added(store.read(repo).facts[last.id], True)
    return Added(store.read(repo).facts[out[0].fact.id], False)


def learned(repo: pygit2.Repository, text: str, who: str, build: str, phase: str) -> Added | None:
    """A deterministic source's fact (``verify``, ``setup``), accepted at once. A failure to
    write it is not the build's: None, and the build goes on."""
    try:
        return add(repo, text, who, accepted=True, actor=KernelActor(), build=build, phase=phase)
    except AgentrunError:
        return None


def find(facts: dict[str, Fact], fact_id: str) -> Fact:
    found = facts.get(fact_id.strip())
    if found is None:
        known = "`git agentrun memory list` lists them"
        raise FactError(f"no fact {fact_id!r} in refs/agentrun/memory: {known}")
    return found


def accept(repo: pygit2.Repository, fact_id: str, login: str | None = None) -> tuple[Fact, bool]:
    """A person accepts a proposed fact; returns it and whether this changed it."""
    by = login or user_login(repo)
    return _mark(repo, fact_id, by, accept=True)


def forget(repo: pygit2.Repository, fact_id: str, login: str | None = None) -> tuple[Fact, bool]:
    """A person forgets a fact: no later prompt carries it, on any clone that syncs."""
    by = login or user_login(repo)
    return _mark(repo, fact_id, by, accept=False)


def _mark(repo: pygit2.Repository, fact_id: str, by: str, accept: bool) -> tuple[Fact, bool]:
    secrets.remember_config(_config(repo), os.environ)
    changed: list[bool] = []

    def decide(facts: dict[str, Fact]) -> list[Draft]:
        fact = find(facts, fact_id)
        if fact.state == "forgotten":
            if accept:
                raise FactError(
                    f"fact {fact.id} was forgotten by {fact.by}; a forgotten fact stays "
                    "forgotten (add its text again with `git agentrun memory add`)"
                )
            changed[:] = [False]
            return []
        if accept and fact.state == "accepted":
            changed[:] = [False]
            return []
        changed[:] = [True]
        made = MemoryAccepted if accept else MemoryForgotten
        return [Draft(made(id=fact.id, by=by), HumanActor(login=by))]

    store.append(repo, decide, "refs/agentrun/memory")
    return store.read(repo).facts[fact_id.strip()], changed[0]


def person_add(repo: pygit2.Repository, text: str, paths: Sequence[str]) -> Added:
    """``git agentrun memory add``: a person's fact, accepted."""
    secrets.remember_config(_config(repo), os.environ)
    login = user_login(repo)
    actor = HumanActor(login=login)
    return add(repo, text, login, accepted=True, actor=actor, paths=paths, over_forgotten=True)


def facts(repo: pygit2.Repository) -> dict[str, Fact]:
    return store.read(repo).facts


def as_json(fact: Fact) -> dict[str, object]:
    return {
        "id": fact.id,
        "state": fact.state,
        "text": fact.text,
        "who": fact.who,
        "build": fact.build or None,
        "phase": fact.phase or None,
        "paths": list(fact.paths),
        "by": fact.by or None,
        "added_at": fact.added_at.isoformat(),
    }


def _config(repo: pygit2.Repository) -> Config:
    """The working tree's config, for the secret variables it names (none: the default)."""
    from pathlib import Path

    from agentrun.config import load_config

    if not repo.workdir:
        return Config()
    try:
        return load_config(Path(repo.workdir))
    except AgentrunError:
        return Config()
