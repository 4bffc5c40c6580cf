"""Every benchmark in one table: each ``bench/*.py`` run, its figures collected.

    .venv/bin/python bench/all.py [--quick] [--runs N] [--json FILE] [SCRIPT ...]
    .venv/bin/python bench/all.py --compare OLD.json NEW.json

Runs each script of this folder (not ``_*.py``, not this one) as a subprocess, or only the
SCRIPTs named, and prints one table of the figures they print: every line that starts with
``ratio `` (a figure against a baseline measured in the same run) and every line that
states a target (``(target < 20 ms: yes)``). ``--quick`` passes ``--quick`` to each script
(the smoke test). ``--runs N`` runs all of them N times, round after round, and shows the
median of each figure. ``--json FILE`` writes the figures, and each script's output, for
``--compare``, which shows two such files side by side with the change in % and flags a
figure more than 10% worse (higher is worse, unless its target says ``>``). A script that
fails, or prints no ratio, is a row saying so, and this script then exits 1; so does a
comparison that flags a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
WORSE = 0.10  # --compare flags a figure that got worse by more than this share
NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"
# "1.23 worst over lengths (target <= 1.5: yes)", "0.123x (…)": one value, then words
ONE_VALUE = re.compile(rf"^({NUMBER})")
# "claude 1.20, codex 1.31": one value per label (bench/runtimes.py)
LABELLED = re.compile(rf"^\S+ {NUMBER}(?:, \S+ {NUMBER})*$")


def values(text: str) -> dict[str, float]:
    """The numbers of a figure's text, by label ("" for a figure of one value)."""
    if LABELLED.match(text):
        pairs = (item.rsplit(" ", 1) for item in text.split(", "))
        return {label: float(number.replace(",", "")) for label, number in pairs}
    found = ONE_VALUE.match(text)
    return {"": float(found.group(1).replace(",", ""))} if found else {}


def higher_is_better(text: str) -> bool:
    return re.search(r"target >", text) is not None


@dataclass
class Row:
    """One figure of one script, ``figure: text`` as the script printed it in each run."""

    figure: str
    texts: list[str] = field(default_factory=list)

    def median(self) -> dict[str, float]:
        """The median of each value over the runs (the lower one of an even count, so it
        is a value some run printed)."""
        runs = [values(text) for text in self.texts]
        labels = dict.fromkeys(label for run in runs for label in run)
        return {
            label: statistics.median_low(run[label] for run in runs if label in run)
            for label in labels
        }

    def shown(self) -> str:
        """The text of the run whose value is the median, or the medians by label."""
        middle = self.median()
        if len(self.texts) == 1 or not middle:
            return self.texts[-1]
        if "" not in middle:
            return ", ".join(f"{label} {value:g}" for label, value in middle.items())
        return next(t for t in self.texts if values(t).get("") == middle[""])


def figure_lines(stdout: str) -> list[tuple[str, str]]:
    """The ratio lines and the target verdicts a script printed, as (figure, text)."""
    rows = []
    for line in stdout.splitlines():
        line = line.strip()
        if (line.startswith("ratio ") or "(target " in line) and ": " in line:
            figure, _, text = line.partition(": ")
            rows.append((figure, text))
    return rows


@dataclass
class Result:
    script: str
    rows: list[Row] = field(default_factory=list)
    error: str = ""
    output: list[str] = field(default_factory=list)  # stdout of the last run

    def add(self, stdout: str) -> None:
        self.output = stdout.splitlines()
        for figure, text in figure_lines(stdout):
            row = next((r for r in self.rows if r.figure == figure), None)
            if row is None:
                row = Row(figure)
                self.rows.append(row)
            row.texts.append(text)
        if not any(row.figure.startswith("ratio ") for row in self.rows):
            self.error = "printed no ratio line"


def scripts(names: list[str]) -> list[Path]:
    found = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))
    found = [p for p in found if p.resolve() != Path(__file__).resolve()]
    if not names:
        return found
    unknown = sorted(set(names) - {p.name for p in found})
    if unknown:
        sys.exit(f"all.py: no benchmark {', '.join(unknown)} in {BENCH}")
    return [p for p in found if p.name in names]


