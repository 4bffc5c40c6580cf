"""The ``claude`` runtime: the Claude Code CLI, one ``claude -p`` process per turn.

::

    claude -p --output-format stream-json --verbose [--model M]
           --mcp-config .agentrun/run/claude/mcp.json --strict-mcp-config
           --allowedTools Bash,Read,Edit,Write,Glob,Grep,mcp__agentrun__*,…
           [--resume ID] [extra_args]

runs in the worktree with the phase prompt on stdin (no argument-length limit, and
not visible in ``ps``). The agent edits files with its own tools and reports through
agentrun's MCP tools (``git agentrun mcp``; the shell verbs work too), beside the
user's MCP servers for its role (:mod:`agentrun.runtimes.mcp_config`). A server the
``system/init`` event reports as not started ends the run: the session is
``unavailable`` and the role's next alternate takes over.

The stream (one JSON object a line) becomes a readable transcript; the ``result``
event gives usage (``total_cost_usd`` included), and the ``session_id`` is kept so that
a producer's next round continues the session with ``--resume`` (DESIGN §12). A
session id Claude Code no longer has (another machine, a cleared ``~/.claude``) starts
fresh.

Failures: no binary is ``unavailable``; "Invalid API key", "Not logged in" or a
401/403 is ``auth`` (set ``ANTHROPIC_API_KEY``); 429, 5xx and refused connections are
``unavailable``. Retries are Claude Code's own: ``CLAUDE_CODE_MAX_RETRIES`` is the
runtime's ``max_retries`` unless the environment sets it, and
``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` is the runtime's output cap (``max_output_tokens``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from agentrun import procs
from agentrun.events import Usage
from agentrun.runtimes import mcp_config
from agentrun.runtimes.agent_cli import (
    CliHandle,
    CliRuntime,
    CliTurn,
    EitherEvent,
    JsonLines,
    clip,
    failed,
    indent,
    integer,
    one_line,
    register_cli,
    scratch_dir,
    stopped,
)
from agentrun.runtimes.base import (
    BUDGET,
    UNAVAILABLE,
    Handle,
    SessionControl,
    SessionSpec,
    TurnResult,
    out_of_tokens,
)
from agentrun.runtimes.mcp.servers import ServerSpec

KEY_VAR = "ANTHROPIC_API_KEY"
DEFAULT_TOOLS = ("Bash", "Read", "Edit", "Write", "Glob", "Grep")
SESSION_GONE = "No conversation found with session ID"


class ClaudeStream(JsonLines):
    """Reads ``stream-json`` lines as they come: transcript, activity, session id, result."""

    def __init__(self, handle: Handle, control: SessionControl) -> None:
        super().__init__(handle, control)
        self.result: dict[str, Any] | None = None
        self.session_id: str | None = None
        # Usage as the model's answers come (one entry per message id: each content
        # block repeats its message's usage), so a session ended early still books it.
        self.answers: dict[str, Usage] = {}
        # Why the budget is spent (None: it is not): the CLI is ended before its next ask.
        self.over_budget: str | None = None
        self.stop: threading.Event | None = None  # what ends the CLI's process tree
        self.mcp_failed: list[str] = []  # the MCP servers that did not start

    @property
    def seen(self) -> Usage:
        return sum(self.answers.values(), Usage())

    def event(self, event: dict[str, Any]) -> None:
        say = self.handle.transcript.append
        sid = event.get("session_id")
        if isinstance(sid, str) and sid:
            self.session_id = sid
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            say(f"[claude] session {sid} · model {event.get('model')} · cwd {event.get('cwd')}\n")
            self.mcp_failed = mcp_config.claude_failed(event)
            if self.mcp_failed and self.stop is not None:
                self.stop.set()
        elif kind == "assistant":
            self._assistant(event.get("message"))
        elif kind == "user":
            self._tool_results(event.get("message"))
        elif kind == "result":
            self.result = event

    def _assistant(self, message: object) -> None:
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            key = str(message.get("id") or len(self.answers))
            self.answers[key] = answer = usage_of({"usage": message["usage"]})
            spent = self.seen.tokens  # a cache's tokens count too
            last = answer.tokens
            over = out_of_tokens(spent, last, self.handle.spec.max_tokens)
            if self.stop is not None and over is not None:
                self.stop.set()
            if over is not None and self.over_budget is None:
                self.over_budget = over
        for block in _blocks(message):
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                text = str(block["text"])
                self.handle.transcript.append(text.rstrip("\n") + "\n")
                self.control.on_activity(one_line(text))
            elif block.get("type") == "tool_use":
                name = block.get("name")
                args = block.get("input")
                shown = _tool_summary(args if isinstance(args, dict) else {})
                self.handle.transcript.append(f"[tool {name}] {shown}\n")
                self.control.on_activity(one_line(f"{name}: {shown}"))

    def _tool_results(self, message: object) -> None:
        for block in _blocks(message):
            if block.get("type") != "tool_result":
                continue
            content = block.get("content")
            if isinstance(content, list):
                content = "\n".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
            mark = " (error)" if block.get("is_error") else ""
            self.handle.transcript.append(f"[result{mark}]\n" + indent(clip(str(content or ""))))


def _blocks(message: object) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return []
    return [b for b in message["content"] if isinstance(b, dict)]


def _tool_summary(args: Mapping[str, Any]) -> str:
    for key in ("command", "file_path", "path", "pattern", "url"):
        if isinstance(args.get(key), str):
            return one_line(args[key], 300)
    return one_line(json.dumps(args), 300)


def usage_of(result: Mapping[str, Any] | None) -> Usage:
    if result is None:
        return Usage()
    raw = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    assert isinstance(raw, dict)
    cost = result.get("total_cost_usd")
    return Usage(
        tokens_in=integer(raw.get("input_tokens")),
        tokens_out=integer(raw.get("output_tokens")),
        cache_read=integer(raw.get("cache_read_input_tokens")),
        cache_write=integer(raw.get("cache_creation_input_tokens")),
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
    )


class ClaudeRuntime(CliRuntime):
    binary = "claude"
    hint = "install it with `npm install -g @anthropic-ai/claude-code` or set `binary`"

    def argv(
        self, binary: str, resume: str | None, servers: tuple[ServerSpec, ...], config: str
    ) -> list[str]:
        argv = [binary, "-p", "--output-format", "stream-json", "--verbose"]
        if self.config.model:
            argv += ["--model", self.config.model]
        argv += ["--mcp-config", config, "--strict-mcp-config"]
        tools = [*(self.config.allowed_tools or DEFAULT_TOOLS), *mcp_config.allowed_tools(servers)]
        argv += ["--allowedTools", ",".join(tools)]
        if resume:
            argv += ["--resume", resume]
        return argv + list(self.config.extra_args)

    def environment(self, spec: SessionSpec) -> dict[str, str]:
        # Claude Code retries 10 times by default, backing off for minutes: use the
        # runtime's `max_retries` unless the environment says otherwise.
        env = {"CLAUDE_CODE_MAX_RETRIES": str(self.config.max_retries)}
        # The cap on one answer is what a first session's estimate counts on.
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(self.config.output_cap)
        env |= mcp_config.claude_timeouts(spec.mcp_servers)
        return env | super().environment(spec)

    def _run(self, turn: CliTurn) -> TurnResult:
        handle, resume = turn.handle, turn.resume
        if resume:
            handle.transcript.append(f"[agentrun] continuing Claude Code session {resume}\n")
        stream, done = self._once(turn, resume)
        if resume and isinstance(done, procs.Finished) and _session_gone(stream):
            handle.transcript.append(f"[agentrun] session {resume} is gone here; starting fresh\n")
            stream, done = self._once(turn, None)
        if stream.session_id:
            handle.runtime_session_id = stream.session_id
        if isinstance(done, TurnResult):
            return done
        return _outcome(done, handle, stream, self.config.api_key_env or KEY_VAR)

    def _once(
        self, turn: CliTurn, resume: str | None
    ) -> tuple[ClaudeStream, procs.Finished | TurnResult]:
        stream = ClaudeStream(turn.handle, turn.control)
        stream.stop = EitherEvent(turn.control.cancel)
        spec = turn.handle.spec
        servers = mcp_config.session_servers(turn.env, spec.mcp_servers)
        config = mcp_config.claude_config(servers, scratch_dir(spec.workdir, "claude"), turn.env)
        argv = self.argv(turn.binary, resume, servers, str(config))
        return stream, turn.run(argv, stream.line, turn.prompt, stream.stop)


def _errors(result: Mapping[str, Any]) -> list[str]:
    errors = result.get("errors")
    return [str(e) for e in errors] if isinstance(errors, list) else []


def _session_gone(stream: ClaudeStream) -> bool:
    result = stream.result or {}
    return bool(result.get("is_error")) and any(SESSION_GONE in e for e in _errors(result))


def _outcome(
    done: procs.Finished, handle: CliHandle, stream: ClaudeStream, key_var: str
) -> TurnResult:
    result = stream.result
    usage = usage_of(result) if result is not None else stream.seen
    if stream.over_budget is not None and result is None:
        error = f"{stream.over_budget}: Claude Code was ended before asking the model again"
        handle.transcript.append(f"[agentrun] {error}\n")
        return TurnResult(ok=False, usage=usage, error=error, cause=BUDGET)
    if stream.mcp_failed:
        error = mcp_config.failure(", ".join(stream.mcp_failed))
        handle.transcript.append(f"[agentrun] {error}: Claude Code was ended\n")
        return TurnResult(ok=False, usage=usage, error=error, cause=UNAVAILABLE)
    halted = stopped(done, handle, usage)
    if halted is not None:
        return halted
    if result is None:
        tail = done.output.strip().splitlines()[-1:] or [f"exit status {done.exit_code}"]
        return failed("claude", tail[0], usage, key_var)
    text = str(result.get("result") or "")
    handle.transcript.append(f"[claude] {result.get('subtype')}: {usage.describe()}\n")
    if result.get("is_error") or done.exit_code != 0:
        message = text or "; ".join(_errors(result)) or f"exit {done.exit_code}"
        status = result.get("api_error_status")
        code = status if isinstance(status, int) else None
        return failed("claude", message, usage, key_var, code)
    return TurnResult(ok=True, text=text, usage=usage)


register_cli("claude", ClaudeRuntime)
