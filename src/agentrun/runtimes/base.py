"""The runtime contract (DESIGN §7) and the registry of runtime kinds."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agentrun.config import RuntimeConfig
from agentrun.errors import RuntimeSetupError
from agentrun.events import Usage


@dataclass(frozen=True)
class SessionSpec:
    """Everything one agent session needs; the runner builds it."""

    session: str
    build: str
    phase: str
    round: int
    attempt: int
    role: str
    prompt: str
    workdir: Path
    env: dict[str, str]
    budget_seconds: float
    repo_root: Path


@dataclass
class SessionControl:
    """How the runner steers a running session: cancel it, hear from it."""

    cancel: threading.Event = field(default_factory=threading.Event)
    on_activity: Callable[[str], None] = lambda _line: None
    on_process: Callable[[int], None] = lambda _pid: None


@dataclass(frozen=True)
class TurnResult:
    ok: bool
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str = ""
    permanent: bool = False
    cause: str = ""  # "timeout", "aborted", "exit", "setup", ...


@dataclass
class Handle:
    spec: SessionSpec
    transcript: list[str] = field(default_factory=list)
    runtime_session_id: str | None = None


@dataclass(frozen=True)
class Transcript:
    text: str
    runtime_session_id: str | None = None


class Runtime(Protocol):
    """An adapter that runs an agent for one session."""

    name: str

    def start(self, spec: SessionSpec, control: SessionControl) -> tuple[Handle, TurnResult]:
        """Start a session and run its first turn."""

    def resume(self, handle: Handle, message: str, control: SessionControl) -> TurnResult:
        """Run another turn of the same session (DESIGN §7's ``continue``)."""

    def end(self, handle: Handle) -> Transcript:
        """Close the session; the transcript goes into the log."""


RuntimeFactory = Callable[[str, RuntimeConfig], Runtime]
_KINDS: dict[str, RuntimeFactory] = {}


def register(kind: str, factory: RuntimeFactory) -> None:
    _KINDS[kind] = factory


def make_runtime(name: str, config: RuntimeConfig) -> Runtime:
    from agentrun.runtimes import command, script  # noqa: F401 - they register themselves

    try:
        return _KINDS[config.kind](name, config)
    except KeyError:
        raise RuntimeSetupError(f"runtime {name!r} has unknown kind {config.kind!r}") from None


def end_transcript(handle: Handle) -> Transcript:
    return Transcript("".join(handle.transcript), handle.runtime_session_id)
