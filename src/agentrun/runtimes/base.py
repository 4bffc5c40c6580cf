"""The runtime contract (DESIGN §7) and the registry of runtime kinds."""

from __future__ import annotations

import importlib
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from agentrun import procs
from agentrun.config import RuntimeConfig
from agentrun.errors import RuntimeSetupError
from agentrun.events import Usage
from agentrun.kernel.verbs import AgentEnv

if TYPE_CHECKING:
    from agentrun.runtimes.mcp.servers import ServerSpec


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
    # The runtime's own id of this role's previous session (from ``session.ended``), so a
    # producer can continue it with the CLI's resume; None: start fresh.
    resume_from: str | None = None
    # The tokens this session may spend before the build's max_tokens or max_cost_usd
    # budget runs out (None: no limit); runtimes that see usage as it grows stop there.
    max_tokens: int | None = None
    # Where the session's programs run ([isolation]); None: as the runner's own children.
    sandbox: procs.Sandbox | None = None
    # The repository's git dir (the build logs): the worktree has a private one of its own.
    git_dir: Path | None = None
    # The task of the build's graph the session works on (AGENTRUN_TASK); None: the build.
    task: str | None = None
    # The user's MCP servers the session's role gets ([mcp]), their environment resolved.
    mcp_servers: tuple[ServerSpec, ...] = ()

    def agent_env(self) -> AgentEnv:
        """Who the session's agent speaks as, for runtimes that report for it."""
        return AgentEnv(self.build, self.phase, self.round, self.session, self.task)

    def log_repository(self) -> Path:
        """Where the build's log lives, for runtimes that append an agent's report."""
        return self.git_dir or self.workdir


@dataclass
class SessionControl:
    """How the runner steers a running session: cancel it, hear from it."""

    cancel: threading.Event = field(default_factory=threading.Event)
    on_activity: Callable[[str], None] = lambda _line: None
    on_process: Callable[[int], None] = lambda _pid: None


# Why a turn failed. The runner acts on the cause:
#   "unavailable"  the runtime cannot be reached here (CLI missing, connection refused,
#                  5xx or 429 after retries): the next alternate takes over, same attempt
#   "auth"         401/403 or no API key: permanent, escalates at once (name the variable)
#   "timeout"      the session ran past its wall-clock budget; its process tree was ended
#   "aborted"      cancelled (abort requested)
#   anything else  an ordinary failure of the attempt ("exit", "stream", "script", ...)
UNAVAILABLE, AUTH, TIMEOUT, ABORTED = "unavailable", "auth", "timeout", "aborted"
BUDGET = "budget"  # the build's token or dollar budget ran out inside the session


def out_of_tokens(spent: int, last: int, limit: int | None) -> str | None:
    """Why the model may not be asked again in a session capped at ``limit`` tokens
    (None: it may), having spent ``spent``, the last answer ``last`` of them.

    The next request sends the conversation again, and the conversation has grown: it
    costs at least what the last one did. A session stops before a request that cannot
    fit, so only a request already on its way when it stops (a CLI's) goes over, and a
    build overshoots its budget by at most one answer.
    """
    if limit is None or spent + last <= limit:
        return None
    return (
        f"the session used {spent:,} tokens and the build's budget left it {limit:,}; "
        f"the next request would take at least {last:,}"
    )


@dataclass(frozen=True)
class TurnResult:
    ok: bool
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str = ""
    permanent: bool = False
    cause: str = ""


@dataclass
class Handle:
    spec: SessionSpec
    transcript: list[str] = field(default_factory=list)
    runtime_session_id: str | None = None
    started: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        """Seconds left of the session's wall-clock budget, counted from its start."""
        return self.spec.budget_seconds - (time.monotonic() - self.started)


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


class TurnRuntime(ABC):
    """What every runtime kind shares: a session is a handle and turns of one ``_turn``."""

    handle_type: ClassVar[type[Handle]] = Handle  # what ``open`` makes, unless a kind overrides it

    def __init__(self, name: str, config: RuntimeConfig) -> None:
        self.name = name
        self.config = config

    def start(self, spec: SessionSpec, control: SessionControl) -> tuple[Handle, TurnResult]:
        handle = self.open(spec, control)
        return handle, self._turn(handle, spec.prompt, control)

    def resume(self, handle: Handle, message: str, control: SessionControl) -> TurnResult:
        return self._turn(handle, message, control)

    def end(self, handle: Handle) -> Transcript:
        return Transcript("".join(handle.transcript), handle.runtime_session_id)

    def environment(self, spec: SessionSpec) -> dict[str, str]:
        """The session's environment (built by the runner), then the runtime's own ``env``."""
        return {**spec.env, **self.config.env}

    def open(self, spec: SessionSpec, control: SessionControl) -> Handle:
        """The session's handle, before its first turn."""
        return self.handle_type(spec)

    @abstractmethod
    def _turn(self, handle: Handle, prompt: str, control: SessionControl) -> TurnResult:
        """Run one turn of the session: the first with the phase prompt, then each message."""


def halted(
    spec: SessionSpec, cause: str, usage: Usage | None = None, detail: str = ""
) -> TurnResult:
    """A turn ended from outside: cancelled (``ABORTED``) or past its budget (``TIMEOUT``)."""
    if cause == ABORTED:
        error = "session cancelled"
    else:
        error = f"the session ran past its budget of {spec.budget_seconds:g}s{detail}"
    return TurnResult(ok=False, usage=usage or Usage(), error=error, cause=cause)


@dataclass(frozen=True)
class Probe:
    """Whether a runtime can run on this machine, for ``doctor`` and auto-picking."""

    ok: bool
    detail: str  # e.g. "claude 2.1.332 at /usr/bin/claude", "ANTHROPIC_API_KEY is not set"


RuntimeFactory = Callable[[str, RuntimeConfig], Runtime]
ProbeFn = Callable[[RuntimeConfig, Mapping[str, str]], Probe]
_KINDS: dict[str, RuntimeFactory] = {}
_PROBES: dict[str, ProbeFn] = {}
# One module per kind, imported only when a build uses it (httpx stays unloaded otherwise).
MODULES = {
    "script": "agentrun.runtimes.script",
    "command": "agentrun.runtimes.command",
    "claude": "agentrun.runtimes.claude",
    "codex": "agentrun.runtimes.codex",
    "aider": "agentrun.runtimes.aider",
    "openai": "agentrun.runtimes.openai",
    "anthropic": "agentrun.runtimes.anthropic",
}


def register(kind: str, factory: RuntimeFactory, probe: ProbeFn | None = None) -> None:
    _KINDS[kind] = factory
    if probe is not None:
        _PROBES[kind] = probe


def probe_runtime(config: RuntimeConfig, environ: Mapping[str, str]) -> Probe:
    """Ask a runtime kind whether it can run here (binary, version, key, endpoint)."""
    if config.kind not in _KINDS and config.kind in MODULES:
        importlib.import_module(MODULES[config.kind])
    check = _PROBES.get(config.kind)
    if check is None:
        return Probe(True, f"{config.kind}: nothing to check")
    return check(config, environ)


def make_runtime(name: str, config: RuntimeConfig) -> Runtime:
    if config.kind not in _KINDS and config.kind in MODULES:
        importlib.import_module(MODULES[config.kind])
    try:
        return _KINDS[config.kind](name, config)
    except KeyError:
        raise RuntimeSetupError(f"runtime {name!r} has unknown kind {config.kind!r}") from None
