"""``decide`` on long build logs: warm (state cache hit) and cold (full replay).

    .venv/bin/python bench/decide.py [--quick]

Logs of 1,000 / 5,000 / 10,000 realistic events (implement / code-review / verify rounds
with their sessions, and observations between phases) are written through the store.
``warm``: ``load_state`` finds the cached state at the tip, then ``decide``.
``+1 event``: one new event since the cache, folded onto it, then ``decide``.
``cold``: no cache, the whole log is read and replayed, then ``decide``.
Baseline in the same run: reading the same number of JSON rows from an SQLite table
(WAL) and parsing them. Target: warm < 20 ms at 10,000 events, flat in the log length.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2

from agentrun.config import config_from_data
from agentrun.events import (
    AgentActor,
    AgentDone,
    BuildCreated,
    CodeReviewStarted,
    CodeReviewVerdict,
    HumanActor,
    ImplementCompleted,
    ImplementStarted,
    ObservationRecorded,
    SessionEnded,
    SessionStarted,
    Usage,
    VerifyCompleted,
    VerifyStarted,
)
from agentrun.gitrepo import commit_at
from agentrun.kernel.decide import decide
from agentrun.kernel.draft import Draft
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog, Tip

SLUG = "long-build"
START = datetime(2026, 11, 3, 8, 0, tzinfo=UTC)
OBSERVATIONS_BETWEEN_PHASES = 3
CONFIG = {
    "roles": {"default": ["scripted"]},
    "runtimes": {"scripted": {"kind": "script", "script": "/dev/null"}},
    "policy": {"max_review_rounds": 100_000},
    "verify": [{"name": "tests", "command": "python -m pytest -q", "paths": ["*.py"]}],
    "finalize": [{"name": "changelog", "agent": "implement"}],
}
FAILURE = "FAILED test_pager.py::test_no_items - ZeroDivisionError\n" * 10


def session(sid: str, phase: str, n: int) -> tuple[Draft, AgentActor]:
    started = SessionStarted(session=sid, role=phase, runtime="scripted", phase=phase, round=n)
    return Draft(started), AgentActor(role=phase, session=sid)


def observations(n: int, phase: str) -> list[Draft]:
    return [
        Draft(ObservationRecorded(phase=phase, text=f"round {n}: note {i} about {phase}"))
        for i in range(OBSERVATIONS_BETWEEN_PHASES)
    ]


def round_of(n: int) -> list[Draft]:
    """implement → code-review (approve) → verify (fails: the next round repairs it)."""
    head = f"{n:040x}"
    usage = Usage(tokens_in=12_000, tokens_out=900, cost_usd=0.02)
    impl, impl_actor = session(f"s{n}-impl", "implement", n)
    review, review_actor = session(f"s{n}-review", "code-review", n)
    return [
        Draft(ImplementStarted(round=n, feedback=(FAILURE,) if n > 1 else ())),
        impl,
        Draft(AgentDone(session=f"s{n}-impl", summary_text="fixed it"), impl_actor),
        Draft(SessionEnded(session=f"s{n}-impl", outcome="ok", usage=usage, head=head)),
        Draft(ImplementCompleted(round=n, head=head, changed_paths=("pager.py",))),
        *observations(n, "implement"),
        Draft(CodeReviewStarted(round=n)),
        review,
        Draft(CodeReviewVerdict(session=f"s{n}-review", round=n, verdict="approve"), review_actor),
        Draft(SessionEnded(session=f"s{n}-review", outcome="ok", usage=usage)),
        *observations(n, "code-review"),
        Draft(VerifyStarted(step="tests", round=n, attempt=1)),
        Draft(
            VerifyCompleted(
                step="tests",
                round=n,
                attempt=1,
                outcome="fail",
                exit_code=1,
                report=f"verify-tests-r{n}-a1.txt",
                reason=FAILURE,
                head=head,
            )
        ),
        *observations(n, "verify"),
    ]


def batches_for(size: int) -> list[list[Draft]]:
    """The log as the runner would append it: the creation, then one batch per round."""
    created = BuildCreated(
        goal="Fix the off-by-one in pager.py",
        base_ref="main",
        base_sha="a" * 40,
        branch=f"agentrun/{SLUG}",
        config=config_from_data(CONFIG, "bench").model_dump(mode="json"),
    )
    batches = [[Draft(created, HumanActor(login="bench"))]]
    left, n = size - 1, 0
    while left > 0:
        n += 1
        batch = round_of(n)[:left]
        batches.append(batch)
        left -= len(batch)
    return batches


def write_log(repo: pygit2.Repository, slug: str, batches: list[list[Draft]]) -> Tip:
    """One append per batch, a minute apart (commit times are whole seconds)."""
    log = EventLog(repo, writer="bench")
    tip: Tip | None = None
    for i, batch in enumerate(batches):
        tip, _ = log.append(slug, batch, tip, now=START + timedelta(minutes=i))
    assert tip is not None
    return tip


def timed(fn: Callable[[], object], reps: int) -> float:
    """Median seconds of ``reps`` calls."""
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def sqlite_baseline(db_path: Path, bodies: list[str], reps: int) -> float:
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    with db:
        db.executemany("INSERT INTO events VALUES (?, ?)", enumerate(bodies, 1))

    def read_all() -> list[Any]:
        rows = db.execute("SELECT body FROM events ORDER BY seq").fetchall()
        return [json.loads(body) for (body,) in rows]

    seconds = timed(read_all, reps)
    db.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args()
    sizes = [100, 300] if args.quick else [1_000, 5_000, 10_000]
    warm_reps, cold_reps = (3, 1) if args.quick else (30, 3)

    rows = []
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-decide-") as tmp:
        root = Path(tmp)
        path = root / "repo"
        subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
        repo = pygit2.Repository(str(path))
        log, cache = EventLog(repo, writer="bench"), StateCache(repo)
        for size in sizes:
            slug = f"{SLUG}-{size}"
            t0 = time.perf_counter()
            batches = batches_for(size)
            tip = write_log(repo, slug, batches)
            newest = START + timedelta(minutes=len(batches) - 1)
            written = time.perf_counter() - t0
            cache_path = cache.root / f"{slug}.json"

            def cold(slug: str = slug, cache_path: Path = cache_path) -> object:
                cache_path.unlink(missing_ok=True)
                return decide(load_state(log, cache, slug)[1])

            def warm(slug: str = slug) -> object:
                return decide(load_state(log, cache, slug)[1])

            cold_s = timed(cold, cold_reps)
            decision = warm()
            warm_s = timed(warm, warm_reps)
            state_kb = cache_path.stat().st_size / 1024

            def one_more(when: datetime, slug: str = slug) -> float:
                # Not timed: the append. Timed: folding it onto the cached state, and decide.
                note = ObservationRecorded(phase="bench", text="one more")
                log.append(slug, [Draft(note)], log.tip(slug), now=when)
                t0 = time.perf_counter()
                decide(load_state(log, cache, slug)[1])
                return time.perf_counter() - t0

            later = [one_more(newest + timedelta(minutes=1 + i)) for i in range(warm_reps)]
            newest += timedelta(minutes=warm_reps)
            # Worst case: the new event is committed in the same second as the cached tip.
            same = [one_more(newest) for _ in range(warm_reps)]
            plus_one, plus_same = statistics.median(later), statistics.median(same)
            # The same events as SQLite rows: the JSON bodies of their commits.
            bodies = [
                commit_at(repo, s.oid).message.partition("\n\n")[2] for s in log.read(slug, tip.oid)
            ]
            sqlite_s = sqlite_baseline(root / f"events-{size}.db", bodies, cold_reps * 3)
            rows.append((size, warm_s, plus_one, plus_same, cold_s, sqlite_s, state_kb))
            print(
                f"({size:,} events written in {written:.2f} s; decision: {decision!r:.60})",
                flush=True,
            )

    print()
    print("decide: median ms. warm: cache hit. +1: one new event folded onto the cache,")
    print("committed a minute after the cached tip (+1 later) or in the same second (+1 same s).")
    print("cold: no cache, full replay. sqlite: read as many JSON rows and parse them.")
    columns = ["events", "warm", "+1 later", "+1 same s", "cold", "sqlite", "cold/sqlite"]
    columns.append("state KB")
    print("{:>8} {:>7} {:>9} {:>10} {:>8} {:>7} {:>12} {:>9}".format(*columns))
    for size, warm_s, plus_s, same_s, cold_s, sqlite_s, state_kb in rows:
        print(
            f"{size:>8,} {warm_s * 1e3:>7.2f} {plus_s * 1e3:>9.2f} {same_s * 1e3:>10.2f} "
            f"{cold_s * 1e3:>8.1f} {sqlite_s * 1e3:>7.2f} {cold_s / sqlite_s:>12.1f} "
            f"{state_kb:>9.1f}"
        )
    first, last = rows[0], rows[-1]
    print(
        f"growth {last[0]:,}/{first[0]:,} events: warm {last[1] / first[1]:.2f}x, "
        f"+1 later {last[2] / first[2]:.2f}x, +1 same s {last[3] / first[3]:.2f}x, "
        f"cold {last[4] / first[4]:.2f}x"
    )
    verdict = "ok" if last[1] < 0.020 else "MISSED"
    print(f"warm at {last[0]:,} events: {last[1] * 1e3:.2f} ms (target < 20 ms: {verdict})")
    print(
        f"ratio cold/sqlite at {last[0]:,} events: {last[4] / last[5]:.1f} "
        "(replaying the git log vs reading as many JSON rows from SQLite)"
    )
    print(
        f"ratio warm/sqlite at {last[0]:,} events: {last[1] / last[5]:.3f} "
        "(the cached state vs reading every row)"
    )


if __name__ == "__main__":
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    main()
