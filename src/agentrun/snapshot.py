"""The config a build runs under, as ``build.created`` records it (DESIGN §3, §13).

A snapshot is written by one release and replayed by every later one, so it is read
tolerantly: a key a later release dropped or renamed is ignored, a value it no longer
accepts falls back to its default, and only a snapshot newer than this release is
refused ("upgrade agentrun"). The event keeps the snapshot as written: nothing recorded
is lost by reading it with today's model.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from agentrun.config import Config
from agentrun.errors import MalformedEventError
from agentrun.events.base import check_version

# Bump when the meaning of a key changes; `read` then needs an upgrade step for it.
SNAPSHOT_VERSION = 1
KEY = "snapshot"
# Each pass removes at least one offending key: a snapshot has far fewer than this.
MAX_REPAIRS = 200


def snapshot(config: Config) -> dict[str, Any]:
    """What ``build.created`` records: the config as JSON, with its snapshot version."""
    return {KEY: SNAPSHOT_VERSION, **config.model_dump(mode="json")}


def read(data: dict[str, Any], where: str = "the build's config snapshot") -> Config:
    """The ``Config`` of a snapshot written by this or any earlier release."""
    doc = copy.deepcopy(data)
    check_version(doc.pop(KEY, 1), SNAPSHOT_VERSION, where, "snapshot")
    for _ in range(MAX_REPAIRS):
        try:
            return Config.model_validate(doc)
        except ValidationError as exc:
            if not any(_drop(doc, _path(err["loc"])) for err in exc.errors()):
                raise MalformedEventError(
                    f"{where} cannot be read: {exc.errors()[0]['msg']}"
                ) from None
    raise MalformedEventError(f"{where} cannot be read: too many keys this release does not know")


def _path(loc: tuple[int | str, ...]) -> list[int | str]:
    # pydantic names validators in the location ("function-after[...]"): not data keys.
    return [p for p in loc if not (isinstance(p, str) and p.startswith("function-"))]


def _drop(doc: Any, path: list[int | str]) -> bool:
    """Remove what ``path`` names (or, when it names a missing key, its container)."""
    if not path:
        return False
    parent = doc
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        del parent[last]
        return True
    # A required key that is missing: the whole entry it belongs to goes.
    return _drop(doc, path[:-1])
