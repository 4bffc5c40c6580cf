"""What the ``claude``, ``codex`` and ``aider`` runtimes share.

Each runs a real CLI as a subprocess in the build's worktree, through
:func:`agentrun.procs.run_tree` (its own session, the whole tree ended on timeout,
cancel or Ctrl-C), and turns what it printed into a transcript, usage and a
:class:`TurnResult` whose cause tells the runner what to do next: a missing binary,
a refused connection, a 429 or a 5xx is ``unavailable`` (the next alternate takes
over), a rejected or missing key is ``auth`` (permanent, naming the variable). An HTTP
status a CLI reports is classified by the shared table (``runtimes.failures``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrun import procs
from agentrun.config import RuntimeConfig
from agentrun.events import Usage
from agentrun.runtimes.base import (
    ABORTED,
    AUTH,
    TIMEOUT,
    UNAVAILABLE,
    Handle,
    Probe,
    SessionControl,
    SessionSpec,
    Transcript,
    TurnResult,
    end_transcript,
)
from agentrun.runtimes.failures import describe, for_status

EXIT = "exit"
VERSION_TIMEOUT = 20.0
ACTIVITY_CHARS = 160

# Known failure lines of the three CLIs (and the HTTP libraries under them). Auth is
# checked first: "401 Unauthorized" must not read as an availability problem.
_AUTH = re.compile(
    r"\b40[13]\b|unauthori[sz]ed|forbidden|invalid (x-)?api[ -]?key|authentication|"
    r"not logged in|missing environment variable|api key (is )?(not set|missing)|"
    r"not able to authenticate",
    re.IGNORECASE,
)
_STATUS = re.compile(r"\bstatus:? ([45]\d\d)\b", re.IGNORECASE)
_UNAVAILABLE = re.compile(
    r"\b(429|5\d\d)\b|too many requests|rate[ _-]?limit|overloaded|high demand|"
    r"connection (refused|failed|error|reset)|econnrefused|econnreset|enotfound|"
    r"service unavailable|internal server error|servers are down|stream disconnected|"
    r"timed? ?out|network",
    re.IGNORECASE,
)


@dataclass
class CliHandle(Handle):
    """A CLI session: when it started, so that every turn shares one wall-clock budget."""

    started: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        return self.spec.budget_seconds - (time.monotonic() - self.started)


class CliRuntime(ABC):
    """What the CLI runtimes share: a session is a handle and turns of the CLI."""

    def __init__(self, name: str, config: RuntimeConfig) -> None:
        self.name = name
        self.config = config

    def start(self, spec: SessionSpec, control: SessionControl) -> tuple[Handle, TurnResult]:
        handle = CliHandle(spec)
        return handle, self._turn(handle, spec.prompt, control, spec.resume_from)

    def resume(self, handle: Handle, message: str, control: SessionControl) -> TurnResult:
        assert isinstance(handle, CliHandle)
        return self._turn(handle, message, control, handle.runtime_session_id)

    def end(self, handle: Handle) -> Transcript:
        return end_transcript(handle)

    @abstractmethod
    def _turn(
        self, handle: CliHandle, prompt: str, control: SessionControl, resume: str | None
    ) -> TurnResult:
        """Run the CLI once: a new session, or ``resume`` the CLI's own session id."""


def locate(config: RuntimeConfig, default: str, path: str | None) -> str | None:
    """The CLI's executable: config ``binary`` (a path or a name), else ``default`` on PATH."""
    name = os.path.expanduser(config.binary or default)
    if os.sep in name:
        return name if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    return shutil.which(name, path=path)


def runtime_env(spec: SessionSpec, config: RuntimeConfig) -> dict[str, str]:
    """The session's environment (built by the runner), then the runtime's own ``env``."""
    return {**spec.env, **config.env}


