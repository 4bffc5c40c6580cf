"""The build runner's side of a task graph: task runners side by side, and the
integration queue.

Each ready task runs in a process of its own, ``git agentrun task SLUG ID``: the very
command a CI matrix job runs, so a task runs the same on this machine or on another.
It claims the task's lease (a second claim exits 7), runs the task's phases in the
task's worktree and appends the task's events; the build's runner only watches the log.
Agent sessions take slots (``runner.slots``), so ``max_parallel`` holds however many
task processes there are.

The queue lands a passing task on the build branch, in the graph's order: the task is
merged onto the build head, the verify commands its changes call for run on the merge,
and the build branch moves there. A conflict sends the task to reconcile onto the build
head, a failing gate back to implement with the output as feedback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2

from agentrun import events as ev
from agentrun.gitrepo import agentrun_dir, signature
from agentrun.kernel.decide import Integrate, RunTasks
from agentrun.kernel.draft import Draft
from agentrun.kernel.paths import any_matches
from agentrun.kernel.tasks import branch_of
from agentrun.runner.build import BuildHandle
from agentrun.runner.checks import report_of, run_in_worktree
from agentrun.runner.workspace import PhaseMark, Workspace
from agentrun.store.log import build_ref

POLL_SECONDS = 0.5
GATE_TAIL = 4000
HELD = 7  # the task command's exit when another job holds the task
HELD_RETRY_SECONDS = 15.0


def logs_dir(repo: pygit2.Repository, slug: str) -> Path:
    """Where the task processes of build ``slug`` write their output (``<task>.log``)."""
    return agentrun_dir(repo) / "tasks" / slug


@dataclass
class _Child:
    task: str
    process: subprocess.Popen[bytes]
    log: Path


class TaskPool:
    """The task processes one build runner started, and what became of them."""

    def __init__(self, repo: pygit2.Repository, slug: str, remote: str | None) -> None:
        self.repo, self.slug, self.remote = repo, slug, remote
        self.children: dict[str, _Child] = {}
        # Tasks another job runs (their process exited 7), and when to look again: the
        # other job's lease lapses if it dies, and then a process of ours takes over.
        self.held_elsewhere: dict[str, float] = {}
        self.failures: list[str] = []

    def run(self, decision: RunTasks, stop_at: float | None) -> None:
        """Start a process for each ready task not running yet, then wait a moment for
        one to end or the log to move (the caller re-decides either way)."""
        now = time.monotonic()
        for task in decision.ready:
            if task not in self.children and self.held_elsewhere.get(task, 0.0) <= now:
                self._start(task, stop_at)
        log = self.repo.references.get(build_ref(self.slug))
        seen = log.target if log is not None else None
        deadline = time.monotonic() + POLL_SECONDS
        while time.monotonic() < deadline:
            if self._reap():
                return
            time.sleep(0.05)
            log = self.repo.references.get(build_ref(self.slug))
            if log is not None and log.target != seen:
                return

    def _start(self, task: str, stop_at: float | None) -> None:
        folder = logs_dir(self.repo, self.slug)
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"{task}.log"
        argv = [sys.executable, "-m", "agentrun", "task", self.slug, task, "--quiet"]
        if self.remote:
            argv += ["--remote", self.remote]
        if stop_at is not None:
            argv += ["--time-limit", f"{max(stop_at - time.monotonic(), 1.0) / 60:.3f}"]
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv,
                cwd=self.repo.workdir or None,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own group: ending a session's tree in it never reaches this runner.
                start_new_session=True,
            )
        self.children[task] = _Child(task, process, log)

    def _reap(self) -> bool:
        """Take in the processes that ended; True if one did."""
        ended = False
        for task, child in list(self.children.items()):
            code = child.process.poll()
            if code is None:
                continue
            ended = True
            del self.children[task]
            if code == HELD:
                self.held_elsewhere[task] = time.monotonic() + HELD_RETRY_SECONDS
            elif code not in (0, 4, 5, 6, 7):
                tail = child.log.read_text(errors="replace").strip().splitlines()[-1:]
                self.failures.append(f"task {task} exited {code}: {' '.join(tail)}")
        return ended

    def interrupt(self) -> None:
        """Ctrl-C or a time limit: each task process records its phase as interrupted."""
        for child in self.children.values():
            try:
                os.killpg(child.process.pid, signal.SIGINT)
            except ProcessLookupError:
                continue

    def wait(self) -> None:
        """Until every task process ended (each stops at its next boundary once the
        build is paused, aborted, or out of time)."""
        for child in list(self.children.values()):
            child.process.wait()
        self._reap()


def integrate(build: BuildHandle, workspace: Workspace, work: Integrate) -> None:
    """Land one passing task: merge, gate, move the build branch (``task.integrated``);
    or send it back (``task.returned``)."""
    repo, state = build.repo, build.state
    head = state.head
    if repo.descendant_of(work.head, head) or work.head == head:
        # Nothing landed since the task started: the task's own verify steps ran on
        # exactly this tree, so the branch moves there without a second run.
        _landed(build, workspace, work, work.head)
        return
    if repo.descendant_of(head, work.head):
        _landed(build, workspace, work, head)  # already in (an earlier landing carried it)
        return
    index = repo.merge_commits(pygit2.Oid(hex=head), pygit2.Oid(hex=work.head))
    if index.conflicts is not None:
        paths = sorted({(e[0] or e[1] or e[2]).path for e in index.conflicts if any(e)})
        reason = "merging it onto the build head left conflicts in: " + ", ".join(paths)
        _returned(build, work, "conflict", reason)
        return
    tree = index.write_tree(repo)
    branch = branch_of(state.branch, work.task)
    mark = PhaseMark(state.slug, f"integrate:{work.task}", state.impl_round, None, branch)
    sig = signature()
    merged = str(
        repo.create_commit(
            None, sig, sig, mark.message(), tree, [pygit2.Oid(hex=head), pygit2.Oid(hex=work.head)]
        )
    )
    failed, report = _gate(build, workspace, work, merged)
    if failed:
        _returned(build, work, "gate", failed, report)
        return
    _landed(build, workspace, work, merged, report)


def _gate(
    build: BuildHandle, workspace: Workspace, work: Integrate, merged: str
) -> tuple[str, dict[str, bytes]]:
    """Run the verify commands the task's changes call for on the merge; what failed
    ("" when all passed) and the reports."""
    state = build.state
    steps = [
        s
        for s in state.config.verify
        if s.command is not None and (not s.paths or any_matches(s.paths, work.changed_paths))
    ]
    if not steps:
        return "", {}
    workspace.prepare(merged)
    reports: dict[str, bytes] = {}
    timeout = state.config.policy.check_timeout_seconds
    for step in steps:
        assert step.command is not None
        phase = f"verify:{step.name}"
        done = run_in_worktree(
            build, workspace, phase, ["bash", "-c", step.command], timeout, step.pass_env
        )
        data, status = report_of(step.command, done, timeout)
        reports[f"gate-{work.task}-{step.name}-{merged[:10]}.txt"] = data
        if done.exit_code != 0:
            return f"`{step.name}` ({status}):\n{done.output[-GATE_TAIL:]}", reports
    return "", reports


def _landed(
    build: BuildHandle,
    workspace: Workspace,
    work: Integrate,
    head: str,
    reports: dict[str, bytes] | None = None,
) -> None:
    paths = workspace.changed_paths(build.state.base_sha, head)
    # The fast-forward, before the log says so: a runner killed in between finds the
    # branch ahead of the log's head, and the next phase resets it (DESIGN §12).
    build.repo.references.create(workspace.branch_ref, pygit2.Oid(hex=head), force=True)
    landed = ev.TaskIntegrated(task=work.task, head=head, changed_paths=paths)
    # A fact: only this runner lands tasks, so what task runners appended meanwhile
    # changes neither the build head nor this task's passed head.
    build.append([Draft(landed, artifacts=reports or {})])


def _returned(
    build: BuildHandle,
    work: Integrate,
    why: Literal["conflict", "gate"],
    reason: str,
    reports: dict[str, bytes] | None = None,
) -> None:
    back = ev.TaskReturned(task=work.task, why=why, base_sha=build.state.head, reason=reason)
    build.append([Draft(back, artifacts=reports or {})])
