"""The per-build HOME agents get, and the agent CLIs' own login files put into it.

One HOME per build, kept across its sessions (under ``.git/agentrun/homes/<slug>``), so
Claude Code's and Codex's session resume finds what the last session wrote. The real
HOME stays hidden: of it, agents see only the login and config files of the agent CLIs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2

from agentrun.gitrepo import AGENTRUN_EMAIL, AGENTRUN_NAME, agentrun_dir

# Read-only inside the sandbox: the CLIs read these and never need to write them.
LOGIN_FILES = (
    ".claude/.credentials.json",
    ".claude/settings.json",
    ".codex/auth.json",
    ".codex/config.toml",
)
# Copied once per build: Claude Code rewrites this file at every start.
COPIED_FILES = (".claude.json",)


def home_path(repo: pygit2.Repository, slug: str) -> Path:
    return agentrun_dir(repo) / "homes" / slug


def build_home(repo: pygit2.Repository, slug: str) -> Path:
    home = home_path(repo, slug)
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return home.resolve()


def login_files(real_home: Path) -> list[str]:
    """The agent CLIs' login and config files the user has, relative to their HOME."""
    found = [name for name in LOGIN_FILES if (real_home / name).is_file()]
    found += sorted(p.name for p in real_home.glob(".aider*") if p.is_file() and not p.is_symlink())
    return found


def furnish(repo: pygit2.Repository, home: Path, real_home: Path, copy_login: bool) -> list[str]:
    """Prepare ``home`` for a session; returns the login files to bind read-only.

    With ``copy_login`` (no mount namespace to bind them in), the login files are copied.
    Git's identity comes from the repository's, so the agent's own commits work.
    """
    for name in COPIED_FILES:
        if (real_home / name).is_file() and not (home / name).exists():
            shutil.copyfile(real_home / name, home / name)
    names = login_files(real_home)
    for name in names:
        target = home / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if copy_login:
            shutil.copyfile(real_home / name, target)
        elif not target.exists():
            target.touch()  # the mount point of the read-only bind
    config = repo.config
    name = _get(config, "user.name") or AGENTRUN_NAME
    email = _get(config, "user.email") or AGENTRUN_EMAIL
    (home / ".gitconfig").write_text(
        f"[user]\n\tname = {name}\n\temail = {email}\n[safe]\n\tdirectory = *\n",
        encoding="utf-8",
    )
    return [] if copy_login else names


def _get(config: pygit2.Config, key: str) -> str:
    try:
        return str(config[key])
    except KeyError:
        return ""
