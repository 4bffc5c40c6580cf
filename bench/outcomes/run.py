"""Outcomes: what a configuration of agentrun solves on real projects' bugs, and what it spends.

    .venv/bin/python bench/outcomes/run.py --config FILE [--config FILE ...]
        [--instances N | --quick] [--jobs N] [--json] [--cache DIR] [--keep DIR]
    .venv/bin/python bench/outcomes/run.py --check [--instances N]

Each instance (instances.toml) is a real project's pinned sdist, fetched from the package
index when the run needs it, unpacked as a git repository with a bug planted, and an issue's
text as the goal. For each configuration (an ``.agentrun.toml`` with roles, runtimes,
prices, a ladder, a budget — anything but verify steps) each instance runs through a real
``git agentrun run`` in a fresh clone, with the project's own tests as the only verify step
(the test files protected). An instance is solved when its build completes and the
project's tests pass on the build branch's last commit (run again unless the build's last
passing run of them was on that very tree).

Printed per configuration: the solved rate, dollars per solved instance (everything the
configuration spent, over the instances it solved), dollars spent on the unsolved ones,
wall time, implement rounds, and the spend per phase, per ladder rung and per model, as a
table (ending with each configuration's dollars per solved instance as a ratio to the first
configuration's, measured in the same run), or as JSON with ``--json``. ``--check``
checks the instances themselves: each project's tests pass without the bug and fail with
it, naming the instance's failing test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The harness's helpers, then bench/'s, before agentrun (importing it takes the script's
# folder off sys.path).
import _instances as inst

sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
import pygit2
from _builds import cli_env

from agentrun.config.load import parse_config
from agentrun.errors import AgentrunError
from agentrun.events import (
    EscalationRaised,
    Event,
    ImplementStarted,
    SessionEnded,
    SessionStarted,
    Usage,
    VerifyCompleted,
)
from agentrun.store.log import EventLog

STATES = {0: "complete", 4: "parked", 6: "failed"}  # `git agentrun run`'s exit codes
# What the harness adds to every configuration: an instance's tests, its test files kept.
FORBIDDEN = ("verify", "protect")


class BadInput(Exception):
    """A configuration or an option the harness cannot use: one line, exit 1."""


@dataclass(frozen=True)
class Setup:
    """One configuration as given: its name (the file's stem), its text."""

    name: str
    path: Path
    text: str


def read_setup(path: Path) -> Setup:
    """The configuration, checked: valid TOML and a valid agentrun configuration, with no
    verify steps or protected paths of its own (the instance brings them)."""
    try:
        text = path.read_text()
        data = tomllib.loads(text)
    except OSError as err:
        raise BadInput(f"{path}: {err.strerror}") from err
    except tomllib.TOMLDecodeError as err:
        raise BadInput(f"{path}: not TOML: {err}") from err
    for key in FORBIDDEN:
        if key in data:
            raise BadInput(
                f"{path}: leave [{key}] out; each instance brings its own (the project's tests)"
            )
    try:
        parse_config(text, str(path))
    except AgentrunError as err:
        raise BadInput(str(err)) from err
    return Setup(path.stem, path, text)


def merged(setup: Setup, instance: inst.Instance) -> str:
    """The configuration an instance's build runs with: the setup's, the project's tests
    as the verify step, and the test files protected (no agent passes by editing them)."""
    protect = ", ".join(json.dumps(p) for p in instance.project.protect)
    return (
        f"{setup.text.rstrip()}\n\n"
        f'[[verify]]\nname = "tests"\ncommand = {json.dumps(instance.test_command)}\n\n'
        f"[protect]\npaths = [{protect}]\n"
    )


# --- one build ---------------------------------------------------------------------------


@dataclass
class Spend:
    """What sessions spent: dollars (of the priced ones), tokens, the models with no price,
    and dollars per phase, per ladder rung (``ROLE#RUNG RUNTIME``) and per model
    (``RUNTIME:MODEL``)."""

    usd: float = 0.0
    tokens: int = 0
    unpriced: list[str] = field(default_factory=list)
    by_phase: dict[str, float] = field(default_factory=dict)
    by_rung: dict[str, float] = field(default_factory=dict)
    by_model: dict[str, float] = field(default_factory=dict)

    def add(self, other: Spend) -> None:
        self.usd = round(self.usd + other.usd, 6)
        self.tokens += other.tokens
        self.unpriced = sorted({*self.unpriced, *other.unpriced})
        for mine, theirs in (
            (self.by_phase, other.by_phase),
            (self.by_rung, other.by_rung),
            (self.by_model, other.by_model),
        ):
            for key, usd in theirs.items():
                mine[key] = round(mine.get(key, 0.0) + usd, 6)


def session_spend(s: SessionStarted, usage: Usage) -> Spend:
    model = f"{s.runtime}:{s.model or '-'}"
    if usage.cost_usd is None:
        unknown = [model] if usage.tokens or not usage.reported else []
        return Spend(tokens=usage.tokens, unpriced=unknown)
    usd = usage.cost_usd
    rung = {f"{s.role}#{s.rung} {s.runtime}": usd} if s.rung is not None else {}
    return Spend(usd, usage.tokens, [], {s.phase: usd}, rung, {model: usd})


def spend(events: list[Event]) -> Spend:
    """What the build's sessions spent, from its log."""
    started: dict[str, SessionStarted] = {}
    total = Spend()
    for event in events:
        p = event.payload
        if isinstance(p, SessionStarted):
            started[p.session] = p
        elif isinstance(p, SessionEnded) and p.session in started:
            total.add(session_spend(started[p.session], p.usage))
    return total


@dataclass
class Result:
    """One instance's build with one configuration."""

    instance: str
    project: str
    state: str  # complete, parked, failed; error or timeout (the run itself went wrong)
    solved: bool
    rounds: int  # implement rounds
    seconds: float
    spend: Spend
    why: str  # what a build that did not complete asked, or how the run went wrong


def read_log(repo_dir: Path) -> tuple[str | None, list[Event]]:
    log = EventLog(pygit2.Repository(str(repo_dir)))
    slugs = list(log.slugs())
    if not slugs:
        return None, []
    return slugs[0], [s.event for s in log.read(slugs[0])]


def graded(
    instance: inst.Instance, repo_dir: Path, slug: str, events: list[Event], env: dict[str, str]
) -> bool:
    """The project's tests pass on the build branch's last commit: the build's last passing
    run of them verified that very tree (tests are deterministic), else they run again."""
    tip = inst.git(repo_dir, "rev-parse", f"agentrun/{slug}^{{tree}}")
    passed = [
        e.payload.head
        for e in events
        if isinstance(e.payload, VerifyCompleted)
        and e.payload.step == "tests"
        and e.payload.outcome == "pass"
        and e.payload.head
    ]
    if passed and inst.git(repo_dir, "rev-parse", f"{passed[-1]}^{{tree}}") == tip:
        return True
    tree = repo_dir.parent / f"{repo_dir.name}-graded"
    inst.git(repo_dir, "worktree", "add", "-q", "--detach", str(tree), f"agentrun/{slug}")
    try:
        code, _ = inst.run_tests(instance, tree, env)
    finally:
        inst.git(repo_dir, "worktree", "remove", "--force", str(tree))
    return code == 0


def one_build(
    setup: Setup,
    instance: inst.Instance,
    prepared: Path,
    work: Path,
    env: dict[str, str],
    timeout: float,
) -> Result:
    """The instance through ``git agentrun run`` with the setup, in a fresh clone: its end
    state, whether it is solved, what it spent, its implement rounds and wall time."""
    repo_dir = work / setup.name / instance.id
    repo_dir.parent.mkdir(parents=True, exist_ok=True)
    inst.git(work, "clone", "-q", str(prepared), str(repo_dir))
    inst.git(repo_dir, "remote", "remove", "origin")
    (repo_dir / ".agentrun.toml").write_text(merged(setup, instance))
    inst.git(repo_dir, "add", ".agentrun.toml")
    inst.git(repo_dir, "commit", "-q", "-m", "configure agentrun")
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            ["git", "agentrun", "run", instance.goal],
            cwd=repo_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        code, stderr = None, f"timed out after {timeout:g} s"
    seconds = time.perf_counter() - t0
    slug, events = read_log(repo_dir)
    state = STATES.get(code, "error") if code is not None else "timeout"
    if events and events[-1].type != "build.completed" and state == "complete":
        state = "error"
    solved = (
        state == "complete" and slug is not None and graded(instance, repo_dir, slug, events, env)
    )
    why = ""
    if state in ("error", "timeout"):
        why = (stderr.strip().splitlines() or [f"exit {code}"])[-1]
    else:
        asked = [e.payload for e in events if isinstance(e.payload, EscalationRaised)]
        why = asked[-1].question if asked and state != "complete" else ""
    rounds = sum(1 for e in events if isinstance(e.payload, ImplementStarted) and not e.task)
    project = f"{instance.project.name} {instance.project.version}"
    return Result(
        instance.id, project, state, solved, rounds, round(seconds, 2), spend(events), why
    )


# --- a configuration's figures -----------------------------------------------------------


def flat(result: Result) -> dict[str, object]:
    """A result as JSON has it: its spend's fields among its own."""
    fields = asdict(result)
    return {**fields, **fields.pop("spend")}


def summary(results: list[Result]) -> dict[str, object]:
    """The configuration's figures over its instances: dollars per solved instance is
    everything spent, on solved and unsolved ones, over the number solved."""
    solved = [r for r in results if r.solved]
    total = Spend()
    for r in results:
        total.add(r.spend)
    return {
        "instances": len(results),
        "solved": len(solved),
        "solved_rate": round(len(solved) / len(results), 4) if results else 0.0,
        "usd": total.usd,
        "usd_per_solved": round(total.usd / len(solved), 6) if solved else None,
        "usd_unsolved": round(sum(r.spend.usd for r in results if not r.solved), 6),
        "seconds": round(sum(r.seconds for r in results), 2),
        "rounds": sum(r.rounds for r in results),
        "tokens": total.tokens,
        "unpriced": total.unpriced,
        "by_phase": total.by_phase,
        "by_rung": total.by_rung,
        "by_model": total.by_model,
    }


def dollars(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def spread(table: dict[str, float]) -> str:
    """``key $x, key $y``, by key."""
    return ", ".join(f"{k} {dollars(v)}" for k, v in sorted(table.items())) or "-"


def print_tables(report: dict[str, Any]) -> None:
    """The JSON report as tables: each configuration's instances, then the comparison."""
    for config in report["configs"]:
        s = config["summary"]
        print(f"\n{config['name']} ({config['path']})")
        print(f"  {'instance':<32} {'state':<9} {'solved':<6} {'rounds':>6} {'$':>9} {'s':>7}")
        for r in config["instances"]:
            solved = "yes" if r["solved"] else "no"
            print(
                f"  {r['instance']:<32} {r['state']:<9} {solved:<6} {r['rounds']:>6} "
                f"{dollars(r['usd']):>9} {r['seconds']:>7.1f}"
            )
            if r["why"]:
                print(f"    {r['why'][:150]}")
        print(f"  spend per phase: {spread(s['by_phase'])}")
        print(f"  spend per rung:  {spread(s['by_rung'])}")
        print(f"  spend per model: {spread(s['by_model'])}")
        if s["unpriced"]:
            print(f"  unpriced (not in the dollars): {', '.join(s['unpriced'])}")
    print(
        f"\n{'configuration':<28} {'solved':>8} {'$/solved':>10} {'$ unsolved':>11} "
        f"{'$ total':>9} {'rounds':>6} {'wall s':>7}"
    )
    for config in report["configs"]:
        s = config["summary"]
        solved = f"{s['solved']}/{s['instances']}"
        print(
            f"{config['name']:<28} {solved:>8} {dollars(s['usd_per_solved']):>10} "
            f"{dollars(s['usd_unsolved']):>11} {dollars(s['usd']):>9} {s['rounds']:>6} "
            f"{s['seconds']:>7.1f}"
        )
    for config in report["configs"]:
        s = config["summary"]
        print(
            f"dollars per solved instance, {config['name']}: {dollars(s['usd_per_solved'])} "
            f"({s['solved']}/{s['instances']} solved)"
        )
    first, *others = report["configs"]
    base = first["summary"]["usd_per_solved"]
    for config in others:
        mine = config["summary"]["usd_per_solved"]
        ratio = f"{mine / base:.2f}" if mine is not None and base else "-"
        print(f"ratio dollars-per-solved {config['name']}/{first['name']}: {ratio}")


# --- the runs ----------------------------------------------------------------------------


def prepare(instances: list[inst.Instance], cache: Path, work: Path) -> dict[str, Path]:
    """Each instance's repository, made once; every build clones it."""
    made = {}
    for instance in instances:
        made[instance.id] = inst.make_repo(instance, cache, work / "instances" / instance.id)
    return made


def measure(
    setups: list[Setup],
    instances: list[inst.Instance],
    cache: Path,
    work: Path,
    jobs: int,
    timeout: float,
    progress: Callable[[str], None],
) -> dict[str, object]:
    """Every configuration on every instance, ``jobs`` builds at once (of any
    configurations), each configuration's results in the instances' order."""
    env = cli_env()
    prepared = prepare(instances, cache, work)
    pairs = [(setup, i) for setup in setups for i in instances]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [
            pool.submit(one_build, setup, i, prepared[i.id], work, env, timeout)
            for setup, i in pairs
        ]
        results: dict[str, list[Result]] = {s.name: [] for s in setups}
        for (setup, _), future in zip(pairs, futures, strict=True):
            result = future.result()
            progress(
                f"{setup.name} {result.instance}: {result.state}, "
                f"{'solved' if result.solved else 'unsolved'}, {dollars(result.spend.usd)}"
            )
            results[setup.name].append(result)
    configs = [
        {
            "name": setup.name,
            "path": str(setup.path),
            "summary": summary(results[setup.name]),
            "instances": [flat(r) for r in results[setup.name]],
        }
        for setup in setups
    ]
    return {"instances": [i.id for i in instances], "configs": configs}


def check(instances: list[inst.Instance], cache: Path, work: Path) -> bool:
    """Each instance fits its project: the tests pass without the bug, and fail with it,
    naming the instance's failing test."""
    env, fine = cli_env(), True
    for instance in instances:
        clean = inst.make_repo(instance, cache, work / "clean" / instance.id, planted=False)
        buggy = inst.make_repo(instance, cache, work / "buggy" / instance.id)
        before, out_before = inst.run_tests(instance, clean, env)
        after, out_after = inst.run_tests(instance, buggy, env)
        failing = inst.failing_tests(out_after)
        ok = before == 0 and after != 0 and inst.names(instance.fails, failing)
        fine &= ok
        said = "ok" if ok else "WRONG"
        tail = "" if before == 0 else f"; without the bug: {out_before.strip()[-300:]}"
        print(f"{said:<5} {instance.id}: exit {before} -> {after}, failing {failing}{tail}")
    return fine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", type=Path, default=[], metavar="FILE")
    parser.add_argument("--instances", type=int, metavar="N", help="the first N (all: 12)")
    parser.add_argument("--quick", action="store_true", help="the first 3 instances")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="builds at once")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--cache", type=Path, help="where sdists are kept between runs")
    parser.add_argument("--keep", type=Path, help="keep the repositories here")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per build")
    parser.add_argument("--check", action="store_true", help="check the instances themselves")
    args = parser.parse_args()
    try:
        if args.instances is not None and args.instances < 1:
            raise BadInput("--instances: at least 1")
        if args.jobs < 1:
            raise BadInput("--jobs: at least 1")
        if not args.check and not args.config:
            raise BadInput("give --config FILE (an .agentrun.toml to measure), or --check")
        if args.keep is not None and args.keep.is_dir() and any(args.keep.iterdir()):
            raise BadInput(f"--keep: {args.keep} is not empty (a run keeps its builds apart)")
        setups = [read_setup(p) for p in args.config]
        names = [s.name for s in setups]
        if len(set(names)) != len(names):
            raise BadInput("two configurations have one file name; their results would mix")
        count = 3 if args.quick and args.instances is None else args.instances
        instances = inst.select(inst.load(), count)
        cache = args.cache or Path.home() / ".cache" / "agentrun-outcomes"
        work = args.keep or Path(tempfile.mkdtemp(prefix="agentrun-outcomes-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            if args.check:
                return 0 if check(instances, cache, work) else 1
            report = measure(
                setups,
                instances,
                cache,
                work,
                args.jobs,
                args.timeout,
                progress=lambda line: print(line, file=sys.stderr, flush=True),
            )
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
    except (BadInput, inst.InstanceError) as err:
        print(f"outcomes: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_tables(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
