"""What every benchmark shares: a pinned git identity for the repositories it makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def empty_repo(folder: Path) -> tuple[Path, dict[str, str]]:
    """``folder/repo``, a repository with one empty commit, and the environment to run
    ``git agentrun`` there with: this venv's scripts first on PATH, the identity pinned
    (this process gets the identity too)."""
    bindir = str(Path(sys.executable).parent)  # where `git-agentrun` is installed
    env = {**os.environ, **IDENTITY, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    os.environ.update(IDENTITY)
    path = folder / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    commit = ["git", "commit", "-q", "--allow-empty", "-m", "start"]
    subprocess.run(commit, cwd=path, check=True, env=env)
    return path, env
