"""Process trees: the deadline holds even when a program never reads its input. Who a
process is, read from /proc: what psutil says, to the bit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from agentrun import liveness, procs


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


def test_start_times_are_psutils_to_the_bit() -> None:
    seen = 0
    for pid in psutil.pids():
        try:
            created = psutil.Process(pid).create_time()
        except psutil.Error:
            continue
        assert liveness.start_time(pid) == created
        seen += 1
    assert seen > 1
    assert procs.me().start == psutil.Process().create_time()


def test_a_process_gone_or_reused_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = procs.start_time(child.pid)
    assert start is not None and procs.is_alive(child.pid, start)
    assert not procs.is_alive(child.pid, start - 5)  # the pid, reused by another process
    child.kill()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped
    assert not procs.is_alive(child.pid, start)  # a zombie until reaped
    child.wait()
    assert not procs.is_alive(child.pid, start)
    assert procs.start_time(child.pid) is None
