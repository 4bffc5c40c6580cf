"""A build's task graph: tasks side by side against one after another, and the queue.

    .venv/bin/python bench/tasks.py [--quick]

1. Wall time of ``git agentrun run`` (a real process, the scripted runtime, a throwaway
   repository) for a plan of 4 independent tasks whose implement sessions each sleep
   5 s (1 s with ``--quick``), with ``[policy] max_parallel = 4``, against the same
   build with ``max_parallel = 1`` and a plan of one task with the same sleep, all in
   the same run (interleaved, median). The issue's target: parallel at most 1.5x the
   one-task build. Where a build's time goes is read from its log (an event's ``ts``
   is to the microsecond, its ``writer`` names the process): before the tasks, the
   task processes' start, the sessions, the queue, after; and how long a passed task
   waits to land.
2. The integration queue's own time per task: ``runner.tasks.integrate`` (merge, gate,
   fast-forward, ``task.integrated``), timed in-process on a prepared repository whose
   tasks passed (a real build stopped where its tasks are ready, then each task run
   to its end by a runner of its own, in this process), with no verify command, so no
   check runs and the gate is empty.
   Baseline in the same run: one plain ``git merge`` of the same two commits with the
   git CLI, in a worktree of the same repository.

The issue's third benchmark (3 best-of-N candidates against one) is bench/candidates.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pygit2
from _builds import Timed, cli_env, git, implement_sessions, timed_build

from agentrun.commands.build import create_build
from agentrun.events import SessionEnded, TaskIntegrated
from agentrun.kernel.decide import Integrate, decide
from agentrun.runner.build import BuildHandle, Silent
from agentrun.runner.loop import Runner
from agentrun.runner.tasks import integrate
from agentrun.runner.workspace import Workspace

GOAL = "Write one file per task"
TASKS = 4


def make_repo(path: Path, tasks: int, sleep: float, max_parallel: int) -> Path:
    """A repository whose scripted plan holds ``tasks`` independent tasks, each writing
    its own file in an implement session of ``sleep`` seconds; no verify command."""
    git(path.parent, "init", "-q", "-b", "main", str(path))
    (path / "README").write_text("bench\n")
    (path / ".agentrun.toml").write_text(
        '[roles]\ndefault = ["scripted"]\n\n'
        '[runtimes.scripted]\nkind = "script"\nscript = "agent-script.toml"\n\n'
        f"[policy]\nmax_parallel = {max_parallel}\n"
    )
    graph = [
        {"id": f"t{n}", "goal": f"write t{n}.txt", "deps": [], "paths": [f"t{n}.txt"]}
        for n in range(tasks)
    ]
    plan = f"# Plan\n\n```agentrun-tasks\n{json.dumps(graph)}\n```\n"
    steps = [f'[[step]]\nphase = "plan"\nverb = "plan"\ntext = {json.dumps(plan)}\n']
    for task in graph:
        name = task["id"]
        steps.append(
            f'[[step]]\nphase = "implement"\ntask = "{name}"\n'
            f'write = {{ "{name}.txt" = "{name}\\n" }}\nsleep = {sleep}\n'
        )
    (path / "agent-script.toml").write_text("\n".join(steps))
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def checked_build(repo_dir: Path, env: dict[str, str], tasks: int) -> Timed:
    """``git agentrun run`` to the end (``_builds.timed_build``), with every task landed."""
    run = timed_build(repo_dir, env, GOAL)
    landed = sum(isinstance(e.payload, TaskIntegrated) for e in run.events)
    if landed != tasks:
        raise RuntimeError(f"the build completed with {landed} of {tasks} task(s) landed")
    return run


def _at(ts: datetime) -> float:
    return ts.timestamp()


def profile(run: Timed) -> dict[str, float]:
    """Where one build's wall time went, read from its log: consecutive segments (they
    add up to the wall time), seconds each."""
    events = run.events
    builder = events[1].writer  # the build runner's first event is its runner.attached
    attached = [e for e in events if e.type == "runner.attached" and e.writer != builder]
    started = implement_sessions(events)
    ended = [
        _at(e.ts)
        for e in events
        if isinstance(e.payload, SessionEnded) and e.payload.session in started
    ]
    landed = [e for e in events if isinstance(e.payload, TaskIntegrated)]
    marks = [
        ("interpreter start + create", run.spawned),
        ("plan + plan review", _at(events[0].ts)),
        ("to the first task process's first event", _at(events[events.index(attached[0]) - 1].ts)),
        ("to the first implement session's start", _at(attached[0].ts)),
        ("implement sessions (first start to last end)", min(started.values())),
        ("task reviews, exits, the queue (to the last landing)", max(ended)),
        ("build review, proposal (to build.completed)", _at(landed[-1].ts)),
        ("to the process's exit", _at(events[-1].ts)),
    ]
    ends = [at for _, at in marks[1:]] + [run.ended]
    parts = {name: end - at for (name, at), end in zip(marks, ends, strict=True)}
    parts["(within them: the last session's start after the first's)"] = max(
        started.values()
    ) - min(started.values())
    return parts


def task_to_landed(run: Timed) -> list[float]:
    """Per task: its last event before the queue landed it, to its ``task.integrated``
    (the task process's exit, the build runner's poll, any landing queued before it)."""
    gaps = []
    for n, e in enumerate(run.events):
        if isinstance(e.payload, TaskIntegrated):
            task = e.payload.task
            last = next(x for x in reversed(run.events[:n]) if x.task == task)
            gaps.append(_at(e.ts) - _at(last.ts))
    return gaps


def builds(root: Path, sleep: float, reps: int, env: dict[str, str]) -> None:
    kinds = {
        "parallel": (TASKS, TASKS),  # (tasks, max_parallel)
        "serial": (TASKS, 1),
        "one-task": (1, TASKS),
    }
    runs: dict[str, list[Timed]] = {k: [] for k in kinds}
    for rep in range(reps):  # interleaved, so a noisy moment hits all three alike
        for kind, (tasks, parallel) in kinds.items():
            repo_dir = make_repo(root / f"{kind}-{rep}", tasks, sleep, parallel)
            runs[kind].append(checked_build(repo_dir, env, tasks))
    wall = {k: statistics.median(r.seconds for r in v) for k, v in runs.items()}
    print(f"builds: {TASKS} independent tasks, implement sessions of {sleep:g} s, median of {reps}")
    print(f"  {TASKS} tasks, max_parallel = {TASKS}  {wall['parallel']:8.2f} s")
    print(f"  {TASKS} tasks, max_parallel = 1  {wall['serial']:8.2f} s")
    print(f"  1 task                   {wall['one-task']:8.2f} s")
    for kind in ("parallel", "one-task"):
        print(f"  where the {kind} build's time went (median over runs, s):")
        parts = [profile(r) for r in runs[kind]]
        for name in parts[0]:
            print(f"    {name:<58} {statistics.median(p[name] for p in parts):6.2f}")
    gaps = [g for r in runs["parallel"] for g in task_to_landed(r)]
    print(
        f"  in the parallel builds, a task's last event to its landing: median "
        f"{statistics.median(gaps) * 1e3:.0f} ms, max {max(gaps) * 1e3:.0f} ms"
    )
    print(f"ratio parallel/serial: {wall['parallel'] / wall['serial']:.2f}")
    print(f"ratio parallel/one-task: {wall['parallel'] / wall['one-task']:.2f} (target <= 1.5)")


def prepared(path: Path) -> tuple[pygit2.Repository, str]:
    """A build whose tasks all passed and wait for the queue: stopped where its tasks
    are ready (``fan_out``), then each task run to its end by a runner of its own."""
    make_repo(path, TASKS, 0, TASKS)
    repo = pygit2.Repository(str(path))
    slug = create_build(repo, GOAL).slug
    runner = Runner(repo, slug, fan_out=True)
    if runner.run().waiting != "tasks":
        raise RuntimeError("the build did not stop at its tasks")
    for task in runner.ready:
        Runner(repo, slug, task=task).run()
    return repo, slug


@dataclass(frozen=True)
class Landing:
    seconds: float  # integrate()
    prepare: float  # the runner's workspace.prepare before it
    head: str  # the build head it landed on
    task_head: str


def landings(repo: pygit2.Repository, slug: str) -> list[Landing]:
    """Each landing the queue makes, timed, as the build's runner makes it."""
    build = BuildHandle(repo, slug, Silent(), writer="bench")
    workspace = Workspace(repo, slug, build.state.branch)
    timed = []
    while isinstance(work := decide(build.refresh()), Integrate):
        head = build.state.head
        t0 = time.perf_counter()
        workspace.prepare(head)
        t1 = time.perf_counter()
        integrate(build, workspace, work)
        timed.append(Landing(time.perf_counter() - t1, t1 - t0, head, work.head))
    if len(timed) != TASKS or build.refresh().head == timed[-1].head:
        raise RuntimeError(f"the queue landed {len(timed)} of {TASKS} tasks")
    return timed


