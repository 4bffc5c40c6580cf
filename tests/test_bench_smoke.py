"""The benchmarks still run: each script with ``--quick`` exits 0 and prints its ratio.

No timing is asserted here (STYLE.md §14): the figures are for people to read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
RATIO_LINES = {
    "append.py": ["ratio store/pygit2:", "ratio cli/store:"],
    "action_startup.py": [
        "ratio cold-start/pip-install-wheel:",
        "ratio restored-start/pip-install-wheel:",
    ],
    "decide.py": ["ratio cold/sqlite", "warm at "],
    "caching.py": ["ratio cached/uncached input cost:"],
    "candidates.py": ["ratio 3-candidates/1:"],
    "checks_gate.py": ["ratio gated/ungated build:", "ratio waiting-sweep/parked-sweep:"],
    "cli.py": ["ratio agentrun --version / git --version:", "--version: "],
    "demo.py": ["ratio overhead/git-commits:"],
    "forge.py": ["ratio pushed/plain-push:", "ratio action-sweep/sweep:"],
    "gitcli.py": ["ratio hardened/bare:"],
    "mcp.py": ["ratio mcp call/shell verb:", "ratio mcp start/shell verb:"],
    "memory.py": ["ratio build with ", "memory read + block: "],
    "notes.py": ["ratio concurrent/one-writer:", "round 1: present 10/10 (0% lost)"],
    "install.py": ["ratio install+demo after/before:", "ratio site-packages after/before:"],
    "isolation.py": ["ratio namespace/none (sh agent):", "ratio user/none (python agent):"],
    "hook.py": [
        "ratio ordinary branch hooked/plain:",
        "ratio build branch hooked/plain:",
        "ratio goal branch hooked/plain:",
    ],
    "realbuild.py": ["ratio build/bare-tests:"],
    "runtimes.py": ["ratio start-overhead/server:", "ratio end-overhead/server:"],
    "secrets.py": ["recall: ", "false-positive candidates in rich", "ratio scrub new/old:"],
    "status.py": [
        "ratio status/for-each-ref:",
        "ratio status --json/for-each-ref:",
        "ratio cold status/for-each-ref:",
        "ratio status with leases/for-each-ref:",
    ],
    "sweep.py": ["ratio sweep warm/baseline:", "ratio sweep() in-process/baseline:"],
    "tasks.py": [
        "ratio parallel/serial:",
        "ratio parallel/one-task:",
        "ratio integrate/git-merge:",
    ],
    "verbs.py": ["ratio agent context/baseline:", "ratio agent done/baseline:"],
}


def test_every_bench_script_is_smoke_tested() -> None:
    scripts = [p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")]
    assert sorted(scripts) == sorted(RATIO_LINES)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RATIO_LINES))
def test_bench_runs_quick(script: str, tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for prefix in RATIO_LINES[script]:
        assert any(line.startswith(prefix) for line in lines), done.stdout
    assert "Traceback" not in done.stderr
