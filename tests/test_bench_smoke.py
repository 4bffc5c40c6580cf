"""The benchmarks still run: ``bench/all.py --quick`` runs every script once, and each
prints the lines listed here, its ratios in the table.

No timing is asserted here (STYLE.md §14): the figures are for people to read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
# What each script prints: one entry per script, sorted; the `ratio ` lines must be rows
# of bench/all.py's table, the others lines of the script's output.
RATIO_LINES = {
    "action_startup.py": [
        "ratio cold-start/pip-install-wheel:",
        "ratio restored-start/pip-install-wheel:",
    ],
    "append.py": ["ratio store/pygit2:", "ratio cli/store:"],
    "caching.py": ["ratio cached/uncached input cost:"],
    "candidates.py": ["ratio 3-candidates/1:"],
    "checks_gate.py": ["ratio gated/ungated build:", "ratio waiting-sweep/parked-sweep:"],
    "cli.py": ["ratio agentrun --version / git --version:", "--version: "],
    "decide.py": ["ratio cold/sqlite", "warm at "],
    "demo.py": ["ratio overhead/git-commits:"],
    "forge.py": ["ratio pushed/plain-push:", "ratio action-sweep/sweep:"],
    "gitcli.py": ["ratio hardened/bare:"],
    "hook.py": [
        "ratio ordinary branch hooked/plain:",
        "ratio build branch hooked/plain:",
        "ratio goal branch hooked/plain:",
    ],
    "install.py": ["ratio first-command readme/before:", "ratio site-packages readme/before:"],
    "isolation.py": ["ratio namespace/none (sh agent):", "ratio user/none (python agent):"],
    "mcp.py": ["ratio mcp call/shell verb:", "ratio mcp start/shell verb:"],
    "memory.py": ["ratio build with ", "memory read + block: "],
    "notes.py": ["ratio concurrent/one-writer:", "round 1: present 10/10 (0% lost)"],
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


def all_py(
    *args: str | Path, cwd: Path, bench: Path = BENCH, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``bench/all.py ARGS`` (or the copy of it in ``bench``), run in ``cwd``."""
    return subprocess.run(
        [sys.executable, str(bench / "all.py"), *map(str, args)],
        cwd=cwd,
        env={**os.environ, "TMPDIR": str(cwd)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def in_table(table: str, script: str, figure: str, text: str) -> bool:
    row = re.compile(rf"{re.escape(script)} {{2,}}{re.escape(figure)} {{2,}}{re.escape(text)}")
    return any(row.fullmatch(line) for line in table.splitlines())


def test_every_bench_script_is_smoke_tested() -> None:
    scripts = [p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")]
    assert sorted(scripts) == sorted([*RATIO_LINES, "all.py"])
    assert list(RATIO_LINES) == sorted(RATIO_LINES)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, dict[str, Any]]:
    """One ``bench/all.py --quick`` of every script: its table, its stderr (the failed
    scripts' own), and its --json."""
    cwd = tmp_path_factory.mktemp("bench")
    args = ("--quick", "--timeout", 600, "--json", cwd / "quick.json")
    done = all_py(*args, cwd=cwd, timeout=3600)
    return done.stdout, done.stderr, json.loads((cwd / "quick.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RATIO_LINES))
def test_bench_runs_quick(script: str, quick_run: tuple[str, str, dict[str, Any]]) -> None:
    table, stderr, found = quick_run
    ran = found["benchmarks"][script]
    assert ran["error"] is None, f"{ran['error']}\n{stderr[-3000:]}"
    rows = [f"{f['figure']}: {f['text']}" for f in ran["figures"]]
    for prefix in RATIO_LINES[script]:
        where = rows if prefix.startswith("ratio ") else ran["output"]
        assert any(line.startswith(prefix) for line in where), (prefix, where)
    for figure in ran["figures"]:
        assert in_table(table, script, figure["figure"], figure["text"]), table


# A benchmark whose ratio is the next of VALUES at each run (it counts its runs in `runs`).
FIGURES = """\
import pathlib, sys
runs = pathlib.Path("runs")
n = int(runs.read_text()) if runs.exists() else 0
runs.write_text(str(n + 1))
value = VALUES[n % len(VALUES)]
print("a header line: 7")
print(f"ratio x/y: {value} (target <= 1.5: yes)")
print("ratio start/server: claude 1.25, codex 2.5")
print(f"warm at 10,000 events: {value * 10} ms (target < 20 ms: yes)")
print("quick" if "--quick" in sys.argv else "full")
"""

# A benchmark that never ends, nor does the process it starts (its pid in {pid}).
HUNG = """\
import pathlib, subprocess, time
child = subprocess.Popen(["sleep", "600"])
pathlib.Path({pid!r}).write_text(str(child.pid))
time.sleep(600)
"""


def ended(pid: int) -> bool:
    """The process is gone, or a zombie its new parent has not reaped yet."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def figures(*values: float) -> str:
    return f"VALUES = {list(values)!r}\n{FIGURES}"


def bench_folder(where: Path, **scripts: str) -> Path:
    """A folder holding a copy of all.py and ``scripts`` (name without .py: source)."""
    bench = where / "bench"
    bench.mkdir(parents=True)
    shutil.copy(BENCH / "all.py", bench)
    for name, source in scripts.items():
        (bench / f"{name}.py").write_text(source)
    return bench


def test_all_py_tables_the_ratios_and_targets_and_says_which_script_failed(
    tmp_path: Path,
) -> None:
    bench = bench_folder(
        tmp_path,
        figures=figures(1.5),
        broken='print("ratio a/b: 1")\nraise SystemExit("no repository here")\n',
        silent='print("done")\n',
        hung=HUNG.format(pid=str(tmp_path / "pid")),
        _helper="raise SystemExit(1)\n",
    )
    args = ("--quick", "--timeout", 5, "--json", tmp_path / "out.json")
    done = all_py(*args, cwd=tmp_path, bench=bench)
    assert done.returncode == 1
    failed = "all.py: 3 benchmark(s) failed: broken.py, hung.py, silent.py"
    assert done.stderr.splitlines()[-1] == failed
    assert ended(int((tmp_path / "pid").read_text()))  # the hung script's child, with it
    table = done.stdout
    assert in_table(table, "figures.py", "ratio x/y", "1.5 (target <= 1.5: yes)")
    assert in_table(table, "figures.py", "ratio start/server", "claude 1.25, codex 2.5")
    assert in_table(table, "figures.py", "warm at 10,000 events", "15.0 ms (target < 20 ms: yes)")
    assert in_table(table, "broken.py", "FAILED", "exited 1: no repository here")
    assert in_table(table, "silent.py", "FAILED", "printed no ratio line")
    assert in_table(table, "hung.py", "FAILED", "timed out after 5 s")
    assert "a header line" not in table and "_helper" not in table
    found = json.loads((tmp_path / "out.json").read_text())["benchmarks"]
    assert set(found) == {"broken.py", "figures.py", "hung.py", "silent.py"}
    assert found["figures.py"]["output"][-1] == "quick"
    assert [f["values"] for f in found["figures.py"]["figures"]] == [
        {"": 1.5},
        {"claude": 1.25, "codex": 2.5},
        {"": 15.0},
    ]


def test_all_py_runs_shows_the_median_and_compare_flags_what_got_worse(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    bench = bench_folder(old, figures=figures(1.0, 3.0, 1.1))
    done = all_py("--runs", 3, "--json", old / "figures.json", cwd=old, bench=bench)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith("median of 3 runs")
    assert in_table(done.stdout, "figures.py", "ratio x/y", "1.1 (target <= 1.5: yes)")
    assert in_table(
        done.stdout, "figures.py", "warm at 10,000 events", "11.0 ms (target < 20 ms: yes)"
    )

    bench = bench_folder(new, figures=figures(1.3))
    assert all_py("--json", new / "figures.json", cwd=new, bench=bench).returncode == 0
    compared = all_py("--compare", old / "figures.json", new / "figures.json", cwd=tmp_path)
    assert compared.returncode == 1, compared.stdout + compared.stderr
    lines = compared.stdout.splitlines()
    rows = {cells[1]: cells for cells in (re.split(" {2,}", line) for line in lines[1:-1])}
    assert rows["ratio x/y"][2:] == ["1.1", "1.3", "+18.2%", "WORSE"]
    assert rows["warm at 10,000 events"][2:] == ["11", "13", "+18.2%", "WORSE"]
    assert rows["ratio start/server (claude)"][2:] == ["1.25", "1.25", "+0.0%"]
    assert compared.stdout.splitlines()[-1] == "2 figure(s) more than 10% worse"
    same = all_py("--compare", old / "figures.json", old / "figures.json", cwd=tmp_path)
    assert same.returncode == 0, same.stdout
