"""A whole build of a real project, with an agent that answers at once, against its tests.

    .venv/bin/python bench/realbuild.py [--quick] [--runs N] [--cache DIR] [--before SRC]
        [--profile]

The project is more-itertools 10.5.0: its sdist, fetched once by ``pip download
--no-deps --no-binary :all:`` into ``--cache`` (``bench/outcomes``' default and helpers),
unpacked and committed as one commit, with a ``.agentrun.toml`` whose only runtime is an
instant agent of kind ``command``: a shell script that does what its phase asks at once
through the real ``git agentrun agent`` verbs, as a real agent would (``plan FILE``,
``approve``, a small edit then ``done``, ``approve``). Its verify steps: ``unit``, the
project's own tests (``python -m unittest``: the sdist's suite runs with the standard
library alone), and ``docs`` with ``paths = ["docs/**"]``, skipped (the edit touches no
doc). The build goes plan, plan review, implement, the local forge's draft, code review,
the two verify steps, the proposal marked ready.

Timed: ``git agentrun run GOAL`` (a real process, in a fresh clone each time) to its
exit, against the same test command run by itself (``bash -c``, in a clone, the same
environment), interleaved so a noisy moment hits both alike; medians. Bytecode is not
written (``PYTHONDONTWRITEBYTECODE=1`` in the command), so each run compiles alike. Also
printed: where the build's time went, read from its log (an event's ``ts`` is to the
microsecond): interpreter start-up, the agent's sessions, the checks, and the runner's
own work between them, per event and per session.

``--quick``: a tiny project made here (a module, a few tests, a docs folder) instead of
the download, same shape. ``--before SRC``: also time the agentrun of another ``src``
folder (a checkout of an earlier commit, on ``PYTHONPATH``, for the runner and its
agents' verbs alike), interleaved with this one, for figures before and after in the
same run. ``--profile``: one more build with its runner under cProfile, printed as
``bench/demo.py --profile`` prints it.
"""

from __future__ import annotations

import argparse
import pstats
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _builds import Timed, cli_env, git, timed_build

# Importing agentrun (through _builds) took the script's folder off sys.path: bench/outcomes'
# helpers are found from it.
sys.path.insert(1, str(Path(__file__).resolve().parent))
from _profile import table
from outcomes._instances import Project, fetch, unpack

from agentrun.events import Event, SessionEnded, SessionStarted, VerifyCompleted, VerifyStarted

PROJECT = Project("more-itertools", "10.5.0", tests="", protect=())
EDITED = "more_itertools/more.py"
DEFAULT_CACHE = Path.home() / ".cache" / "agentrun-outcomes"  # bench/outcomes' own
GOAL = "Say in more.py where the recipes live"
TEST_COMMAND = "PYTHONDONTWRITEBYTECODE=1 python -m unittest"
DOCS_COMMAND = "python -m sphinx -q -b html docs docs/_build/html"
IGNORED = "__pycache__/\n*.pyc\ndocs/_build/\n"

# The instant agent: what a real agent does at the end of each phase, and nothing else.
AGENT = """\
#!/bin/sh
# An agent that answers at once: each phase's verb, through agentrun's own CLI.
set -e
case "$AGENTRUN_PHASE" in
plan@*)
    printf '1. Add a comment to {edited} saying where the recipes live.\\n' \\
        > .agentrun/run/plan.md
    git agentrun agent plan .agentrun/run/plan.md ;;
plan-review@*|code-review@*)
    git agentrun agent approve ;;
implement@*)
    printf '\\n# The recipes of the itertools documentation are in recipes.py.\\n' \\
        >> {edited}
    git agentrun agent done --summary "a comment on where the recipes live" ;;
*)
    echo "no step for $AGENTRUN_PHASE" >&2; exit 1 ;;
esac
"""

TINY_MODULE = '''\
"""A tiny project for the quick run: one function and its tests."""


def chunked(items, size):
    """``items`` in lists of ``size`` (the last may be shorter)."""
    return [items[i : i + size] for i in range(0, len(items), size)]
'''
TINY_TESTS = """\
import unittest

from tiny import chunked


class ChunkedTests(unittest.TestCase):
    def test_even(self):
        self.assertEqual(chunked([1, 2, 3, 4], 2), [[1, 2], [3, 4]])

    def test_odd(self):
        self.assertEqual(chunked([1, 2, 3], 2), [[1, 2], [3]])

    def test_empty(self):
        self.assertEqual(chunked([], 3), [])
"""


def config(agent: Path) -> str:
    return (
        '[roles]\ndefault = ["instant"]\n\n'
        f'[runtimes.instant]\nkind = "command"\ncommand = ["sh", "{agent}"]\n\n'
        f'[[verify]]\nname = "unit"\ncommand = "{TEST_COMMAND}"\n\n'
        f'[[verify]]\nname = "docs"\ncommand = "{DOCS_COMMAND}"\npaths = ["docs/**"]\n'
    )


