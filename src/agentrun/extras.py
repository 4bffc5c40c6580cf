"""The optional parts of git-agentrun (pyproject's extras), and how to add one.

A forge's library is an extra: ``pip install git-agentrun`` runs local builds without it.
Whether it is there is asked of the import system, not imported, so asking stays cheap.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from agentrun.errors import ConfigError

DISTRIBUTION = "git-agentrun"
# extra -> the module it brings, and the distribution that module comes from
EXTRAS = {"github": ("github", "PyGithub"), "gitlab": ("gitlab", "python-gitlab")}


def installed(extra: str) -> bool:
    """Whether the extra's module can be imported; an extra not listed needs nothing."""
    if extra not in EXTRAS:
        return True
    spec = importlib.util.find_spec(EXTRAS[extra][0])
    return spec is not None and spec.origin is not None  # not a stray folder of that name


def install_command(extra: str) -> str:
    """The command that adds ``extra`` to this installation, with the tool that made it.

    pipx writes ``pipx_metadata.json`` and uv ``uv-receipt.toml`` at the root of the venv
    they make for a tool; anything else is a venv pip installs into. pipx injects the
    extra's requirements into the tool's venv; uv reinstalls when the request changed.
    """
    wanted = f"'{DISTRIBUTION}[{extra}]'"
    root = Path(sys.prefix)
    if (root / "pipx_metadata.json").is_file():
        # inject keeps the installed git-agentrun (a wheel or a clone stays what it was)
        return " ".join(["pipx inject", DISTRIBUTION, *(f"'{r}'" for r in requirements(extra))])
    if (root / "uv-receipt.toml").is_file():
        return f"uv tool install {wanted}"
    return f"pip install {wanted}"


def require(extra: str, needed_by: str) -> None:
    """Refuse, in one line naming the install command, when ``extra`` is missing."""
    if not installed(extra):
        raise ConfigError(
            f"{needed_by} needs {EXTRAS[extra][1]}, which is not installed here: "
            f"{install_command(extra)}"
        )


def requirements(extra: str) -> list[str]:
    """The extra's requirements as the installed metadata lists them (pyproject's)."""
    from importlib import metadata

    try:
        listed = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        listed = []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    found = [r.partition(";")[0].strip() for r in listed if marker.search(r.partition(";")[2])]
    return found or [EXTRAS[extra][1]]