def git_merges(path: Path, pairs: list[tuple[str, str]]) -> list[float]:
    """Seconds of one ``git merge`` of each pair, in a worktree of the same repository."""
    scratch = path.parent / f"{path.name}-merges"
    git(path, "worktree", "add", "-q", "--detach", str(scratch), pairs[0][0])
    times = []
    for head, task_head in pairs:
        git(scratch, "checkout", "-q", "--detach", head)
        t0 = time.perf_counter()
        git(scratch, "merge", "-q", "--no-edit", task_head)
        times.append(time.perf_counter() - t0)
    return times


def queue(root: Path, reps: int) -> None:
    done: list[Landing] = []
    merges: list[float] = []
    for rep in range(reps):
        path = root / f"queue-{rep}"
        timed = landings(*prepared(path))
        done += timed
        merges += git_merges(path, [(x.head, x.task_head) for x in timed])
    ours_ms = statistics.median(x.seconds for x in done) * 1e3
    prepare_ms = statistics.median(x.prepare for x in done) * 1e3
    merge_ms = statistics.median(merges) * 1e3
    print(f"queue: {reps} build(s) of {TASKS} passed tasks, no check command, median per task")
    print(f"  integrate() (merge, empty gate, fast-forward, event)  {ours_ms:8.1f} ms")
    print(
        f"    each landing in order, ms: {' '.join(f'{x.seconds * 1e3:.1f}' for x in done[:TASKS])}"
    )
    print(f"  (before it, the runner's workspace.prepare)            {prepare_ms:8.1f} ms")
    print(f"  baseline: one `git merge` of the same two commits     {merge_ms:8.1f} ms")
    print(f"ratio integrate/git-merge: {ours_ms / merge_ms:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 s sessions, one run")
    args = parser.parse_args()
    sleep, reps = (1.0, 1) if args.quick else (5.0, 3)

    env = cli_env()
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-tasks-") as tmp:
        builds(Path(tmp), sleep, reps, env)
        queue(Path(tmp), 2 if args.quick else 5)


if __name__ == "__main__":
    main()
