"""The reduced-state cache: ``.git/agentrun/cache/<slug>.json`` holds ``{tip, state}``.

Unchanged tip: use it. Cached tip found behind the new tip: apply only the new events.
Otherwise replay the log. The cache is disposable; the log is the truth (DESIGN §2).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pygit2
from pydantic import ValidationError

from agentrun import __version__
from agentrun.errors import UnknownBuildError
from agentrun.gitrepo import agentrun_dir
from agentrun.kernel.evolve import evolve, replay
from agentrun.kernel.state import BuildState
from agentrun.kernel.summary import summarize
from agentrun.store.log import EventLog, check_slug
from agentrun.store.summary import record


class StateCache:
    """``summaries``: keep the summary index (store/summary.py) in step with every state
    put here; off only for ``status``, which writes the index once for all it read."""

    def __init__(self, repo: pygit2.Repository, summaries: bool = True) -> None:
        self.root = agentrun_dir(repo) / "cache"
        self.summaries = summaries

    def _path(self, slug: str) -> Path:
        return self.root / f"{check_slug(slug)}.json"

    def get(self, slug: str) -> tuple[str, BuildState] | None:
        try:
            raw = json.loads(self._path(slug).read_bytes())
            if raw.get("agentrun") != __version__:
                return None  # another release folds events its own way: replay
            return raw["tip"], BuildState.model_validate(raw["state"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError):
            return None  # absent or from another version: replay

    def put(self, slug: str, tip: str, state: BuildState) -> None:
        if self.summaries:
            record(str(self.root.parent), slug, tip, summarize(state))
        data = json.dumps(
            {"agentrun": __version__, "tip": tip, "state": state.model_dump(mode="json")}
        )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            # Readable as the log is: an isolated agent's account reads it (agent/quick.py).
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "w") as fh:
                fh.write(data)
            os.replace(tmp, self._path(slug))
        except OSError:
            return  # a read-only .git (an agent's sandbox): the cache is only a shortcut


def load_state(
    log: EventLog, cache: StateCache, slug: str, tip: str | None = None
) -> tuple[str, BuildState]:
    """The state at ``tip`` (the live tip by default), incrementally from the cache."""
    tip = tip or log.tip_oid(slug)
    if tip is None:
        from agentrun.store.archive import archived

        if slug in archived(log.repo):
            raise UnknownBuildError(
                f"build {slug} is archived (its proposal was merged or closed): nothing more "
                f"happens to it; `git agentrun log {slug}` shows its history"
            )
        raise UnknownBuildError(f"no build named {slug!r}: `git agentrun status` lists the builds")
    cached = cache.get(slug)
    if cached is not None and cached[0] == tip:
        return cached
    state = None
    if cached is not None and _behind(log.repo, tip, cached[0]):
        state = cached[1]
        for stored in log.walk(tip, stop=cached[0]):
            state = evolve(state, stored.event)
    if state is None:
        state = replay(slug, (stored.event for stored in log.walk(tip)))
    cache.put(slug, tip, state)
    return tip, state


def _behind(repo: pygit2.Repository, tip: str, cached: str) -> bool:
    """Whether the cached tip is an ancestor of ``tip`` (a pruned one is not)."""
    try:
        return cached in repo and bool(repo.descendant_of(tip, cached))
    except (pygit2.GitError, ValueError):
        return False
