"""Processes: who we are (for leases), and ending a whole process tree (DESIGN §12).

Pids are reused and hostnames collide, so a process is named by host, boot id, pid
and start time (liveness.py reads them, and says whether a process still runs). Trees
are ended with psutil, descendants included, not only the process group: an agent may
start its own sessions.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from agentrun.liveness import boot_id as boot_id
from agentrun.liveness import host
from agentrun.liveness import is_alive as is_alive
from agentrun.liveness import start_time as start_time

GRACE_SECONDS = 3.0


@dataclass(frozen=True)
class ProcessId:
    host: str
    boot_id: str
    pid: int
    start: float


def me() -> ProcessId:
    pid = os.getpid()
    return ProcessId(host(), boot_id(), pid, start_time(pid) or 0.0)


def end_tree(root_pid: int, grace: float = GRACE_SECONDS, via: Sequence[str] = ()) -> list[int]:
    """End ``root_pid``, its process group and all their descendants. Returns the pids ended.

    Processes this one may not signal (an agent running as another account) are signalled
    through ``via`` (e.g. ``sudo -n``) when given.
    """
    procs: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(root_pid)
        procs[root.pid] = root
        for child in root.children(recursive=True):
            procs[child.pid] = child
    except psutil.NoSuchProcess:
        pass
    for proc in _group_members(root_pid):
        procs.setdefault(proc.pid, proc)
    return _terminate(list(procs.values()), grace, via)


def end_group(pgid: int, grace: float = GRACE_SECONDS, via: Sequence[str] = ()) -> list[int]:
    """End what is left of a process group (and its members' descendants)."""
    procs: dict[int, psutil.Process] = {}
    for proc in _group_members(pgid):
        procs[proc.pid] = proc
        try:
            for child in proc.children(recursive=True):
                procs.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            continue
    return _terminate(list(procs.values()), grace, via)


def _group_members(pgid: int) -> list[psutil.Process]:
    if pgid <= 1 or pgid == os.getpgrp():
        return []
    try:
        os.killpg(pgid, 0)  # one call says whether the group has any member left
    except ProcessLookupError:
        return []  # the usual end: no need to look through every process
    except PermissionError:
        pass  # a member this process may not signal: look for them all
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return members


def _terminate(procs: list[psutil.Process], grace: float, via: Sequence[str]) -> list[int]:
    mine = os.getpid()
    procs = [p for p in procs if p.pid != mine]
    _signal(procs, signal.SIGTERM, via)
    _, alive = psutil.wait_procs(procs, timeout=grace)
    _signal(alive, signal.SIGKILL, via)
    psutil.wait_procs(alive, timeout=grace)
    return sorted(p.pid for p in procs)


def _signal(procs: list[psutil.Process], sig: signal.Signals, via: Sequence[str]) -> None:
    denied = []
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            continue
        except psutil.AccessDenied:
            denied.append(str(proc.pid))
    if denied and via:
        subprocess.run(
            [*via, "kill", f"-{sig.name.removeprefix('SIG')}", *denied],
            capture_output=True,
            check=False,
            timeout=30,
        )


class Sandbox(Protocol):
    """Where a program runs isolated (``agentrun.isolation``): how to start and signal it."""

    @property
    def signal_via(self) -> tuple[str, ...]: ...

    def wrap(
        self, argv: list[str], env: dict[str, str], cwd: Path
    ) -> tuple[list[str], dict[str, str]]: ...


@dataclass
class Finished:
    exit_code: int | None
    output: str
    timed_out: bool = False
    cancelled: bool = False


POLL_SECONDS = 0.05  # how often a running program's deadline and cancel are looked at


def _exit_signal(pid: int) -> int | None:
    """A file descriptor that becomes readable when ``pid`` exits (Linux), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited(proc: subprocess.Popen[bytes], exited: int | None, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``proc`` to exit; True when it has (and is reaped).

    With a pidfd the wait ends the moment the program exits; ``Popen.wait``'s own
    timeout polls with growing pauses, which costs up to tens of ms per program.
    """
    if exited is None:
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True
    waiting = select.poll()
    waiting.register(exited, select.POLLIN)
    waiting.poll(seconds * 1000)
    return proc.poll() is not None


def run_tree(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    stdin_text: str | None = None,
    cancel: threading.Event | None = None,
    on_line: Callable[[str], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    sandbox: Sandbox | None = None,
) -> Finished:
    """Run a program in its own session; end its whole tree on timeout or cancel.

    Output (stdout and stderr together) is streamed to ``on_line`` and returned whole.
    With ``sandbox``, the program runs inside it (its argv and environment rewritten).
    """
    via: tuple[str, ...] = ()
    if sandbox is not None:
        argv, env = sandbox.wrap(argv, env, cwd)
        via = sandbox.signal_via
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    if on_start is not None:
        on_start(proc.pid)
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            if on_line is not None:
                on_line(line.rstrip("\n"))

    def feed() -> None:
        # In a thread: a program that never reads its input must not stall the deadline.
        assert proc.stdin is not None
        try:
            proc.stdin.write((stdin_text or "").encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    if stdin_text is not None:
        threading.Thread(target=feed, daemon=True).start()
    deadline = time.monotonic() + timeout
    timed_out = cancelled = False
    exited = _exit_signal(proc.pid)
    try:
        while True:
            if _exited(proc, exited, POLL_SECONDS):
                break
            if cancel is not None and cancel.is_set():
                cancelled = True
            elif time.monotonic() > deadline:
                timed_out = True
            if timed_out or cancelled:
                end_tree(proc.pid, via=via)
                proc.wait()
                break
    except KeyboardInterrupt:
        # The program runs in a session of its own, so the terminal's Ctrl-C never
        # reached it: end its tree before letting the interrupt go on.
        end_tree(proc.pid, via=via)
        proc.wait()
        raise
    finally:
        if exited is not None:
            os.close(exited)
    # Descendants that outlived the leader would hold the pipe open: end them too.
    end_group(proc.pid, grace=0.5, via=via)
    reader.join(timeout=5)
    return Finished(
        exit_code=None if (timed_out or cancelled) else proc.returncode,
        output="".join(lines),
        timed_out=timed_out,
        cancelled=cancelled,
    )
