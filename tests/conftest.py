"""Shared fixtures: real git repositories in temporary folders, identity pinned."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from support.prism import github_api, github_env  # noqa: F401  (GitHub's API on Prism, for any test)

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def _git_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    home = tmp_path_factory.mktemp("home")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test Author\n\temail = author@example.com\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    monkeypatch.setenv("HOME", str(home))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    # libgit2 looked up the global config folder once, at import: point it here too.
    paths = pygit2.settings.search_path
    level = pygit2.enums.ConfigLevel.GLOBAL
    before = paths[level]
    paths[level] = str(home)
    yield
    paths[level] = before


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=os.environ.copy()
    )
    return out.stdout.strip()


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README.md": "hello\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def repo(repo_path: Path) -> Iterator[pygit2.Repository]:
    yield pygit2.Repository(str(repo_path))
