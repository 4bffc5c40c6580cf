"""Start-up of ``git agentrun``: wall time and peak memory against plain git.

    .venv/bin/python bench/cli.py [--quick]

``git agentrun --version`` (target < 150 ms) and ``git agentrun status`` on a repository
with 200 builds, each the median of several runs, against ``git --version`` and
``git for-each-ref refs/agentrun`` in the same run. Peak memory is the child's
``ru_maxrss`` (git and what it ran), taken by GNU time. Also checks that ``--version``
imports none of the heavy modules.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pygit2
from _common import empty_repo

from agentrun.events import (
    BuildCreated,
    HumanActor,
    ImplementStarted,
    ObservationRecorded,
    PlanStarted,
    SessionStarted,
)
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

HEAVY = ("pydantic", "pygit2", "httpx", "rich", "github", "gitlab", "psutil")
IMPORT_CHECK = """
import sys
from agentrun.cli.main import cli
try:
    cli.main(["--version"], prog_name="git agentrun")
except SystemExit:
    pass
heavy = [m for m in sys.argv[1:] if m in sys.modules]
print("heavy modules imported:", ", ".join(heavy) if heavy else "none")
"""


TIME = Path("/usr/bin/time")  # GNU time: its tiny process forks the child it measures


def wall(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds of one run; fails loudly if the command fails."""
    t0 = time.perf_counter()
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
    return seconds


def peak_kib(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> int:
    """Peak RSS of the command and the processes it waited for.

    Linux keeps the peak RSS across exec, so a child forked straight from this (large)
    interpreter would report this interpreter's size: GNU time, a small process, forks the
    child instead. Without it, ``wait4`` is used and the figure is an upper bound.
    """
    if TIME.exists():
        with tempfile.NamedTemporaryFile("r") as out:
            cmd = [str(TIME), "-f", "%M", "-o", out.name, *argv]
            subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)
            return int(out.read().split()[-1])
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return int(usage.ru_maxrss)


def measure(argv: Sequence[str], cwd: Path, env: dict[str, str], reps: int) -> tuple[float, int]:
    """Median seconds of ``reps`` runs, and the peak RSS (KiB) of two more."""
    seconds = statistics.median(wall(argv, cwd, env) for _ in range(reps))
    return seconds, max(peak_kib(argv, cwd, env) for _ in range(2))


def slowest_imports(report: str, top: int = 5) -> str:
    """The top-level imports that took longest, from ``python -X importtime``."""
    found = []
    for line in report.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].rstrip()
            depth = (len(name) - len(name.lstrip())) // 2
            found.append((int(parts[1]), depth, name.strip()))
    shallow = min((d for _, d, _ in found), default=0)
    best = sorted((f for f in found if f[1] <= shallow + 1), reverse=True)[:top]
    return ", ".join(f"{name} {us / 1e3:.0f}" for us, _, name in best)


def make_builds(path: Path, count: int) -> None:
    repo = pygit2.Repository(str(path))
    log = EventLog(repo, writer="bench")
    for i in range(count):
        slug = f"b-{i:04d}"
        created = BuildCreated(
            goal=f"goal number {i}", base_ref="main", base_sha="a" * 40, branch=f"agentrun/{slug}"
        )
        drafts = [
            Draft(created, HumanActor(login="bench")),
            Draft(PlanStarted(round=1)),
            Draft(SessionStarted(session="s1", role="plan", runtime="x", phase="plan", round=1)),
            Draft(ObservationRecorded(phase="plan", text="reading the code")),
        ]
        if i % 2:
            drafts.append(Draft(ImplementStarted(round=1)))
        log.append(slug, drafts, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args()
    builds, reps = (5, 2) if args.quick else (200, 9)

    with tempfile.TemporaryDirectory(prefix="agentrun-bench-cli-") as tmp:
        path, env = empty_repo(Path(tmp))
        t0 = time.perf_counter()
        make_builds(path, builds)
        print(f"({builds} builds created in {time.perf_counter() - t0:.2f} s)")

        git_version = measure(["git", "--version"], path, env, reps)
        version = measure(["git", "agentrun", "--version"], path, env, reps)
        for_each_ref = measure(["git", "for-each-ref", "refs/agentrun"], path, env, reps)
        status_argv = ["git", "agentrun", "status"]
        first_status = wall(status_argv, path, env), peak_kib(status_argv, path, env)
        status = measure(["git", "agentrun", "status"], path, env, reps)
        status_json = measure(["git", "agentrun", "status", "--json"], path, env, reps)

        check = subprocess.run(
            [sys.executable, "-c", IMPORT_CHECK, *HEAVY],
            cwd=path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        importtimes = {
            args[-1]: subprocess.run(
                [sys.executable, "-X", "importtime", "-m", "agentrun", *args],
                cwd=path,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stderr
            for args in (["--version"], ["status"])
        }

    print()
    print(f"cli: median wall ms of {reps} runs, peak RSS MiB ({builds} builds in the repository)")
    if not TIME.exists():
        print("(no /usr/bin/time: peak RSS from wait4, an upper bound that includes this process)")
    print(f"{'command':<40} {'ms':>8} {'MiB':>7}")
    table = [
        ("git --version", git_version),
        ("git agentrun --version", version),
        ("git for-each-ref refs/agentrun", for_each_ref),
        ("git agentrun status (first: no cache)", first_status),
        ("git agentrun status", status),
        ("git agentrun status --json", status_json),
    ]
    for name, (seconds, kb) in table:
        print(f"{name:<40} {seconds * 1e3:>8.1f} {kb / 1024:>7.1f}")
    print(check.stdout.strip().splitlines()[-1] + " (by `git agentrun --version`)")
    for command, report in importtimes.items():
        print(f"slowest imports of {command} (cumulative ms): {slowest_imports(report)}")
    verdict = "ok" if version[0] < 0.150 else "MISSED"
    print(f"--version: {version[0] * 1e3:.1f} ms (target < 150 ms: {verdict})")
    print(f"ratio agentrun --version / git --version: {version[0] / git_version[0]:.1f}")
    print(f"ratio agentrun status / git for-each-ref: {status[0] / for_each_ref[0]:.1f}")


if __name__ == "__main__":
    main()