def make_template(root: Path, quick: bool, cache: Path) -> Path:
    """The project as a repository on ``main``: one commit with its config."""
    repo = root / "template"
    if quick:
        (repo / "tiny").mkdir(parents=True)
        (repo / "tiny" / "__init__.py").write_text(TINY_MODULE)
        (repo / "tests").mkdir()
        (repo / "tests" / "__init__.py").write_text("")
        (repo / "tests" / "test_tiny.py").write_text(TINY_TESTS)
        (repo / "docs").mkdir()
        (repo / "docs" / "index.rst").write_text("tiny\n====\n")
        edited = "tiny/__init__.py"
    else:
        unpack(fetch(PROJECT, cache), repo)
        edited = EDITED
    agent = root / "agent.sh"
    agent.write_text(AGENT.format(edited=shlex.quote(edited)))
    with (repo / ".gitignore").open("a") as ignore:
        ignore.write("\n" + IGNORED)
    (repo / ".agentrun.toml").write_text(config(agent))
    git(root, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the project")
    return repo


def clone(template: Path, into: Path) -> Path:
    git(template.parent, "clone", "-q", str(template), str(into))
    return into


def bare_tests(repo: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(
        ["bash", "-c", TEST_COMMAND], cwd=repo, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"the project's tests fail by themselves: {done.stderr[-800:]}")
    return seconds


@dataclass(frozen=True)
class Split:
    """Where one build's wall time went (seconds), read from its log."""

    startup: float  # process spawned -> first event (interpreter, config, build.created)
    sessions: float  # session.started -> session.ended, summed (the agent and its verbs)
    checks: float  # verify.started -> verify.completed of checks that ran
    runner: float  # everything else: the runner's own work between them, and its exit
    events: int
    session_count: int


def split(run: Timed) -> Split:
    events = run.events
    starts = {
        e.payload.session: e.ts.timestamp() for e in events if isinstance(e.payload, SessionStarted)
    }
    sessions = sum(
        e.ts.timestamp() - starts[e.payload.session]
        for e in events
        if isinstance(e.payload, SessionEnded) and e.payload.session in starts
    )
    checks = _check_seconds(events)
    startup = events[0].ts.timestamp() - run.spawned
    runner = run.seconds - startup - sessions - checks
    return Split(startup, sessions, checks, runner, len(events), len(starts))


def _check_seconds(events: list[Event]) -> float:
    total, started = 0.0, None
    for e in events:
        if isinstance(e.payload, VerifyStarted):
            started = e.ts.timestamp()
        elif isinstance(e.payload, VerifyCompleted) and e.payload.exit_code is not None:
            if started is not None:
                total += e.ts.timestamp() - started
            started = None
    return total


def profiled(repo: Path, env: dict[str, str], out: Path) -> list[str]:
    """One more build, its runner under cProfile (its agents' processes are not in it)."""
    command = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "agentrun", "run", GOAL]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the profiled build exited {done.returncode}: {done.stderr[-800:]}")
    return table(pstats.Stats(str(out)))


def report(label: str, builds: list[Timed], bare_s: float) -> float:
    """Print one series of builds against the bare tests; its median build seconds."""
    runs = len(builds)
    build_s = statistics.median(b.seconds for b in builds)
    mid = split(builds[sorted(range(runs), key=lambda i: builds[i].seconds)[runs // 2]])
    overhead = build_s - bare_s
    print(f"  {label}: git agentrun run (whole) {build_s * 1e3:9.1f} ms")
    print(
        f"    overhead                  {overhead * 1e3:9.1f} ms "
        f"({mid.events} events, {mid.session_count} sessions: "
        f"{overhead / mid.events * 1e3:.1f} ms per event, "
        f"{overhead / max(mid.session_count, 1) * 1e3:.0f} ms per session)"
    )
    print("    where the median build's time went (from its log):")
    print(f"      start-up to build.created {mid.startup * 1e3:9.1f} ms")
    print(f"      agent sessions            {mid.sessions * 1e3:9.1f} ms")
    print(f"      checks that ran           {mid.checks * 1e3:9.1f} ms")
    print(f"      the runner's own work     {mid.runner * 1e3:9.1f} ms")
    return build_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny project, no download")
    parser.add_argument("--runs", type=int, default=None, help="builds to time (default 5)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the sdist's folder")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="SRC",
        help="also time another agentrun's src folder (e.g. a checkout of main), interleaved",
    )
    parser.add_argument("--profile", action="store_true", help="print a profile of one build")
    args = parser.parse_args()
    runs = args.runs or (2 if args.quick else 5)

    env = cli_env()
    series = {"now": env}
    if args.before is not None:
        series = {"before": {**env, "PYTHONPATH": str(args.before.resolve())}, **series}
    builds: dict[str, list[Timed]] = {label: [] for label in series}
    bare: list[float] = []
    profile: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-realbuild-") as tmp:
        root = Path(tmp)
        env["AGENTRUN_WORKTREES"] = str(root / "worktrees")
        for each in series.values():
            each["AGENTRUN_WORKTREES"] = env["AGENTRUN_WORKTREES"]
        template = make_template(root, args.quick, args.cache)
        checkout = clone(template, root / "bare")
        bare_tests(checkout, env)  # a first run warms the page cache for both
        if not args.quick or args.before is not None:
            for label, each in series.items():  # and one build each, its bytecode written
                timed_build(clone(template, root / f"{label}-warm"), each, GOAL)
        # Each round runs every series and the bare tests, so a noisy moment hits all alike.
        for i in range(runs):
            for label, each in series.items():
                repo = clone(template, root / f"{label}-{i}")
                builds[label].append(timed_build(repo, each, GOAL))
            bare.append(bare_tests(checkout, env))
        if args.profile:
            profile = profiled(clone(template, root / "profiled"), env, root / "build.prof")

    name = "a tiny project" if args.quick else f"{PROJECT.name} {PROJECT.version}"
    bare_s = statistics.median(bare)
    print(f"realbuild: {name}, {runs} build(s) per series with an instant command agent, median")
    print(f"  bare test command           {bare_s * 1e3:9.1f} ms")
    medians = {label: report(label, found, bare_s) for label, found in builds.items()}
    for line in profile:
        print(line)
    if "before" in medians:
        print(f"ratio before build/bare-tests: {medians['before'] / bare_s:.2f}")
        print(f"ratio now/before: {medians['now'] / medians['before']:.2f}")
    print(f"ratio build/bare-tests: {medians['now'] / bare_s:.2f}")


if __name__ == "__main__":
    main()
