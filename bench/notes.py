"""Concurrent notes: 4 processes each add 25 notes to ``refs/notes/agentrun`` at once.

    .venv/bin/python bench/notes.py [--writers 4] [--notes 25] [--rounds 3] [--quick]

Prints, per round, how many of the notes are present afterwards, how many writers failed
with an error, and the wall time against the same notes written by one process (the
baseline, in the same run). Notes are written with compare-and-swap (DESIGN §2): none may
be lost.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2
from _common import IDENTITY

WRITER = """
import sys, time
import pygit2
from agentrun.store.notes import add_note
repo = pygit2.Repository(sys.argv[1])
start = float(sys.argv[2])
commits = sys.argv[3:]
while time.time() < start:
    time.sleep(0.001)
for n, sha in enumerate(commits):
    add_note(repo, sha, {"writer": start, "n": n})
"""


def commits(path: Path, count: int) -> list[str]:
    repo = pygit2.init_repository(str(path))
    sig = pygit2.Signature("bench", "bench@example.com", 1_700_000_000, 0)
    tree = repo.TreeBuilder().write()
    made: list[str] = []
    parents: list[pygit2.Oid] = []
    for n in range(count):
        oid = repo.create_commit("refs/heads/main", sig, sig, f"c{n}", tree, parents)
        parents = [oid]
        made.append(str(oid))
    return made


def present(path: Path, shas: list[str]) -> int:
    repo = pygit2.Repository(str(path))
    found = 0
    for sha in shas:
        try:
            repo.lookup_note(sha, "refs/notes/agentrun")
            found += 1
        except KeyError:
            continue
    return found


def run(path: Path, groups: list[list[str]]) -> tuple[int, float]:
    env = {**os.environ, **IDENTITY}
    start = time.time() + 0.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(start), *group],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for group in groups
    ]
    failed = 0
    for proc in procs:
        proc.communicate()
        failed += proc.returncode != 0
    return failed, time.time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--notes", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one small round (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.writers, args.notes, args.rounds = 2, 5, 1
    total = args.writers * args.notes
    print(f"{args.writers} writers x {args.notes} notes, {args.rounds} rounds")
    for round_ in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            shas = commits(Path(tmp) / "r", total)
            groups = [shas[i :: args.writers] for i in range(args.writers)]
            failed, wall = run(Path(tmp) / "r", groups)
            found = present(Path(tmp) / "r", shas)
        with tempfile.TemporaryDirectory() as tmp:
            shas = commits(Path(tmp) / "r", total)
            _, serial = run(Path(tmp) / "r", [shas])
        print(
            f"round {round_}: present {found}/{total} ({100 * (total - found) / total:.0f}% lost), "
            f"writers failed {failed}/{args.writers}, wall {wall * 1000:.0f} ms "
            f"vs one writer {serial * 1000:.0f} ms"
        )
        print(f"ratio concurrent/one-writer: {wall / serial:.2f}")


if __name__ == "__main__":
    main()
