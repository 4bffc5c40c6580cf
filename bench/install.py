"""The README's first command, step by step, against the same checkout built by setuptools.

    .venv/bin/python bench/install.py [--quick] [--runs N]

Runs the first command of the README's "The two commands" (``python3 -m venv .venv &&
.venv/bin/pip install … . && … git agentrun demo``, read from the README so it is measured as
written) in a copy of this checkout, timing each step, and, as the baseline in the same run,
the same checkout the way it was installed before: built by setuptools (what
pyproject.toml's ``[build-system]`` was) and installed by a plain ``pip install -q .``.
Each figure is the median of ``--runs`` on a warm cache (one untimed round of each fills
it first); the size is ``du -s`` of the venv's site-packages after the demo ran. CPU
seconds (the command's processes, user + system) say how much of the wait was work when
the machine is busy. ``--quick`` runs each once, side by side, without a warm-up: the
smoke test, whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The account's pip cache, also when HOME was moved (tests/test_bench_smoke.py's is).
ACCOUNT_CACHE = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "pip"
TARGET_S = 15.0
DEMO_DONE = "== next: in your own repository =="
# The baseline: the command as the README had it, and pyproject.toml's build system then.
BEFORE_COMMAND = (
    'python3 -m venv .venv && .venv/bin/pip install -q . && PATH="$PWD/.venv/bin:$PATH" '
    "git agentrun demo"
)
SETUPTOOLS_BUILD = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"
"""
SETUPTOOLS_TABLES = """
[tool.setuptools.dynamic]
version = { attr = "agentrun.__version__" }

[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
agentrun = ["prompts/*.md", "templates/*", "data/*.toml", "data/*.json"]

[tool.setuptools.data-files]
"share/man/man1" = ["data/share/man/man1/git-agentrun.1"]
"""


def readme_command() -> str:
    """The first command of the README's "The two commands", as written there."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## The two commands\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.*?)\n```", section, re.S)[0].strip()


def copy_checkout(source: Path, target: Path) -> Path:
    """The checkout's files as git sees them, without its venv, builds and caches."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"],
        cwd=source,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (source / name).is_file() and not (source / name).is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)
    return target


def built_by_setuptools(checkout: Path) -> Path:
    """``checkout`` with setuptools as its build backend (the [tool.flit] tables stay:
    setuptools reads none of them)."""
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    build = re.compile(r"^\[build-system\]\n.*?(?=^\[)", re.S | re.M)
    if not build.search(text):
        raise RuntimeError(f"no [build-system] table in {pyproject}")
    pyproject.write_text(build.sub(SETUPTOOLS_BUILD + "\n", text, count=1) + SETUPTOOLS_TABLES)
    return checkout


@dataclass(frozen=True)
class Case:
    name: str
    tree: Path
    command: str


@dataclass(frozen=True)
class Timing:
    steps: tuple[float, ...]  # wall seconds of each `&&` step
    cpu: float  # user + system seconds of all the command's processes
    site_kib: int

    @property
    def total(self) -> float:
        return sum(self.steps)


def run_step(step: str, cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one step (``bash -c``), and its output; it must exit 0."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(["bash", "-c", step], cwd=cwd, env=env, stdout=out, stderr=out)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{step} exited {proc.returncode}: {text[-1500:]}")
    return seconds, usage.ru_utime + usage.ru_stime, text


def site_packages_kib(venv: Path) -> int:
    (found,) = venv.glob("lib/python3*/site-packages")
    du = subprocess.run(["du", "-s", "-k", str(found)], capture_output=True, text=True)
    return int(du.stdout.split()[0])


def first_command(case: Case) -> Timing:
    shutil.rmtree(case.tree / ".venv", ignore_errors=True)
    shutil.rmtree(case.tree / "build", ignore_errors=True)
    env = {"PIP_CACHE_DIR": str(ACCOUNT_CACHE), **os.environ}
    env.pop("VIRTUAL_ENV", None)
    steps, cpu, output = [], 0.0, ""
    for step in case.command.split(" && "):
        seconds, used, output = run_step(step, case.tree, env)
        steps.append(seconds)
        cpu += used
    if DEMO_DONE not in output:
        raise RuntimeError(f"the demo did not finish: {output[-1500:]}")
    return Timing(tuple(steps), cpu, site_packages_kib(case.tree / ".venv"))


def measure(cases: list[Case], runs: int, quick: bool) -> dict[str, list[Timing]]:
    timings: dict[str, list[Timing]] = {case.name: [] for case in cases}
    if quick:  # the smoke test: side by side, once
        with ThreadPoolExecutor(len(cases)) as pool:
            for case, timing in zip(cases, pool.map(first_command, cases), strict=True):
                timings[case.name].append(timing)
        return timings
    for case in cases:
        first_command(case)  # fills the caches: the figures are warm
    for _ in range(runs):
        for case in cases:
            timings[case.name].append(first_command(case))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each once, side by side")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each (median)")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    command = readme_command()
    if not command.startswith("python3 -m venv .venv && ") or " git agentrun demo" not in command:
        sys.exit(f"install.py: the README's first command is not venv, install, demo: {command}")

    with tempfile.TemporaryDirectory() as tmp:
        readme_tree = copy_checkout(ROOT, Path(tmp) / "readme")
        before_tree = built_by_setuptools(copy_checkout(ROOT, Path(tmp) / "before"))
        cases = [Case("before", before_tree, BEFORE_COMMAND), Case("readme", readme_tree, command)]
        timings = measure(cases, runs, args.quick)

    warmth = "once each, side by side, no warm-up" if args.quick else f"median of {runs}, warm"
    print(f"the README's first command, step by step ({warmth}); seconds")
    print("before: built by setuptools, `pip install -q .`")
    print(f"readme: {command}")
    steps = ("venv", "install", "demo")
    print(f"{'':<8}{''.join(f'{s:>9}' for s in steps)}{'total':>9}{'cpu':>9}{'MiB':>8}")
    medians: dict[str, float] = {}
    for name, found in timings.items():
        parts = [statistics.median(t.steps[i] for t in found) for i in range(len(steps))]
        medians[name] = statistics.median(t.total for t in found)
        cpu = statistics.median(t.cpu for t in found)
        mib = found[-1].site_kib / 1024
        cells = "".join(f"{p:>9.2f}" for p in parts)
        print(f"{name:<8}{cells}{medians[name]:>9.2f}{cpu:>9.2f}{mib:>8.1f}")
    verdict = "yes" if medians["readme"] <= TARGET_S else "no"
    note = ", not warm" if args.quick else ""
    total = medians["readme"]
    print(f"the README's first command: {total:.1f} s (target <= {TARGET_S:g} s{note}: {verdict})")
    print(f"ratio first-command readme/before: {medians['readme'] / medians['before']:.2f}")
    sizes = {name: found[-1].site_kib for name, found in timings.items()}
    print(f"ratio site-packages readme/before: {sizes['readme'] / sizes['before']:.2f}")


if __name__ == "__main__":
    main()
