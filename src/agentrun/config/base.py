"""What every table of `.agentrun.toml` shares: a frozen model that refuses unknown keys,
and the spelling of environment variable names and patterns."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!]+$")


class Table(BaseModel):
    """A table of `.agentrun.toml`: frozen, and no key it does not name."""

    model_config = ConfigDict(frozen=True, extra="forbid")