def run_one(script: Path, quick: bool, timeout: float | None, result: Result) -> None:
    argv = [sys.executable, str(script), *(["--quick"] if quick else [])]
    print(f"== {script.name}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    # A session of its own: a script that times out is ended with what it started.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        result.error = f"timed out after {timeout:g} s"
        return
    if proc.returncode != 0:
        last = (stderr.strip().splitlines() or ["(no output on stderr)"])[-1]
        result.error = f"exited {proc.returncode}: {last}"
        sys.stderr.write(stderr[-3000:])
        result.output = stdout.splitlines()
        return
    result.add(stdout)
    print(f"   {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def report(results: list[Result], runs: int, quick: bool) -> str:
    rows: list[tuple[str, ...]] = []
    for result in results:
        for row in result.rows:
            rows.append((result.script, row.figure, row.shown()))
        if result.error:
            rows.append((result.script, "FAILED", result.error))
    how = f"median of {runs} runs" if runs > 1 else "one run"
    count = f"{len(results)} benchmark{'' if len(results) == 1 else 's'}"
    title = f"bench/all.py: {count}, {how}{', --quick' if quick else ''}"
    return title + "\n" + table(rows, ("benchmark", "figure", "value"))


def as_json(results: list[Result], runs: int, quick: bool) -> dict[str, Any]:
    return {
        "schema": 1,
        "runs": runs,
        "quick": quick,
        "benchmarks": {
            r.script: {
                "error": r.error or None,
                "figures": [
                    {
                        "figure": row.figure,
                        "text": row.shown(),
                        "values": row.median(),
                        "higher_is_better": higher_is_better(row.shown()),
                    }
                    for row in r.rows
                ],
                "output": r.output,
            }
            for r in results
        },
    }


def load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
        benchmarks: dict[str, dict[str, Any]] = data["benchmarks"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.exit(f"all.py: {path} is not a file of bench/all.py --json: {exc}")
    return {
        f"{script}\0{fig['figure']}": fig
        for script, found in benchmarks.items()
        for fig in found["figures"]
    }


def compare(old_path: Path, new_path: Path) -> int:
    """Prints OLD and NEW side by side; returns how many figures got worse than WORSE."""
    old, new = load(old_path), load(new_path)
    rows: list[tuple[str, ...]] = []
    worse = 0
    for key in [*old, *(k for k in new if k not in old)]:
        script, figure = key.split("\0")
        before, after = old.get(key, {}), new.get(key, {})
        for label in dict.fromkeys([*before.get("values", {}), *after.get("values", {})]):
            a, b = before.get("values", {}).get(label), after.get("values", {}).get(label)
            name = f"{figure} ({label})" if label else figure
            change, flag = "", ""
            if a is not None and b is not None and a != 0:
                change = f"{(b - a) / abs(a) * 100:+.1f}%"
                better_up = (after or before).get("higher_is_better", False)
                got_worse = (a - b) / abs(a) if better_up else (b - a) / abs(a)
                if got_worse > WORSE:
                    flag, worse = "WORSE", worse + 1
            shown = ["-" if v is None else f"{v:.4g}" for v in (a, b)]
            rows.append((script, name, *shown, change, flag))
    print(table(rows, ("benchmark", "figure", old_path.name, new_path.name, "change", "")))
    if worse:
        print(f"{worse} figure(s) more than {WORSE:.0%} worse")
    return worse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", nargs="*", help="only these (e.g. install.py)")
    parser.add_argument("--quick", action="store_true", help="pass --quick to each script")
    parser.add_argument("--runs", type=int, default=1, help="run each N times, show medians")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--timeout", type=float, help="seconds a script may take (default: none)")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("OLD", "NEW"))
    args = parser.parse_args()
    if args.compare:
        if args.script or args.json:
            parser.error("--compare takes two files and nothing else")
        sys.exit(1 if compare(*args.compare) else 0)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    chosen = scripts(args.script)
    results = [Result(p.name) for p in chosen]
    for _ in range(args.runs):
        for path, result in zip(chosen, results, strict=True):
            if not result.error:  # a script that failed once is not run again
                run_one(path, args.quick, args.timeout, result)
    print(report(results, args.runs, args.quick))
    if args.json:
        args.json.write_text(json.dumps(as_json(results, args.runs, args.quick), indent=1) + "\n")
    failed = [r.script for r in results if r.error]
    if failed:
        sys.exit(f"all.py: {len(failed)} benchmark(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
