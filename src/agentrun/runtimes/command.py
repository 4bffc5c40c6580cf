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
from agentrun.runtimes.agent_cli import run_cli, stopped
from agentrun.runtimes.base import Handle, Probe, SessionControl, TurnResult, TurnRuntime, register


class CommandRuntime(TurnRuntime):
    def __init__(self, name: str, config: RuntimeConfig) -> None:
        assert config.command is not None
        super().__init__(name, config)
        self.argv = list(config.command)

    def _turn(self, handle: Handle, prompt: str, control: SessionControl) -> TurnResult:
        argv = [*self.argv, prompt] if self.config.prompt == "arg" else self.argv
        stdin_text = prompt if self.config.prompt == "stdin" else None
        env = self.environment(handle.spec)
        done = run_cli(argv, handle, control, env, control.on_activity, stdin_text)
        if not isinstance(done, procs.Finished):
            return done
        handle.transcript.append(done.output)
        usage = Usage(tokens_in=len(prompt) // 4, tokens_out=len(done.output) // 4)
        halted = stopped(done, handle, usage)
        if halted is not None:
            return halted
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
