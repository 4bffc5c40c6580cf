"""Reading `.agentrun.toml` (DESIGN §10): one loader, errors in the words the user wrote.

A wrong key or value fails with the file, the key path the user wrote and what was
expected, in TOML's words (an array of strings, ``[[verify]]``), with "did you mean"
for a misspelled role or runtime. An empty file is valid. The config a build runs under
is snapshotted into its ``build.created`` event, so replay never depends on today's file.
"""

from __future__ import annotations

import difflib
import json
import shlex
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentrun.config.schema import Config
from agentrun.errors import ConfigError

CONFIG_FILE = ".agentrun.toml"


def parse_config(text: str, source: str) -> Config:
    """Validate TOML text; ``source`` names the file in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{source}: arrays or tables nest too deep to read") from None
    config = config_from_data(data, source)
    routes = {f"{source} at `roles.{r}`": (r, e) for r, e in config.roles.items()}
    if config.candidates.implement:
        routes[f"{source} at `candidates.implement`"] = ("implement", config.candidates.implement)
    for role, ladder in config.ladder.items():
        routes[f"{source} at `ladder.{role}.rungs`"] = (role, ladder.rungs)
    check_roles(config, routes)
    return config


def config_from_data(data: dict[str, Any], source: str) -> Config:
    """Validate a parsed config; the errors speak of the TOML the user wrote."""
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(exc.errors()[0], source)) from None


def _explain(err: Any, source: str) -> str:
    loc = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
    path = ".".join(loc)
    where = f"{source} at `{path}`" if path else source
    value = err.get("input")
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown key"
    steps = loc in (["verify"], ["finalize"])
    if err["type"] == "tuple_type" and steps and isinstance(value, dict):
        name = loc[0]
        return (
            f"{source}: [{name}] is one table, but each {name} step is an entry of an array "
            f"of tables: write [[{name}]] (two brackets), once per step"
        )
    if err["type"] in ("tuple_type", "list_type") and isinstance(value, str):
        key = loc[-1]
        items = shlex.split(value) if key in ("command", "extra_args") else [value]
        fix = "[" + ", ".join(json.dumps(item) for item in items) + "]"
        return f"{where}: expects an array of strings, not a string: write {key} = {fix}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {msg}"


def _hint(said: str) -> str:
    """``: did you mean 'x'? `` when there is a near name, else a space."""
    return f": {said}" if said else " "


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def check_roles(config: Config, routes: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    """Refuse a role or runtime name the config does not know.

    ``routes`` maps where the user wrote it (``FILE at `roles.plan```, ``--role x=y``) to
    the role and its runtimes. Only configs people write are checked: a build's config
    snapshot is replayed as recorded.
    """
    valid_roles, runtimes = config.role_names(), config.runtime_names()
    for where, (role, entries) in routes.items():
        if role not in valid_roles:
            raise ConfigError(
                f"{where}: no role {role!r}{_hint(_did_you_mean(role, valid_roles))}"
                f"(roles: {', '.join(valid_roles)})"
            )
        for entry in entries:
            name = entry.partition(":")[0]
            if name not in runtimes:
                raise ConfigError(
                    f"{where}: no runtime {name!r}{_hint(_did_you_mean(name, runtimes))}"
                    f"(configure [runtimes.{name}], or use one of: {', '.join(runtimes)})"
                )


def check_role_overrides(overrides: dict[str, str], config: Config) -> None:
    """``--role ROLE=RUNTIME``: the names the file may use."""
    check_roles(config, {f"--role {r}={n}": (r, (n,)) for r, n in overrides.items()})


def load_config(root: Path) -> Config:
    """The repository's config from its working tree; an absent file means defaults."""
    path = root / CONFIG_FILE
    if not path.exists():
        return Config()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot be read ({exc.strerror or exc}): it must be a file"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start}): TOML files are UTF-8") from None
    return parse_config(text, str(path))
