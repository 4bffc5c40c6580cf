"""The tool loop of the model-API runtimes: one loop, two wire adapters.

``openai`` (chat completions) and ``anthropic`` (Messages) differ only in how a request
is shaped and a stream is read; that is a :class:`~agentrun.runtimes.wire.Wire`.
Everything else is here: the API key, retries with backoff, the session budget and
cancel, the tools, usage and the transcript. httpx is imported inside the functions
that talk to the network.

The conversation lives in this process's memory: ``runtime_session_id`` is our own id,
and a later session that names it in ``resume_from`` continues it only within the
same process (the same ``git agentrun run``). A new process (a new CI job) starts fresh
and the runner rehydrates the agent from the log's artifacts (DESIGN §12).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentrun.config import RuntimeConfig
from agentrun.environment import key_variable
from agentrun.errors import RuntimeSetupError
from agentrun.events import Usage
from agentrun.runtimes import failures
from agentrun.runtimes.base import (
    ABORTED,
    AUTH,
    BUDGET,
    TIMEOUT,
    UNAVAILABLE,
    Handle,
    Probe,
    SessionControl,
    SessionSpec,
    Transcript,
    TurnResult,
    TurnRuntime,
    halted,
    out_of_tokens,
    register,
)
from agentrun.runtimes.failures import Failure
from agentrun.runtimes.mcp.client import McpError
from agentrun.runtimes.mcp_tools import UserTools
from agentrun.runtimes.tool_catalog import VERB_TOOLS, ToolResult, tool_specs, verbs_of
from agentrun.runtimes.tools import Toolbox
from agentrun.runtimes.wire import Call, Message, Reply, StreamFailure, Wire, sse

if TYPE_CHECKING:
    import httpx

MAX_MODEL_REQUESTS = 40
CONNECT_TIMEOUT = 10.0
PROBE_TIMEOUT = 5.0
POLL_SECONDS = 0.05
TRANSCRIPT_RESULT_CHARS = 2_000
KEPT_CONVERSATIONS = 16
SYSTEM = """\
You are a coding agent run by agentrun. Your working directory is a git worktree of the \
repository; every path you give a tool is relative to its root. Use the tools to read, \
search and change files.{shell} Where the instructions say to run `git agentrun agent \
<verb>`, call the tool of that name instead (`plan` is submit_plan). The verbs {verbs} \
record your report and end your work on this phase: call exactly one of them, once, \
when you are finished."""
USER_TOOLS = """ The tools named SERVER__tool come from the user's MCP servers; use them \
where they help."""


@dataclass
class ApiHandle(Handle):
    messages: list[Message] = field(default_factory=list)
    toolbox: Toolbox | None = None
    user_tools: UserTools | None = None
    failed: TurnResult | None = None  # the session cannot run (its MCP servers did not start)


@dataclass(frozen=True)
class _Fault:
    failure: Failure
    detail: str
    headers: dict[str, str] = field(default_factory=dict)


# Conversations of ended sessions, for a producer that continues in this process.
_KEPT: OrderedDict[str, list[Message]] = OrderedDict()