def probe_cli(config: RuntimeConfig, environ: Mapping[str, str], default: str, hint: str) -> Probe:
    """Binary found and ``--version`` answers: ``claude 2.1.332 at /usr/bin/claude``."""
    found = locate(config, default, environ.get("PATH"))
    if found is None:
        return Probe(False, f"{config.binary or default} not found on PATH; {hint}")
    try:
        done = subprocess.run(
            [found, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT,
            stdin=subprocess.DEVNULL,
            env=dict(environ),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(False, f"{found} --version failed: {exc}")
    first = (done.stdout.strip() or done.stderr.strip()).splitlines()[:1]
    if done.returncode != 0 or not first:
        return Probe(False, f"{found} --version exited with status {done.returncode}")
    return Probe(True, f"{first[0]} at {found}")


def missing_binary(config: RuntimeConfig, default: str, hint: str) -> TurnResult:
    name = config.binary or default
    return TurnResult(
        ok=False, cause=UNAVAILABLE, error=f"{name} not found on PATH; {hint}", permanent=True
    )


class EitherEvent(threading.Event):
    """Set here (the adapter gives up on the CLI), or through ``other`` (the runner's cancel)."""

    def __init__(self, other: threading.Event) -> None:
        super().__init__()
        self.other = other

    def is_set(self) -> bool:
        return super().is_set() or self.other.is_set()


def run_cli(
    argv: list[str],
    handle: CliHandle,
    control: SessionControl,
    env: dict[str, str],
    on_line: Callable[[str], None],
    stdin_text: str | None = None,
    cancel: threading.Event | None = None,
) -> procs.Finished | TurnResult:
    """Run one CLI process in the worktree; a program that cannot start is ``unavailable``."""
    try:
        return procs.run_tree(
            argv,
            cwd=handle.spec.workdir,
            env=env,
            timeout=max(handle.remaining(), 0.0),
            stdin_text=stdin_text,
            cancel=cancel or control.cancel,
            on_line=on_line,
            on_start=control.on_process,
            sandbox=handle.spec.sandbox,
        )
    except OSError as exc:
        error = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
        handle.transcript.append(error + "\n")
        return TurnResult(ok=False, error=error, permanent=True, cause=UNAVAILABLE)


def stopped(done: procs.Finished, handle: CliHandle, usage: Usage) -> TurnResult | None:
    """The result of a run that was ended from outside (budget, abort), else None."""
    if done.timed_out:
        budget = handle.spec.budget_seconds
        error = f"the session ran past its budget of {budget:g}s; its process tree was ended"
        handle.transcript.append(f"[agentrun] {error}\n")
        return TurnResult(ok=False, usage=usage, cause=TIMEOUT, error=error)
    if done.cancelled:
        handle.transcript.append("[agentrun] session cancelled\n")
        return TurnResult(ok=False, usage=usage, cause=ABORTED, error="session cancelled")
    return None


def failed(
    program: str,
    message: str,
    usage: Usage,
    key_var: str,
    status: int | None = None,
    unavailable: bool = False,
) -> TurnResult:
    """A CLI's failure, classified: auth (naming ``key_var``), unavailable, or an exit.

    An HTTP status the CLI reports goes through the shared failure table; otherwise the
    CLI's words are matched against the known failure lines.
    """
    message = " ".join(message.split())[:300] or "no output"
    found = _STATUS.search(message)
    status = status or (int(found[1]) if found else None)
    if status is not None and status >= 400:
        row = for_status(status, message)
        error = f"{program} failed: {describe(row, message, key=key_var)}"
        return TurnResult(
            ok=False, usage=usage, permanent=row.permanent, cause=row.cause, error=error
        )
    if _AUTH.search(message):
        return TurnResult(
            ok=False,
            usage=usage,
            permanent=True,
            cause=AUTH,
            error=f"{program} could not authenticate ({message}): set {key_var}",
        )
    if unavailable or _UNAVAILABLE.search(message):
        return TurnResult(
            ok=False, usage=usage, cause=UNAVAILABLE, error=f"{program} unavailable: {message}"
        )
    return TurnResult(ok=False, usage=usage, cause=EXIT, error=f"{program} failed: {message}")


def json_object(line: str) -> dict[str, Any] | None:
    """A line of a JSON-lines stream as an object; anything else (a stray log line) is None."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def integer(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def one_line(text: str, limit: int = ACTIVITY_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def clip(text: str, limit: int = 2000) -> str:
    """A tool's output for the transcript: the head, and how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"


def indent(text: str, prefix: str = "  ") -> str:
    return "".join(prefix + line + "\n" for line in text.rstrip("\n").splitlines())


def scratch_dir(workdir: Path, kind: str) -> Path:
    """A runtime's own files for this worktree (prompts, histories), never committed."""
    folder = workdir / ".agentrun" / "run" / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder
