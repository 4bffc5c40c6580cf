"""Best of N: a build whose implement round runs as 3 candidates, against one implement.

    .venv/bin/python bench/candidates.py [--quick]

Wall time of ``git agentrun run`` (a real process, the scripted runtime, a throwaway
repository) for a build whose implement session sleeps 5 s (1 s with ``--quick``), with
``[candidates] count = 3``, against the same build with no ``[candidates]`` table (one
implement), interleaved in the same run, median of 3 (1 with ``--quick``). The only verify
step is ``true``, so each candidate is verified and no check costs time. The issue's target:
3 candidates at most 1.5x one. Where each build's time goes is read from its log (an
event's ``ts`` is to the microsecond): before the implement round, the candidate processes'
start, the sessions, the candidates' verify and the choice, after.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from datetime import datetime
from pathlib import Path

from _builds import Timed, cli_env, git, implement_sessions, timed_build

from agentrun.events import (
    CandidateChosen,
    CandidatesStarted,
    Event,
    ImplementCompleted,
    ImplementStarted,
    SessionEnded,
    SessionStarted,
    VerifyCompleted,
)

GOAL = "Write the answer"
CANDIDATES = 3


def make_repo(path: Path, sleep: float, candidates: int) -> Path:
    """A repository whose scripted implement session writes one file in ``sleep`` seconds;
    one verify step, ``true``; ``[candidates] count`` when ``candidates`` > 1."""
    git(path.parent, "init", "-q", "-b", "main", str(path))
    (path / "README").write_text("bench\n")
    table = f"\n[candidates]\ncount = {candidates}\n" if candidates > 1 else ""
    (path / ".agentrun.toml").write_text(
        '[roles]\ndefault = ["scripted"]\n\n'
        '[runtimes.scripted]\nkind = "script"\nscript = "agent-script.toml"\n\n'
        '[[verify]]\nname = "trivial"\ncommand = "true"\n' + table
    )
    (path / "agent-script.toml").write_text(
        '[[step]]\nphase = "implement"\nwrite = { "answer.txt" = "answer\\n" }\n'
        f"sleep = {sleep}\n"
    )
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def checked_build(repo_dir: Path, env: dict[str, str], candidates: int) -> Timed:
    """``git agentrun run`` to the end (``_builds.timed_build``), with as many verified
    implement sessions as candidates, and one chosen."""
    run = timed_build(repo_dir, env, GOAL)
    events = run.events
    sessions = implement_sessions(events)
    verified = {e.task for e in events if isinstance(e.payload, VerifyCompleted) and e.task}
    chosen = [e for e in events if isinstance(e.payload, CandidateChosen)]
    want = (CANDIDATES, CANDIDATES, 1) if candidates > 1 else (1, 0, 0)
    if (len(sessions), len(verified), len(chosen)) != want:
        raise RuntimeError(
            f"{len(sessions)} implement session(s), {len(verified)} candidate(s) verified, "
            f"{len(chosen)} chosen; expected {want}"
        )
    return run


def _at(ts: datetime) -> float:
    return ts.timestamp()


def _first(events: list[Event], *kinds: type) -> Event:
    return next(e for e in events if isinstance(e.payload, kinds))


SEGMENTS = (
    "interpreter start + create",
    "plan + plan review",
    "to the first implement session's start",
    "implement sessions (first start to last end)",
    "verify and choose (to candidate.chosen / implement.completed)",
    "code review, verify, proposal (to build.completed)",
    "to the process's exit",
)


def profile(run: Timed) -> dict[str, float]:
    """Where one build's wall time went, read from its log: consecutive segments (they
    add up to the wall time), seconds each. With one implement, the round ends at the
    build's ``implement.completed`` (its verify runs after the code review)."""
    events = run.events
    started = implement_sessions(events)
    ended = [
        _at(e.ts)
        for e in events
        if isinstance(e.payload, SessionEnded) and e.payload.session in started
    ]
    round_ends = [
        e
        for e in events
        if isinstance(e.payload, CandidateChosen)
        or (isinstance(e.payload, ImplementCompleted) and e.task is None)
    ]
    marks = [
        run.spawned,
        _at(events[0].ts),
        _at(_first(events, CandidatesStarted, ImplementStarted).ts),
        min(started.values()),
        max(ended),
        _at(round_ends[0].ts),
        _at(events[-1].ts),
        run.ended,
    ]
    parts = {name: end - at for name, at, end in zip(SEGMENTS, marks[:-1], marks[1:], strict=True)}
    parts["(within them: the last session's start after the first's)"] = max(
        started.values()
    ) - min(started.values())
    return parts


STEPS = (
    "candidates.started to its process's first event",
    "to its implement session's start",
    "its implement session",
    "session end to its verify.completed",
    "its verify.completed to candidate.chosen",
)


def candidate_profile(run: Timed) -> list[dict[str, float]]:
    """Each candidate's own path, read from its events (``task`` is ``c<n>``)."""
    events = run.events
    began = _at(_first(events, CandidatesStarted).ts)
    chosen = _at(_first(events, CandidateChosen).ts)
    out = []
    for task in sorted({e.task for e in events if e.task}):
        own = [e for e in events if e.task == task]
        session = _first(own, SessionStarted)
        marks = [
            began,
            _at(own[0].ts),
            _at(session.ts),
            _at(_first(own, SessionEnded).ts),
            _at(_first(own, VerifyCompleted).ts),
            chosen,
        ]
        out.append({n: end - at for n, at, end in zip(STEPS, marks[:-1], marks[1:], strict=True)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 s sessions, one run")
    args = parser.parse_args()
    sleep, reps = (1.0, 1) if args.quick else (5.0, 3)

    env = cli_env()
    kinds = {"one": 1, "candidates": CANDIDATES}
    runs: dict[str, list[Timed]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-candidates-") as tmp:
        for rep in range(reps):  # interleaved, so a noisy moment hits both alike
            for kind, count in kinds.items():
                repo_dir = make_repo(Path(tmp) / f"{kind}-{rep}", sleep, count)
                runs[kind].append(checked_build(repo_dir, env, count))
    wall = {k: statistics.median(r.seconds for r in v) for k, v in runs.items()}
    print(f"builds: an implement session of {sleep:g} s, verify `true`, median of {reps}")
    labels = {
        "candidates": f"{CANDIDATES} candidates ([candidates] count = {CANDIDATES})",
        "one": "1 implement (no [candidates])",
    }
    for kind, label in labels.items():
        print(f"  {label:<42} {wall[kind]:8.2f} s")
    header = "where the time went (median over runs, s):"
    print(f"  {header:<64} {'1 impl':>6} {'3 cand':>6} {'3 - 1':>7}")
    parts = {k: [profile(r) for r in v] for k, v in runs.items()}
    for name in parts["one"][0]:
        one, many = (statistics.median(p[name] for p in parts[k]) for k in ("one", "candidates"))
        print(f"    {name:<62} {one:6.2f} {many:6.2f} {many - one:+7.2f}")
    each = [c for r in runs["candidates"] for c in candidate_profile(r)]
    header = f"each candidate's path (over {len(each)} candidates, s):"
    print(f"  {header:<64} {'median':>6} {'max':>6}")
    for name in STEPS:
        values = [c[name] for c in each]
        print(f"    {name:<62} {statistics.median(values):6.2f} {max(values):6.2f}")
    ratio = wall["candidates"] / wall["one"]
    print(f"ratio {CANDIDATES}-candidates/1: {ratio:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
