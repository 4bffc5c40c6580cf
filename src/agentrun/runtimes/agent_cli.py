"""What the ``claude``, ``codex`` and ``aider`` runtimes share (``command`` too runs its
program through :func:`run_cli` and :func:`stopped`).

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
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

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
    TurnResult,
    TurnRuntime,
    halted,
    register,
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
    """A CLI session: how many turns it has had (the first continues ``resume_from``)."""

    turns: int = 0


@dataclass(frozen=True)
class CliTurn:
    """One turn of a CLI runtime: the binary found, its environment, the CLI session to
    continue (None: a new one)."""

    handle: CliHandle
    control: SessionControl
    binary: str
    env: dict[str, str]
    prompt: str
    resume: str | None

    def run(
        self,
        argv: list[str],
        on_line: Callable[[str], None],
        stdin_text: str | None = None,
        cancel: threading.Event | None = None,
    ) -> procs.Finished | TurnResult:
        return run_cli(argv, self.handle, self.control, self.env, on_line, stdin_text, cancel)


class CliRuntime(TurnRuntime):
    """What the CLI runtimes share: find the CLI, then run it once a turn, continuing the
    CLI's own session (the one ``resume_from`` names at first, then its own)."""

    binary: ClassVar[str]  # the executable's name on PATH, unless config ``binary`` says
    hint: ClassVar[str]  # how to install it, for a missing binary
    handle_type = CliHandle

    def _turn(self, handle: Handle, prompt: str, control: SessionControl) -> TurnResult:
        assert isinstance(handle, CliHandle)
        resume = handle.spec.resume_from if handle.turns == 0 else handle.runtime_session_id
        handle.turns += 1
        env = self.environment(handle.spec)
        binary = locate(self.config, self.binary, env.get("PATH"))
        if binary is None:
            name = self.config.binary or self.binary
            error = f"{name} not found on PATH; {self.hint}"
            handle.transcript.append(f"[agentrun] {error}\n")
            return TurnResult(ok=False, cause=UNAVAILABLE, error=error, permanent=True)
        return self._run(CliTurn(handle, control, binary, env, prompt, resume))

    @abstractmethod
    def _run(self, turn: CliTurn) -> TurnResult:
        """Run the CLI for one turn: a new session, or continue ``turn.resume``."""


def register_cli(kind: str, runtime: type[CliRuntime]) -> None:
    """Register a CLI runtime kind; ``doctor`` probes its binary's ``--version``."""

    def probe(config: RuntimeConfig, environ: Mapping[str, str]) -> Probe:
        return probe_cli(config, environ, runtime.binary, runtime.hint)

    register(kind, runtime, probe)


class JsonLines(ABC):
    """A CLI's JSON-lines stream read as it comes; a stray line goes to the transcript as is."""

    def __init__(self, handle: Handle, control: SessionControl) -> None:
        self.handle = handle
        self.control = control

    def line(self, raw: str) -> None:
        event = json_object(raw)
        if event is not None:
            self.event(event)
        elif raw.strip():
            self.handle.transcript.append(raw + "\n")

    @abstractmethod
    def event(self, event: dict[str, Any]) -> None:
        """One object of the stream."""


def locate(config: RuntimeConfig, default: str, path: str | None) -> str | None:
    """The CLI's executable: config ``binary`` (a path or a name), else ``default`` on PATH."""
    name = os.path.expanduser(config.binary or default)
    if os.sep in name:
        return name if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    return shutil.which(name, path=path)


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


class EitherEvent(threading.Event):
    """Set here (the adapter gives up on the CLI), or through ``other`` (the runner's cancel)."""

    def __init__(self, other: threading.Event) -> None:
        super().__init__()
        self.other = other

    def is_set(self) -> bool:
        return super().is_set() or self.other.is_set()


def run_cli(
    argv: list[str],
    handle: Handle,
    control: SessionControl,
    env: dict[str, str],
    on_line: Callable[[str], None],
    stdin_text: str | None = None,
    cancel: threading.Event | None = None,
) -> procs.Finished | TurnResult:
    """Run one agent process in the worktree, for what is left of the session's budget; a
    program that cannot start is ``unavailable``."""
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


def stopped(done: procs.Finished, handle: Handle, usage: Usage) -> TurnResult | None:
    """The result of a run that was ended from outside (budget, abort), else None."""
    if not (done.timed_out or done.cancelled):
        return None
    cause = TIMEOUT if done.timed_out else ABORTED
    result = halted(handle.spec, cause, usage, "; its process tree was ended")
    handle.transcript.append(f"[agentrun] {result.error}\n")
    return result


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
