"""Deterministic steps the kernel runs itself: verify checks and finalize commands.

A check is a recorded command and its exit code, run in the worktree with no agent
session. Its report (command, output, exit code) is an artifact of the log; a failing
check's output tail becomes the next implement round's feedback.
"""

from __future__ import annotations

import threading

from agentrun import isolation, procs
from agentrun.environment import session_env
from agentrun.errors import GuardError
from agentrun.gitrepo import common_dir
from agentrun.kernel import checks as record
from agentrun.kernel.decide import RunCheck, RunFinalizeStep
from agentrun.runner.build import BuildHandle
from agentrun.runner.watch import AbortWatcher
from agentrun.runner.workspace import PhaseMark, Workspace
from agentrun.store.notes import add_note

REPORT_LIMIT = 64 * 1024


def _run_step(
    build: BuildHandle, workspace: Workspace, phase: str, round_: int, attempt: int, command: str
) -> procs.Finished | None:
    """Run a step's command; None when it was cut short (recorded as interrupted)."""
    try:
        done = _run_command(build, workspace, phase, command)
    except KeyboardInterrupt:
        build.append([record.cut_short(phase, round_, attempt)])
        raise
    if done.cancelled:
        build.append([record.cut_short(phase, round_, attempt, "cancelled")])
        return None
    return done


def _run_command(
    build: BuildHandle, workspace: Workspace, phase: str, command: str
) -> procs.Finished:
    """Run a step's command in the worktree; an abort request cancels it at once."""
    config = build.state.config
    family, _, name = phase.partition(":")
    steps = config.verify if family == "verify" else config.finalize
    pass_env = next((s.pass_env for s in steps if s.name == name), ())
    argv = ["bash", "-c", command]
    return run_in_worktree(
        build, workspace, phase, argv, config.policy.check_timeout_seconds, pass_env
    )


def run_in_worktree(
    build: BuildHandle,
    workspace: Workspace,
    phase: str,
    argv: list[str],
    timeout: float,
    pass_env: tuple[str, ...],
) -> procs.Finished:
    """A command that runs the agent's code (tests, a build script, setup): in the
    worktree, with the checks' environment, isolated as the agent was, and cancelled at
    once by an abort request."""
    state = build.state
    env = session_env(
        state.slug,
        phase,
        state.impl_round,
        "none",
        git_dir=common_dir(build.repo),
        secret=state.config.secrets.env,
        pass_env=pass_env,
        task=state.task,
    )
    sandbox = isolation.for_worktree(build.repo, state.config, state.slug, workspace.path)
    cancel = threading.Event()
    watcher = AbortWatcher(build.repo, state.slug, cancel, seen=build.judged())
    try:
        return procs.run_tree(
            argv,
            cwd=workspace.path,
            env=env,
            timeout=timeout,
            cancel=cancel,
            on_line=build.observer.activity,
            sandbox=sandbox,
        )
    finally:
        watcher.stop()


def report_of(command: str, done: procs.Finished, timeout: float) -> tuple[bytes, str]:
    if done.timed_out:
        status = f"timed out after {timeout:g}s (process tree ended)"
    else:
        status = f"exit {done.exit_code}"
    text = f"$ {command}\n{done.output}\n[{status}]\n"
    data = text.encode()
    if len(data) > REPORT_LIMIT:
        data = b"[... output cut ...]\n" + data[-REPORT_LIMIT:]
    return data, status


def run_check(build: BuildHandle, workspace: Workspace, work: RunCheck) -> None:
    state = build.state
    phase = f"verify:{work.step}"
    build.append([record.check_started(work)], fact=False)
    done = _run_step(build, workspace, phase, work.round, work.attempt, work.command)
    if done is None:
        return
    timeout = state.config.policy.check_timeout_seconds
    report, status = report_of(work.command, done, timeout)
    outcome = "pass" if done.exit_code == 0 else "fail"
    mark = PhaseMark(
        state.slug, phase, work.round, None, f"{work.step} {outcome} ({status})", state.task
    )
    head = workspace.commit_empty(state.head, mark)
    build.append([record.check_completed(work, done.exit_code, status, done.output, report, head)])
    add_note(
        build.repo,
        head,
        {
            "build": state.slug,
            "phase": phase,
            "round": work.round,
            "command": work.command,
            "outcome": outcome,
            "exit_code": done.exit_code,
        },
    )
    if outcome == "pass":
        from agentrun.runner.memory import verify_passed

        verify_passed(build, work.step, work.command, work.round)


def run_finalize_step(build: BuildHandle, workspace: Workspace, work: RunFinalizeStep) -> None:
    """A finalize command, or giving up on a step that kept being interrupted."""
    state = build.state
    phase = f"finalize:{work.step}"
    if work.give_up or work.command is None:
        build.append(record.given_up(work), fact=False)
        return
    build.append([record.finalize_started(work)], fact=False)
    done = _run_step(build, workspace, phase, state.impl_round, work.attempt, work.command)
    if done is None:
        return
    report, status = report_of(work.command, done, state.config.policy.check_timeout_seconds)
    head = None
    note = f"`{work.command}` {status}"
    if done.exit_code == 0:
        mark = PhaseMark(state.slug, phase, state.impl_round, None, f"{work.step} ({status})")
        try:
            head, note = workspace.commit_phase(state.head, mark, config=state.config), ""
        except GuardError as exc:
            note = str(exc)
    build.append(record.finalize_ended(work, head, note, report))
