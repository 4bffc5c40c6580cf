"""Median µs per event append: the store vs bare pygit2 vs the git CLI.

    .venv/bin/python bench/append.py [--quick]

``store``: ``EventLog.append`` of one event without artifacts, compare-and-swap on the tip.
``pygit2``: blob + tree + commit, then the ref moved with ``Reference.set_target`` after
checking it still points at the parent (the same compare-and-swap, no validation).
``git-cli``: ``hash-object``, ``mktree``, ``commit-tree``, ``update-ref NEW OLD``.
Each method appends to its own ref, all starting from the same seeded log, at log lengths
10, 1,000 and 10,000. Targets: store/pygit2 ≤ 1.5, cli/store ≥ 10.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pygit2
from _common import IDENTITY

from agentrun.events import (
    BuildCreated,
    Event,
    HumanActor,
    KernelActor,
    ObservationRecorded,
    encode,
)
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog, Tip

TS = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)
WRITER = "bench"


def event_message(seq: int, text: str) -> str:
    payload: object
    if seq == 1:
        payload = BuildCreated(goal="bench", base_ref="main", base_sha="a" * 40, branch="b")
        actor: object = HumanActor(login="bench")
    else:
        payload = ObservationRecorded(phase="bench", text=text)
        actor = KernelActor()
    event = Event.model_validate(
        {"seq": seq, "ts": TS, "actor": actor, "writer": WRITER, "payload": payload}
    )
    return encode(event)


def seed(repo: pygit2.Repository, length: int) -> str:
    """A valid log of ``length`` events, written fast with bare pygit2 commits."""
    sig = pygit2.Signature("agentrun", "agentrun@localhost", int(TS.timestamp()), 0)
    tree = repo.TreeBuilder().write()
    parents: list[pygit2.Oid] = []
    for seq in range(1, length + 1):
        oid = repo.create_commit(None, sig, sig, event_message(seq, f"seed {seq}"), tree, parents)
        parents = [oid]
    return str(parents[0])


def store_append(repo: pygit2.Repository, slug: str, start: Tip, n: int) -> tuple[list[float], Tip]:
    log = EventLog(repo, writer=WRITER)
    tip = start
    times: list[float] = []
    for i in range(n):
        draft = Draft(ObservationRecorded(phase="bench", text=f"store {i}"))
        t0 = time.perf_counter()
        tip, _ = log.append(slug, [draft], tip)
        times.append(time.perf_counter() - t0)
    return times, tip


def pygit2_append(repo: pygit2.Repository, ref: str, start: Tip, n: int) -> tuple[list[float], Tip]:
    messages = [event_message(start.seq + 1 + i, f"pygit2 {i}") for i in range(n)]
    parent = start.oid
    times: list[float] = []
    for message in messages:
        t0 = time.perf_counter()
        body = message.partition("\n\n")[2].encode()
        blob = repo.create_blob(body)
        builder = repo.TreeBuilder()
        builder.insert("event.json", blob, pygit2.GIT_FILEMODE_BLOB)
        tree = builder.write()
        sig = pygit2.Signature("agentrun", "agentrun@localhost", int(time.time()), 0)
        oid = repo.create_commit(None, sig, sig, message, tree, [pygit2.Oid(hex=parent)])
        current = repo.references.get(ref)
        if current is None or str(current.target) != parent:
            raise RuntimeError(f"{ref} moved")
        current.set_target(oid)
        parent = str(oid)
        times.append(time.perf_counter() - t0)
    return times, Tip(parent, start.seq + n)


def cli_append(path: Path, ref: str, start: Tip, n: int) -> tuple[list[float], Tip]:
    env = {**os.environ, **IDENTITY}

    def git(*args: str, stdin: str | None = None) -> str:
        out = subprocess.run(
            ["git", *args], cwd=path, env=env, input=stdin, capture_output=True, text=True
        )
        if out.returncode != 0:
            raise RuntimeError(f"git {args[0]}: {out.stderr.strip()}")
        return out.stdout.strip()

    messages = [event_message(start.seq + 1 + i, f"cli {i}") for i in range(n)]
    parent = start.oid
    times: list[float] = []
    for message in messages:
        t0 = time.perf_counter()
        blob = git("hash-object", "-w", "--stdin", stdin=message.partition("\n\n")[2])
        tree = git("mktree", stdin=f"100644 blob {blob}\tevent.json\n")
        oid = git("commit-tree", tree, "-p", parent, stdin=message)
        git("update-ref", ref, oid, parent)
        parent = oid
        times.append(time.perf_counter() - t0)
    return times, Tip(parent, start.seq + n)


def measure(
    repo: pygit2.Repository, path: Path, length: int, tip: Tip, rounds: int, n: int, n_cli: int
) -> dict[str, list[float]]:
    """Interleave the methods in rounds, so a noisy moment hits all of them alike."""
    slug = f"len{length}"
    tips = {m: tip for m in ("store", "pygit2", "cli")}
    for method in tips:
        repo.references.create(f"refs/agentrun/builds/{slug}-{method}", pygit2.Oid(hex=tip.oid))
    times: dict[str, list[float]] = {m: [] for m in tips}
    for _ in range(rounds):
        got, tips["store"] = store_append(repo, f"{slug}-store", tips["store"], n)
        times["store"] += got
        ref = f"refs/agentrun/builds/{slug}-pygit2"
        got, tips["pygit2"] = pygit2_append(repo, ref, tips["pygit2"], n)
        times["pygit2"] += got
        ref = f"refs/agentrun/builds/{slug}-cli"
        got, tips["cli"] = cli_append(path, ref, tips["cli"], n_cli)
        times["cli"] += got
    # Every log must still read back to its tip: the figures are for correct appends.
    log = EventLog(repo)
    for method, end in tips.items():
        assert log.tip(f"{slug}-{method}") == end, method
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args()
    lengths = [10, 100] if args.quick else [10, 1_000, 10_000]
    rounds, n, n_cli = (2, 10, 3) if args.quick else (10, 40, 8)

    os.environ.update(IDENTITY)
    rows: list[tuple[int, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-append-") as tmp:
        path = Path(tmp) / "repo"
        subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
        repo = pygit2.Repository(str(path))
        # Seed every log first: appends are then measured in a repository of steady size.
        t0 = time.perf_counter()
        seeded = {length: Tip(seed(repo, length), length) for length in lengths}
        print(
            f"(seeded logs of {', '.join(f'{x:,}' for x in lengths)} events "
            f"in {time.perf_counter() - t0:.2f} s)",
            flush=True,
        )
        for length in lengths:
            times = measure(repo, path, length, seeded[length], rounds, n, n_cli)
            medians = {m: statistics.median(t) * 1e6 for m, t in times.items()}
            rows.append((length, medians["store"], medians["pygit2"], medians["cli"]))

    print()
    print(
        f"append: median µs per event ({rounds * n} store/pygit2 and {rounds * n_cli} git CLI "
        f"appends per length, interleaved in {rounds} rounds)"
    )
    header = ("log length", "store", "pygit2", "git-cli", "st/py", "cli/st")
    print("{:>10} {:>9} {:>9} {:>9} {:>7} {:>7}".format(*header))
    for length, store, bare, cli in rows:
        print(
            f"{length:>10,} {store:>9.0f} {bare:>9.0f} {cli:>9.0f} "
            f"{store / bare:>7.2f} {cli / store:>7.1f}"
        )
    worst_overhead = max(store / bare for _, store, bare, _ in rows)
    worst_speedup = min(cli / store for _, store, _, cli in rows)
    growth = rows[-1][1] / rows[0][1]
    print(
        f"store growth {lengths[-1]:,}/{lengths[0]:,} events: {growth:.2f}x "
        "(flat expected: an append never reads the log)"
    )
    verdict = "ok" if worst_overhead <= 1.5 else "MISSED"
    print(f"ratio store/pygit2: {worst_overhead:.2f} worst over lengths (target <= 1.5: {verdict})")
    verdict = "ok" if worst_speedup >= 10 else "MISSED"
    print(f"ratio cli/store: {worst_speedup:.1f} worst over lengths (target >= 10: {verdict})")


if __name__ == "__main__":
    main()
