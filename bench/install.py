"""The README's first command, with and without the github extra: time and install size.

    .venv/bin/python bench/install.py [--quick] [--before CHECKOUT]

Runs the README's first command (``python3 -m venv .venv && .venv/bin/pip install -q .
&& git agentrun demo``) in a copy of this checkout, once as ``pip install '.[github]'``
(what every install was while PyGithub was a plain dependency: "before") and once as
``pip install .`` ("after"). Each is the median of several runs on a warm cache (one
untimed round fills it first), and the size is ``du -s`` of the venv's site-packages.
``--before CHECKOUT`` measures another checkout's plain ``pip install .`` as "before"
instead, e.g. a clone of the commit before PyGithub became an extra.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The account's pip cache, also when HOME was moved (tests/test_bench_smoke.py's is).
ACCOUNT_CACHE = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "pip"


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


def site_packages_kib(venv: Path) -> int:
    (found,) = venv.glob("lib/python3*/site-packages")
    du = subprocess.run(["du", "-s", "-k", str(found)], capture_output=True, text=True)
    return int(du.stdout.split()[0])


def first_command(checkout: Path, target: str) -> tuple[float, int]:
    """Seconds of venv + install + demo, and the venv's site-packages in KiB."""
    venv = checkout / ".venv"
    shutil.rmtree(venv, ignore_errors=True)
    shutil.rmtree(checkout / "build", ignore_errors=True)
    script = (
        f"python3 -m venv .venv && .venv/bin/pip install -q '{target}' && "
        'PATH="$PWD/.venv/bin:$PATH" git agentrun demo'
    )
    env = {"PIP_CACHE_DIR": str(ACCOUNT_CACHE), **os.environ}
    t0 = time.perf_counter()
    done = subprocess.run(
        ["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{script} exited {done.returncode}: {done.stderr[-1500:]}")
    if "== next: in your own repository ==" not in done.stdout:
        raise RuntimeError(f"the demo did not finish: {done.stdout[-1500:]}")
    return seconds, site_packages_kib(venv)


def has_pygithub(checkout: Path) -> bool:
    python = checkout / ".venv/bin/python"
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('github') is None)"
    return subprocess.run([str(python), "-c", probe]).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one timed run each (smoke test)")
    parser.add_argument("--before", type=Path, help="a checkout to measure as before")
    args = parser.parse_args()
    runs = 1 if args.quick else 3

    with tempfile.TemporaryDirectory() as tmp:
        after_tree = copy_checkout(ROOT, Path(tmp) / "after")
        if args.before:
            before_tree, before_target = copy_checkout(args.before, Path(tmp) / "before"), "."
        else:
            before_tree, before_target = after_tree, ".[github]"
        cases = {"before": (before_tree, before_target), "after": (after_tree, ".")}
        if not args.quick:
            for tree, target in cases.values():
                first_command(tree, target)  # fills the caches: the figures are warm
        times: dict[str, list[float]] = {name: [] for name in cases}
        sizes: dict[str, int] = {}
        pygithub: dict[str, bool] = {}
        for _ in range(runs):
            for name, (tree, target) in cases.items():
                seconds, sizes[name] = first_command(tree, target)
                times[name].append(seconds)
                pygithub[name] = has_pygithub(tree)

    warmth = "no warm-up" if args.quick else "warm cache"
    print(f"the README's first command (venv + pip install + demo), median of {runs}, {warmth}")
    print(f"{'':<8} {'target':<14} {'PyGithub':<9} {'seconds':>8} {'site-packages MiB':>18}")
    for name, (_, target) in cases.items():
        shown = f"{args.before}" if name == "before" and args.before else target
        median = statistics.median(times[name])
        mib = sizes[name] / 1024
        print(f"{name:<8} {shown:<14} {pygithub[name]!s:<9} {median:>8.2f} {mib:>18.1f}")
    if pygithub["after"]:
        raise RuntimeError("PyGithub was installed without the github extra")
    before_s, after_s = (statistics.median(times[n]) for n in ("before", "after"))
    print(f"ratio install+demo after/before: {after_s / before_s:.2f}")
    print(f"ratio site-packages after/before: {sizes['after'] / sizes['before']:.2f}")


if __name__ == "__main__":
    main()
