"""The ``script`` runtime: a deterministic agent described in a TOML file.

Used by the tests and the offline demo. Each ``[[step]]`` says, for a phase (and
optionally a round and attempt), what to write, what to run, and how to report::

    [[step]]
    phase = "implement"          # plan, plan-review, implement, code-review,
    round = 1                    #   verify:<step>, finalize:<step>
    write = { "pager.py" = "..." }
    verb = "done"                # plan, approve, revise, done, pass, fail, escalate, none
    text = "Fixed the bound"     # plan text, summary, reason or question
    findings = []                # for revise
    fail = "boom"                # the turn fails instead (permanent = true: for good)
    sleep = 0.5                  # wall-clock seconds (cancellable, counts against the budget)

The first step that matches is played; with none, the phase's default is played
(a one-line plan, approve, done, pass). Files are confined to the worktree.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pygit2
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrun import procs
from agentrun.agent.verbs import report
from agentrun.config import RuntimeConfig
from agentrun.errors import AgentrunError, GuardError, RuntimeSetupError
from agentrun.events import Usage
from agentrun.kernel.verbs import VerbReport
from agentrun.runtimes.base import (
    ABORTED,
    TIMEOUT,
    Handle,
    Probe,
    SessionControl,
    SessionSpec,
    TurnResult,
    TurnRuntime,
    halted,
    register,
)
from agentrun.runtimes.confine import confined

Verb = Literal["plan", "approve", "revise", "done", "pass", "fail", "escalate", "select", "none"]
DEFAULT_VERBS: dict[str, Verb] = {
    "plan": "plan",
    "plan-review": "approve",
    "code-review": "approve",
    "implement": "done",
    "reconcile": "done",
    "finalize": "done",
    "verify": "pass",
    "select": "select",
}


class ScriptStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: str
    round: int | None = None
    attempt: int | None = None
    task: str | None = None  # only in this task of the build's graph
    write: dict[str, str] = Field(default_factory=dict)
    delete: tuple[str, ...] = ()
    run: str | None = None
    commit: str | None = None
    sleep: float = 0.0
    say: str = ""
    verb: Verb | None = None
    text: str = ""
    findings: tuple[str, ...] = ()
    fail: str | None = None
    permanent: bool = False
    usage: Usage | None = None

    def matches(self, spec: SessionSpec) -> bool:
        return (
            self.phase == spec.phase
            and self.round in (None, spec.round)
            and self.attempt in (None, spec.attempt)
            and self.task in (None, spec.task)
        )


class Script(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    step: tuple[ScriptStep, ...] = ()


def load_script(path: Path) -> Script:
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return Script.model_validate(data)
    except OSError as exc:
        raise RuntimeSetupError(f"cannot read agent script {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RuntimeSetupError(f"{path}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise RuntimeSetupError(f"{path} at `{where}`: {err['msg']}") from None


class ScriptRuntime(TurnRuntime):
    """Plays the script's step for the phase; the prompt is not read, a message is noted."""

    def __init__(self, name: str, config: RuntimeConfig) -> None:
        assert config.script is not None
        super().__init__(name, config)
        self.path = Path(config.script)
        self.model = config.model

    def open(self, spec: SessionSpec, control: SessionControl) -> Handle:
        return Handle(spec, runtime_session_id=f"script:{spec.session}")

    def resume(self, handle: Handle, message: str, control: SessionControl) -> TurnResult:
        handle.transcript.append(f"> {message}\n")
        return super().resume(handle, message, control)

    def _turn(self, handle: Handle, prompt: str, control: SessionControl) -> TurnResult:
        spec = handle.spec
        path = self.path if self.path.is_absolute() else spec.repo_root / self.path
        say = handle.transcript.append
        try:
            script = load_script(path)
        except RuntimeSetupError as exc:
            say(f"{exc}\n")
            return TurnResult(ok=False, error=str(exc), permanent=True, cause="setup")
        step = next((s for s in script.step if s.matches(spec)), None)
        step = step or ScriptStep(phase=spec.phase)
        say(f"[script] {spec.phase}@{spec.round} attempt {spec.attempt}\n")
        if spec.resume_from:
            say(f"[script] continuing session {spec.resume_from}\n")
        usage = step.usage or Usage(
            tokens_in=len(spec.prompt) // 4,
            tokens_out=len(step.text) // 4,
            # No model answers a scripted agent: it costs nothing, unless the runtime is
            # configured to stand for a model, whose price then applies.
            cost_usd=None if self.model else 0.0,
        )
        started = time.monotonic()
        if step.say:
            say(step.say + "\n")
            control.on_activity(step.say)
        if step.sleep:
            budget_left = spec.budget_seconds - (time.monotonic() - started)
            if control.cancel.wait(min(step.sleep, max(budget_left, 0))):
                return halted(spec, ABORTED, usage)
            if step.sleep > budget_left:
                return halted(spec, TIMEOUT, usage)
        if step.fail is not None:
            say(f"[script] failing: {step.fail}\n")
            return TurnResult(
                ok=False, usage=usage, error=step.fail, permanent=step.permanent, cause="script"
            )
        try:
            self._edit(spec, step, control, say)
            verb = step.verb or DEFAULT_VERBS.get(spec.phase.split(":", 1)[0], "none")
            if verb != "none":
                text = step.text or _default_text(verb, spec)
                env = spec.agent_env()
                repo = pygit2.Repository(str(spec.log_repository()))
                said = report(repo, env, VerbReport(verb, text, step.findings))
                say(f"[script] {said}\n")
                control.on_activity(said)
        except AgentrunError as exc:
            say(f"[script] {exc}\n")
            permanent = isinstance(exc, GuardError)
            return TurnResult(
                ok=False, usage=usage, error=str(exc), permanent=permanent, cause="script"
            )
        return TurnResult(ok=True, text=step.text, usage=usage)

    def _edit(
        self, spec: SessionSpec, step: ScriptStep, control: SessionControl, say: object
    ) -> None:
        assert callable(say)
        for relative, content in step.write.items():
            target = confined(spec.workdir, relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            say(f"[script] wrote {relative}\n")
        for relative in step.delete:
            confined(spec.workdir, relative).unlink(missing_ok=True)
            say(f"[script] deleted {relative}\n")
        if step.run:
            done = procs.run_tree(
                ["bash", "-c", step.run],
                cwd=spec.workdir,
                env=spec.env,
                timeout=spec.budget_seconds,
                cancel=control.cancel,
                on_line=control.on_activity,
                on_start=control.on_process,
            )
            say(done.output)
        if step.commit:
            procs.run_tree(
                ["bash", "-c", 'git add -A && git commit -q -m "$1"', "commit", step.commit],
                cwd=spec.workdir,
                env=spec.env,
                timeout=60,
            )
            say(f"[script] committed: {step.commit}\n")


def _default_text(verb: str, spec: SessionSpec) -> str:
    if verb == "plan":
        return f"Plan for {spec.build}: make the change the goal asks for, with a test."
    if verb == "escalate":
        return "What should I do?"
    if verb == "select":
        return "1"
    if verb == "fail":
        return "verification failed"
    return ""


def probe(config: RuntimeConfig, environ: Mapping[str, str]) -> Probe:
    """A script is resolved against the repository root when it runs; here, the cwd."""
    assert config.script is not None
    path = Path(config.script)
    if path.exists():
        return Probe(True, f"script {path}")
    return Probe(False, f"script {path} not found (relative paths are from the repository root)")


register("script", ScriptRuntime, probe)
