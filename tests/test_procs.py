"""Process trees: the deadline holds even when a program never reads its input."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentrun import procs


def test_a_program_that_ignores_a_large_stdin_still_times_out(tmp_path: Path) -> None:
    started = time.monotonic()
    done = procs.run_tree(
        ["sleep", "30"], cwd=tmp_path, env=dict(os.environ), timeout=1, stdin_text="x" * 300_000
    )
    assert done.timed_out and done.exit_code is None
    assert time.monotonic() - started < 10


def test_output_and_exit_code_come_back(tmp_path: Path) -> None:
    lines: list[str] = []
    done = procs.run_tree(
        ["sh", "-c", "cat; echo done; exit 3"],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=10,
        stdin_text="hello\n",
        on_line=lines.append,
    )
    assert (done.exit_code, done.output, lines) == (3, "hello\ndone\n", ["hello", "done"])
