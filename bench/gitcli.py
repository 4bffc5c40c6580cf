"""What hardening costs one git process: ``gitcli.run`` against a bare ``subprocess.run``.

    .venv/bin/python bench/gitcli.py [--quick]

Both run ``git status --porcelain`` in the same repository (a few files, and a config
that defines filter, diff and merge drivers and a remote, as an agent could write it),
alternately; the figure is the median wall time per call and the ratio hardened/bare.
The difference is reading the repository's config with pygit2 and building the
``GIT_CONFIG_*`` environment.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import IDENTITY

from agentrun import gitcli


def make_repo(root: Path) -> Path:
    env = {**os.environ, **IDENTITY}
    path = root / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    for n in range(20):
        (path / f"f{n}.txt").write_text(f"file {n}\n")
    subprocess.run(["git", "add", "-A"], cwd=path, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "files"], cwd=path, check=True, env=env)
    with (path / ".git" / "config").open("a") as config:
        for name in ("a", "b", "c"):
            config.write(f'[filter "{name}"]\n\tclean = cat\n[diff "{name}"]\n\ttextconv = cat\n')
            config.write(f'[merge "{name}"]\n\tdriver = false\n')
        config.write('[remote "origin"]\n\turl = https://example.com/r.git\n')
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    runs = 20 if parser.parse_args().quick else 200
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as tmp:
        path = make_repo(Path(tmp))
        env = {**os.environ, **IDENTITY}
        bare: list[float] = []
        hardened: list[float] = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(["git", "status", "--porcelain"], cwd=path, env=env, capture_output=True)
            bare.append(time.perf_counter() - start)
            start = time.perf_counter()
            gitcli.run(["status", "--porcelain"], cwd=path)
            hardened.append(time.perf_counter() - start)
    b, h = statistics.median(bare) * 1000, statistics.median(hardened) * 1000
    print(f"git status, bare subprocess: {b:.2f} ms (median of {runs})")
    print(f"git status, gitcli.run:      {h:.2f} ms (median of {runs})")
    print(f"ratio hardened/bare: {h / b:.2f} (+{h - b:.2f} ms per git process)")


if __name__ == "__main__":
    sys.exit(main())
