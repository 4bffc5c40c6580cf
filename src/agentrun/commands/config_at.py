"""The ``.agentrun.toml`` a commit holds: what a build started from a push or a CI job
runs under (never a working tree's, which may be a proposal's)."""

from __future__ import annotations

import pygit2

from agentrun.config import CONFIG_FILE, Config, config_from_data, parse_config
from agentrun.errors import ConfigError


def config_at(
    repo: pygit2.Repository,
    sha: str,
    *,
    path: str = CONFIG_FILE,
    where: str = "",
    forge: str | None = None,
    label: str | None = None,
) -> Config:
    """The config file ``path`` of commit ``sha`` (``where`` names the commit in errors:
    a branch, else its short id), with ``[forge] kind`` set to ``forge`` and the trigger
    ``label`` when given. A missing ``.agentrun.toml`` is the default config; a missing
    file named otherwise is an error."""
    where = where or sha[:10]
    source = f"{where}:{path}"
    try:
        entry = repo[sha].peel(pygit2.Tree)[path]
    except KeyError:
        if path != CONFIG_FILE:
            raise ConfigError(f"there is no {path} on {where}") from None
        config = Config()
    else:
        blob = repo[entry.id]
        if not isinstance(blob, pygit2.Blob):
            raise ConfigError(f"{source} is not a file")
        config = parse_config(blob.data.decode("utf-8", "replace"), source)
    if forge is None and not label:
        return config
    data = config.model_dump(mode="json")
    if forge is not None:
        data["forge"]["kind"] = forge
    if label:
        data["forge"]["label"] = label
    return config_from_data(data, source)
