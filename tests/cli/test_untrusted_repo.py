"""A repository another account owns (an unpacked sdist keeps its archive's owner) is one
line and exit 1, as git's own safe.directory check would say, not a crash."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from runner.helpers import cli_env, run_cli


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another account needs root")
def test_a_repository_owned_by_another_account_is_one_line(tmp_path: Path) -> None:
    repo = tmp_path / "unpacked"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=cli_env())
    os.chown(repo, 12345, 12345)
    for command in (("status",), ("run", "Fix the pager")):
        done = run_cli(repo, *command)
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and "internal error" not in done.stderr
        assert "owned by another account" in done.stderr
        assert "git config --global --add safe.directory" in done.stderr
