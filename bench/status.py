"""``git agentrun status`` from its summary index, against ``git for-each-ref``.

    .venv/bin/python bench/status.py [--quick] [--baseline-src DIR]

A repository with 1,000 builds (``--quick``: 10), half of them archived through the real
archive code, the logs written with the store directly. Each figure is the median wall
time of several runs of a real process, measured in this one run:

- ``git for-each-ref refs/agentrun``: the baseline, git listing the same refs;
- ``status`` and ``status --json`` warm: the summary index is there;
- ``status`` cold: the index and the state caches deleted before each run, as in the first
  run after a clone;
- ``status`` with leases, warm: a tenth of the builds (of the live ones) held by a live
  lease of this very process, as while runners work.

``--baseline-src DIR`` (the ``src`` folder of another checkout, e.g. of main: ``git
worktree add --detach /tmp/base main``) times that agentrun's ``status`` on the same
repository too (``PYTHONPATH=DIR``), warm (state caches there) and cold, so that the cold
case can be set against today's.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pygit2
from _common import empty_repo
from cli import make_builds

from agentrun.store.archive import archive
from agentrun.store.lease import acquire


def timed(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds of one run, and the CPU seconds it and its children used (on a busy
    machine the CPU time says more than the wall time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu


def median(
    argv: Sequence[str], cwd: Path, env: dict[str, str], reps: int, before: Callable[[], None]
) -> tuple[float, float]:
    """Median wall and CPU seconds of ``reps`` runs, ``before()`` called ahead of each."""
    runs = []
    for _ in range(reps):
        before()
        runs.append(timed(argv, cwd, env))
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def forget(gitdir: Path) -> Callable[[], None]:
    """Delete the summary index and the state caches: the first run after a clone."""

    def delete() -> None:
        for name in ("summary.idx", "cache"):
            target = gitdir / "agentrun" / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()

    return delete


def nothing() -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument(
        "--baseline-src", type=Path, help="the src folder of another agentrun checkout to time"
    )
    args = parser.parse_args()
    builds, reps, cold_reps = (10, 3, 2) if args.quick else (1000, 11, 3)

    with tempfile.TemporaryDirectory(prefix="agentrun-bench-status-") as tmp:
        path, env = empty_repo(Path(tmp))
        t0 = time.perf_counter()
        make_builds(path, builds)
        repo = pygit2.Repository(str(path))
        for n in range(0, builds, 2):
            archive(repo, f"b-{n:04d}", "complete")
        print(
            f"({builds} builds, {builds // 2} archived, made in {time.perf_counter() - t0:.1f} s)"
        )
        gitdir = path / ".git"

        status = ["git", "agentrun", "status"]
        subprocess.run(status, cwd=path, env=env, capture_output=True, check=True)  # the index
        refs = median(["git", "for-each-ref", "refs/agentrun"], path, env, reps, nothing)
        warm = median(status, path, env, reps, nothing)
        warm_json = median([*status, "--json"], path, env, reps, nothing)
        cold = median(status, path, env, cold_reps, forget(gitdir))
        rows = [
            ("git for-each-ref refs/agentrun", refs),
            ("git agentrun status", warm),
            ("git agentrun status --json", warm_json),
            ("git agentrun status, cold", cold),
        ]
        if args.baseline_src:
            base_env = {**env, "PYTHONPATH": str(args.baseline_src.resolve())}
            forget(gitdir)()
            subprocess.run(status, cwd=path, env=base_env, capture_output=True, check=True)
            base_warm = median(status, path, base_env, reps, nothing)
            base_cold = median(status, path, base_env, cold_reps, forget(gitdir))
            rows += [
                ("baseline status (--baseline-src)", base_warm),
                ("baseline status, cold", base_cold),
            ]
        held = [acquire(repo, f"b-{n:04d}", "bench", ttl=3600) for n in range(1, builds, 10)]
        subprocess.run(status, cwd=path, env=env, capture_output=True, check=True)
        leased = median(status, path, env, reps, nothing)
        rows.append((f"git agentrun status, {len(held)} leases", leased))
        if args.baseline_src:
            base_leased = median(status, path, base_env, reps, nothing)
            rows.append(("baseline status, leases", base_leased))

    print(f"status: median ms of {reps} runs (cold: {cold_reps}), wall and CPU")
    print(f"{'command':<40} {'wall':>9} {'cpu':>9}")
    for name, (seconds, cpu) in rows:
        print(f"{name:<40} {seconds * 1e3:>9.1f} {cpu * 1e3:>9.1f}")
    for what, value in [
        ("status", warm),
        ("status --json", warm_json),
        ("cold status", cold),
        ("status with leases", leased),
        *([("baseline status", base_warm)] if args.baseline_src else []),
        *([("baseline status with leases", base_leased)] if args.baseline_src else []),
    ]:
        print(
            f"ratio {what}/for-each-ref: {value[0] / refs[0]:.1f} (cpu: {value[1] / refs[1]:.1f})"
        )
    if args.baseline_src:
        print(f"ratio cold status/baseline cold status: {cold[0] / base_cold[0]:.2f}")


if __name__ == "__main__":
    main()
