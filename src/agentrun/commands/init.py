"""``git agentrun init``: write a commented ``.agentrun.toml``."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from agentrun.config import CONFIG_FILE, parse_config
from agentrun.errors import AgentrunError


def template_text() -> str:
    return resources.files("agentrun").joinpath("templates/agentrun.toml").read_text("utf-8")


def init(root: Path, force: bool = False) -> Path:
    path = root / CONFIG_FILE
    if path.exists() and not force:
        raise AgentrunError(f"{path} already exists: edit it, or pass --force to overwrite it")
    text = template_text()
    parse_config(text, str(path))  # the template must stay valid
    path.write_text(text, encoding="utf-8")
    return path
