"""A `.agentrun.toml` that cannot be read is one line and exit 1 for every command reading it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from runner.helpers import run_cli


def not_utf8(path: Path) -> None:
    path.write_bytes(b'[policy]\nname = "\xff\xfe"\n')


def a_folder(path: Path) -> None:
    path.mkdir()


def too_deep(path: Path) -> None:
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "not-utf8": (not_utf8, "not UTF-8 (byte 17)"),
    "a-folder": (a_folder, "it must be a file"),
    "too-deep": (too_deep, "nest too deep"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", [("run", "Fix it"), ("doctor",), ("status",)])
def test_an_unreadable_config_is_one_line(
    case: str, command: tuple[str, ...], repo_path: Path
) -> None:
    make, said = CASES[case]
    make(repo_path / ".agentrun.toml")
    done = run_cli(repo_path, *command)
    if command == ("status",):
        assert done.returncode == 0, done.stderr  # status reads no config: it lists builds
        return
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert ".agentrun.toml" in lines[0]
    assert run_cli(repo_path, "status", "--json").stdout.count('"slug"') == 0  # nothing made
