"""The ``command`` runtime: any program as an agent (DESIGN §10's example shape).

The program gets the phase prompt on stdin (or as its last argument), runs in the
worktree with AGENTRUN_BUILD / AGENTRUN_PHASE / AGENTRUN_SESSION set, and reports with
``git agentrun agent …``. Its stdout and stderr become the session transcript.

Its usage is what it reports with ``git agentrun agent usage`` (each call adds), and
"unreported" when it reports none: the runtime cannot see what the program spent, and
does not guess. The reports are read as they come (every :data:`POLL_SECONDS`); once
their total crosses what the build's budget left the session (``max_tokens``), the
program's tree is ended, so a build goes past its budget by at most one report.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from agentrun import procs
from agentrun.agent.usage import Tally
from agentrun.config import RuntimeConfig
from agentrun.events import Usage
from agentrun.runtimes.agent_cli import EitherEvent, run_cli, stopped
from agentrun.runtimes.base import (
    BUDGET,
    Handle,
    Probe,
    SessionControl,
    TurnResult,
    TurnRuntime,
    register,
)

POLL_SECONDS = 0.1  # how often the program's usage reports are read while it runs


@dataclass
class CommandHandle(Handle):
    """A command session: its usage reports, read across its turns."""

    tally: Tally | None = None


class UsageWatch:
    """Reads a session's usage reports while its program runs, and ends the program
    (through ``stop``) once their total crosses the session's token cap."""

    def __init__(self, handle: CommandHandle, tally: Tally, stop: threading.Event) -> None:
        self.limit = handle.spec.max_tokens
        self.tally = tally
        self.stop = stop
        self.over: str | None = None  # why the budget is spent (None: it is not)
        self.added: Usage | None = None  # what this turn's reports add
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="agentrun-usage")
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(POLL_SECONDS):
            self._read()

    def _read(self) -> None:
        added = self.tally.take()
        if added is not None:
            self.added = added if self.added is None else self.added + added
        spent = self.tally.tokens
        if self.over is None and self.limit is not None and spent >= self.limit:
            self.over = (
                f"the agent reported {spent:,} tokens and the build's budget left the session "
                f"{self.limit:,}: its process tree was ended"
            )
            self.stop.set()

    def finish(self) -> Usage:
        """Stop watching, read what came last; this turn's usage (unreported: none came)."""
        self._done.set()
        self._thread.join()
        self._read()
        return self.added or Usage(reported=False)


class CommandRuntime(TurnRuntime):
    handle_type = CommandHandle

    def __init__(self, name: str, config: RuntimeConfig) -> None:
        assert config.command is not None
        super().__init__(name, config)
        self.argv = list(config.command)

    def _turn(self, handle: Handle, prompt: str, control: SessionControl) -> TurnResult:
        assert isinstance(handle, CommandHandle)
        argv = [*self.argv, prompt] if self.config.prompt == "arg" else self.argv
        stdin_text = prompt if self.config.prompt == "stdin" else None
        env = self.environment(handle.spec)
        if handle.tally is None:
            handle.tally = Tally(handle.spec.workdir, handle.spec.session)
        stop = EitherEvent(control.cancel)
        watch = UsageWatch(handle, handle.tally, stop)
        try:
            done = run_cli(argv, handle, control, env, control.on_activity, stdin_text, stop)
        finally:
            usage = watch.finish()
        if isinstance(done, procs.Finished):
            handle.transcript.append(done.output)
        handle.transcript += [f"{line}\n" for line in handle.tally.said]
        handle.tally.said.clear()
        if not isinstance(done, procs.Finished):
            return done
        return outcome(done, handle, usage, watch.over, argv[0])


def outcome(
    done: procs.Finished, handle: Handle, usage: Usage, over: str | None, program: str
) -> TurnResult:
    """The turn's result: ended at the budget, ended from outside, failed, or done."""
    if over is not None and not (done.exit_code == 0 and not done.cancelled):
        handle.transcript.append(f"[agentrun] {over}\n")
        return TurnResult(ok=False, usage=usage, error=over, cause=BUDGET)
    halted = stopped(done, handle, usage)
    if halted is not None:
        return halted
    if done.exit_code != 0:
        tail = done.output.strip().splitlines()[-1:] or [""]
        return TurnResult(
            ok=False,
            usage=usage,
            cause="exit",
            error=f"{program} exited with status {done.exit_code}: {tail[0][:200]}",
        )
    return TurnResult(ok=True, text=done.output, usage=usage)


def probe(config: RuntimeConfig, environ: Mapping[str, str]) -> Probe:
    assert config.command is not None
    program = config.command[0]
    found = shutil.which(program, path=environ.get("PATH"))
    return Probe(True, f"{program} at {found}") if found else Probe(False, f"{program} not found")


register("command", CommandRuntime, probe)