class ApiRuntime(TurnRuntime):
    def __init__(self, name: str, config: RuntimeConfig, wire: Wire) -> None:
        model = config.model or wire.model
        if not model:
            raise RuntimeSetupError(
                f'runtime {name!r} ({wire.kind}) needs a model: set `model = "..."` in '
                f"[runtimes.{name}] or name it in roles as {name}:MODEL"
            )
        super().__init__(name, config)
        self.wire, self.model = wire, model
        self.key_env = key_variable(config)
        self.url = wire.url(config.base_url)

    def open(self, spec: SessionSpec, control: SessionControl) -> Handle:
        handle = ApiHandle(spec, runtime_session_id=f"{self.wire.kind}-{uuid.uuid4().hex[:12]}")
        earlier = _KEPT.pop(spec.resume_from, None) if spec.resume_from else None
        if earlier is not None:
            handle.messages = earlier
            handle.transcript.append(f"[continuing conversation {spec.resume_from}]\n")
        # The shell tool runs what the model asks: it has no use for the API key. The
        # user's MCP servers get the same environment, and run in the same sandbox.
        env = {k: v for k, v in self.environment(spec).items() if k != self.key_env}
        if spec.mcp_servers:
            handle.user_tools, handle.failed = self._user_tools(handle, control, env)
        handle.toolbox = Toolbox(spec, control, self.config.shell, env, handle.user_tools)
        return handle

    def _user_tools(
        self, handle: ApiHandle, control: SessionControl, env: dict[str, str]
    ) -> tuple[UserTools | None, TurnResult | None]:
        """The role's MCP servers started and listed, or why the session cannot run: a
        server that does not start makes the runtime unavailable here, as a provider
        that does not answer does, so that the role's next alternate runs."""
        spec, say = handle.spec, handle.transcript.append
        taken = [tool.name for tool in tool_specs(spec.phase, self.config.shell)]
        try:
            user = UserTools.start(
                spec.mcp_servers, spec.workdir, env, taken, spec.sandbox, control.cancel
            )
        except McpError as exc:
            if control.cancel.is_set():
                return None, halted(spec, ABORTED)
            error = f"the role's MCP servers did not start: {exc}"
            say(f"[{self.wire.kind}] {error}\n")
            return None, TurnResult(ok=False, error=error, cause=UNAVAILABLE)
        say(user.summary())
        return user, None

    def start(self, spec: SessionSpec, control: SessionControl) -> tuple[Handle, TurnResult]:
        handle = self.open(spec, control)
        assert isinstance(handle, ApiHandle)
        if handle.failed is not None:
            return handle, handle.failed
        return handle, self.resume(handle, spec.prompt, control)

    def resume(self, handle: Handle, message: str, control: SessionControl) -> TurnResult:
        try:
            return self._turn(handle, message, control)
        except BaseException:  # Ctrl-C, a bug: the servers end with the runner
            _close_servers(handle)
            raise

    def end(self, handle: Handle) -> Transcript:
        _close_servers(handle)
        if isinstance(handle, ApiHandle) and handle.runtime_session_id:
            _KEPT[handle.runtime_session_id] = handle.messages
            while len(_KEPT) > KEPT_CONVERSATIONS:
                _KEPT.popitem(last=False)
        return super().end(handle)

    # --- the loop -----------------------------------------------------------

    def _turn(self, handle: Handle, message: str, control: SessionControl) -> TurnResult:
        import httpx

        assert isinstance(handle, ApiHandle)
        spec, say, box = handle.spec, handle.transcript.append, handle.toolbox
        assert box is not None
        deadline = time.monotonic() + spec.budget_seconds
        box.deadline = deadline
        key = (spec.env.get(self.key_env) or os.environ.get(self.key_env)) if self.key_env else None
        if self.key_env and not key:
            error = (
                f"{self.key_env} is not set: runtime {self.name!r} ({self.wire.kind}) reads "
                "its API key from it (export it, or name another variable with `api_key_env`)"
            )
            say(f"[{self.wire.kind}] {error}\n")
            return TurnResult(ok=False, error=error, permanent=True, cause=AUTH)
        self.wire.add_user(handle.messages, message)
        say(f"## user\n{message}\n\n")
        usage = Usage()
        with httpx.Client(headers=self.wire.headers(key)) as client:
            for _ in range(MAX_MODEL_REQUESTS):
                stop = _stop_cause(control, deadline)
                if stop is not None:
                    return halted(spec, stop, usage)
                got = self._ask(client, handle, control, deadline)
                if isinstance(got, TurnResult):
                    return replace(got, usage=usage + got.usage)
                usage += got.usage
                handle.messages.append(self.wire.assistant(got))
                if got.text.strip():
                    say(f"## assistant\n{got.text.strip()}\n\n")
                    control.on_activity(got.text.strip().splitlines()[0][:200])
                if not got.calls:
                    return TurnResult(ok=True, text=got.text, usage=usage)
                done = self._run_tools(got.calls, box, control, say)
                handle.messages.extend(self.wire.results(done))
                if any(result.terminal for _, result in done):
                    return TurnResult(ok=True, text=got.text, usage=usage)
                spent = usage.tokens  # a cache's tokens count toward the budget too
                last = got.usage.tokens
                over = out_of_tokens(spent, last, spec.max_tokens)
                if over is not None:  # tools cost nothing; the next request would
                    error = f"{over}: stopped before asking the model again"
                    say(f"[{self.wire.kind}] {error}\n")
                    return TurnResult(ok=False, usage=usage, error=error, cause=BUDGET)
        error = (
            f"no-terminal: the model made {MAX_MODEL_REQUESTS} requests without reporting "
            "(no verb tool was called)"
        )
        say(f"[{self.wire.kind}] {error}\n")
        return TurnResult(ok=False, usage=usage, error=error)

    def _run_tools(
        self, calls: list[Call], box: Toolbox, control: SessionControl, say: Callable[[str], None]
    ) -> list[tuple[Call, ToolResult]]:
        done: list[tuple[Call, ToolResult]] = []
        ended = False
        for call in calls:
            args = call.parsed()
            say(f"-> {call.name} {call.arguments}\n")
            control.on_activity(f"{call.name} {call.arguments[:120]}")
            if ended:
                result = ToolResult("not run: an earlier call already ended the phase", True)
            elif control.cancel.is_set():
                result = ToolResult("not run: the session was cancelled", True)
            elif args is None:
                result = ToolResult("refused: the arguments must be a JSON object", True)
            else:
                result = box.call(call.name, args)
            ended = ended or result.terminal
            clipped = result.text[:TRANSCRIPT_RESULT_CHARS]
            more = len(result.text) - len(clipped)
            say(f"<- {'error: ' if result.error else ''}{clipped.rstrip()}")
            say(f"\n[{more} more characters]\n\n" if more else "\n\n")
            done.append((call, result))
        return done

    def _ask(
        self, client: httpx.Client, handle: ApiHandle, control: SessionControl, deadline: float
    ) -> Reply | TurnResult:
        """One model request, retried with backoff while the failure is retryable."""
        spec, say, kind = handle.spec, handle.transcript.append, self.wire.kind
        assert handle.toolbox is not None
        system = SYSTEM.format(
            shell=" Run commands with the `shell` tool."
            if self.config.shell
            else " You cannot run other commands: there is no shell here.",
            verbs=", ".join(VERB_TOOLS[v].name for v in verbs_of(spec.phase)),
        )
        if handle.user_tools is not None and handle.user_tools.specs:
            system += USER_TOOLS
        body = self.wire.body(self.model, system, handle.messages, handle.toolbox.specs)
        # One response's output is capped: a first session's estimate counts on it.
        body[self.wire.cap_field(self.config.base_url)] = self.config.output_cap
        for attempt in range(self.config.max_retries + 1):
            got = self._exchange(client, body, control, deadline)
            if isinstance(got, Reply):
                return got
            if isinstance(got, str):
                return halted(spec, got)
            error = failures.describe(got.failure, got.detail, self.key_env, self.url)
            say(f"[{kind}] {error}\n")
            if got.failure.retryable and attempt < self.config.max_retries:
                wait = failures.backoff(attempt, got.headers)
                if time.monotonic() + wait < deadline:
                    tries = f"{attempt + 1}/{self.config.max_retries}"
                    say(f"[{kind}] retrying in {wait:.1f}s ({tries})\n")
                    if control.cancel.wait(wait):
                        return halted(spec, ABORTED)
                    continue
            if got.failure.retryable:
                error += f"; gave up after {attempt + 1} tries"
            return TurnResult(
                ok=False, error=error, permanent=got.failure.permanent, cause=got.failure.cause
            )
        raise AssertionError("unreachable: the last attempt returns")

    def _exchange(
        self, client: httpx.Client, body: dict[str, Any], control: SessionControl, deadline: float
    ) -> Reply | _Fault | str:
        """POST and read the stream in a worker thread, so that cancel and the budget end
        the wait at once even while the server is silent. An abandoned worker does no
        harm: tools run only here, and its read timeout ends it soon after the budget."""
        import httpx

        left = max(deadline - time.monotonic(), 0.1)
        read = min(self.config.request_timeout_seconds, left + 1.0)
        timeout = httpx.Timeout(read, connect=min(CONNECT_TIMEOUT, left + 1.0))
        box: list[Reply | _Fault] = []

        def work() -> None:
            try:
                box.append(self._post(client, body, timeout))
            except StreamFailure as exc:
                box.append(_Fault(failures.for_status(exc.status, str(exc)), str(exc)))
            except Exception as exc:  # classified by the table; anything else is UNKNOWN
                box.append(_Fault(failures.for_exception(exc), str(exc) or type(exc).__name__))

        worker = threading.Thread(target=work, name=f"agentrun-{self.wire.kind}", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(POLL_SECONDS)
            if control.cancel.is_set():
                return ABORTED
            if worker.is_alive() and time.monotonic() >= deadline:
                return TIMEOUT
        return box[0]

    def _post(
        self, client: httpx.Client, body: dict[str, Any], timeout: httpx.Timeout
    ) -> Reply | _Fault:
        with client.stream("POST", self.url, json=body, timeout=timeout) as response:
            if response.status_code != 200:
                raw = response.read()[:20_000].decode("utf-8", "replace")
                failure = failures.for_status(response.status_code, raw)
                detail = f"HTTP {response.status_code}: {failures.error_message(raw)}"
                return _Fault(failure, detail, dict(response.headers))
            return self.wire.read(sse(response.iter_lines()))


def _close_servers(handle: Handle) -> None:
    if isinstance(handle, ApiHandle) and handle.user_tools is not None:
        handle.user_tools.close()
        handle.user_tools = None


def _stop_cause(control: SessionControl, deadline: float) -> str | None:
    if control.cancel.is_set():
        return ABORTED
    return TIMEOUT if time.monotonic() >= deadline else None


def probe(wire: Wire, config: RuntimeConfig, environ: Mapping[str, str]) -> Probe:
    """Key set and, when ``base_url`` is configured, the endpoint answers its model list."""
    model = config.model or wire.model
    if not model:
        return Probe(False, f'{wire.kind}: no model configured (set `model = "..."`)')
    variable = key_variable(config)
    key = environ.get(variable) if variable else None
    if variable and not key:
        return Probe(False, f"{variable} is not set")
    said = f"{wire.kind} {model}, key in {variable}" if variable else f"{wire.kind} {model}"
    if not config.base_url:
        return Probe(True, said)
    import httpx

    url = wire.models_url(config.base_url)
    try:
        response = httpx.get(url, headers=wire.headers(key), timeout=PROBE_TIMEOUT)
    except httpx.HTTPError as exc:
        row = failures.for_exception(exc)
        said = failures.describe(row, str(exc), variable, url)
        return Probe(False, f"{url} does not answer: {said}")
    if response.status_code != 200:
        row = failures.for_status(response.status_code, response.text)
        detail = f"HTTP {response.status_code}: {failures.error_message(response.text)}"
        return Probe(False, f"{url}: {failures.describe(row, detail, variable, url)}")
    return Probe(True, f"{said}, {url} answers")


def register_wire(kind: str, wire: Wire) -> None:
    """Register an API runtime kind: the shared tool loop over ``wire``."""
    register(
        kind,
        lambda name, config: ApiRuntime(name, config, wire),
        lambda config, environ: probe(wire, config, environ),
    )
