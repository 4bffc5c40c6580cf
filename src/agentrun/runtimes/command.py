"""The ``command`` runtime: any program as an agent (DESIGN §10's example shape).

The program gets the phase prompt on stdin (or as its last argument), runs in the
worktree with AGENTRUN_BUILD / AGENTRUN_PHASE / AGENTRUN_SESSION set, and reports with
``git agentrun agent …``. Its stdout and stderr become the session transcript.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from agentrun import procs
from agentrun.config import RuntimeConfig
from agentrun.events import Usage
from agentrun.runtimes.base import (
    UNAVAILABLE,
    Handle,
    Probe,
    SessionControl,
    SessionSpec,
    Transcript,
    TurnResult,
    end_transcript,
    register,
)


class CommandRuntime:
    def __init__(self, name: str, config: RuntimeConfig) -> None:
        assert config.command is not None
        self.name = name
        self.config = config
        self.argv = list(config.command)

    def start(self, spec: SessionSpec, control: SessionControl) -> tuple[Handle, TurnResult]:
        handle = Handle(spec)
        return handle, self._turn(handle, spec.prompt, control)

    def resume(self, handle: Handle, message: str, control: SessionControl) -> TurnResult:
        return self._turn(handle, message, control)

    def end(self, handle: Handle) -> Transcript:
        return end_transcript(handle)

    def _turn(self, handle: Handle, prompt: str, control: SessionControl) -> TurnResult:
        spec = handle.spec
        argv = [*self.argv, prompt] if self.config.prompt == "arg" else self.argv
        env = {**spec.env, **self.config.env}

        def line(text: str) -> None:
            control.on_activity(text)

        try:
            done = procs.run_tree(
                argv,
                cwd=spec.workdir,
                env=env,
                timeout=spec.budget_seconds,
                stdin_text=prompt if self.config.prompt == "stdin" else None,
                cancel=control.cancel,
                on_line=line,
                on_start=control.on_process,
                sandbox=spec.sandbox,
            )
        except OSError as exc:
            error = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
            handle.transcript.append(error + "\n")
            return TurnResult(ok=False, error=error, permanent=True, cause=UNAVAILABLE)
        handle.transcript.append(done.output)
        usage = Usage(tokens_in=len(prompt) // 4, tokens_out=len(done.output) // 4)
        if done.timed_out:
            return TurnResult(
                ok=False,
                usage=usage,
                cause="timeout",
                error=(
                    f"the session ran past its budget of {spec.budget_seconds:g}s; "
                    "its process tree was ended"
                ),
            )
        if done.cancelled:
            return TurnResult(ok=False, usage=usage, cause="aborted", error="session cancelled")
        if done.exit_code != 0:
            tail = done.output.strip().splitlines()[-1:] or [""]
            return TurnResult(
                ok=False,
                usage=usage,
                cause="exit",
                error=f"{argv[0]} exited with status {done.exit_code}: {tail[0][:200]}",
            )
        return TurnResult(ok=True, text=done.output, usage=usage)


def probe(config: RuntimeConfig, environ: Mapping[str, str]) -> Probe:
    assert config.command is not None
    program = config.command[0]
    found = shutil.which(program, path=environ.get("PATH"))
    return Probe(True, f"{program} at {found}") if found else Probe(False, f"{program} not found")


register("command", CommandRuntime, probe)
