"""``git agentrun mcp``: the session's agent verbs as MCP tools, over stdio.

Started by an agent's CLI (Claude Code, Codex) inside the session, it speaks for that
session (``AGENTRUN_BUILD``, ``AGENTRUN_PHASE``, ``AGENTRUN_SESSION``, as the shell verbs
do) and does exactly what ``git agentrun agent <verb>`` does: the same checks, the same
transport (the report is queued in the worktree's outbox and the runner appends it,
scrubbed; under isolation the server runs inside the sandbox like the CLI that started
it). The tools are named as the verbs are, described once in
:mod:`agentrun.runtimes.tool_catalog`.

``tools/list`` offers ``context``, the verbs that fit the session's phase, ``remember``,
and ``usage`` where the session's runtime counts on its agent to report usage. Every
verb can be called all the same: one that does not fit is the tool error the shell verb
prints (``\\`approve\\` does not fit phase plan; use one of: plan, escalate``) and queues
nothing. A refusal, or arguments that do not match a tool's schema, is a tool result with
``isError`` (the model reads it and can correct itself); a tool name agentrun does not
have, or a malformed message, is a JSON-RPC error, and the server reads on.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from agentrun import __version__
from agentrun.errors import AgentrunError
from agentrun.kernel.verbs import PHASE_VERBS, AgentEnv
from agentrun.runtimes.mcp import jsonrpc
from agentrun.runtimes.mcp.jsonrpc import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSIONS,
    RpcError,
)
from agentrun.runtimes.tool_catalog import CONTEXT, REMEMBER, USAGE, VERB_TOOLS, ToolSpec

# The protocol revisions this server speaks, newest first (the lifecycle: the server
# answers with the client's revision when it has it, else its own newest).
SERVER_NAME = "agentrun"
MAX_CONTEXT_CHARS = 100_000


def tools() -> dict[str, ToolSpec]:
    """Every tool the server has, by its MCP name (a verb's own name)."""
    return {"context": CONTEXT, **VERB_TOOLS, "remember": REMEMBER, "usage": USAGE}


def listed(phase_family: str, usage: bool) -> tuple[str, ...]:
    """The tools ``tools/list`` offers a session of ``phase_family``."""
    fits = PHASE_VERBS.get(phase_family, ())
    return ("context", *fits, "remember", *(("usage",) if usage else ()))


def describe(name: str, spec: ToolSpec) -> dict[str, Any]:
    return {"name": name, "description": spec.description, "inputSchema": spec.schema()}


def text_result(text: str, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


class VerbServer:
    """Answers one session's MCP messages; :meth:`answer` takes one line, gives one or none."""

    def __init__(self, env: AgentEnv, cwd: Path, environ: Mapping[str, str]) -> None:
        self.env = env
        self.cwd = cwd
        self.environ = environ
        self.tools = tools()

    def answer(self, line: bytes | str) -> str | None:
        """The line to write back for one line read (None: a notification, or a response)."""
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
        except UnicodeDecodeError as exc:
            return jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"parse error: not UTF-8 ({exc})")
        if not text.strip():
            return None  # a blank line between messages says nothing
        try:
            message = jsonrpc.parse(text)
        except RpcError as exc:
            return jsonrpc.error_for(exc)
        if isinstance(message, jsonrpc.Reply):
            return None  # this server sends no requests: a stray response is dropped
        if message.is_notification:
            return None  # initialized, cancelled, …: nothing to answer
        assert message.id is not None
        try:
            return jsonrpc.result(message.id, self.dispatch(message.method, message.params))
        except RpcError as exc:
            return jsonrpc.error(message.id, exc.code, exc.message)
        except Exception as exc:  # a bug of ours: say so, and keep serving the session
            return jsonrpc.error(message.id, jsonrpc.INTERNAL_ERROR, f"internal error: {exc!r}")

    def dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return self.initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            names = listed(self.env.family, self._reports_usage())
            return {"tools": [describe(n, self.tools[n]) for n in names]}
        if method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments", {})
            if not isinstance(name, str):
                raise RpcError(INVALID_PARAMS, 'tools/call needs "name", a string')
            if not isinstance(arguments, dict):
                raise RpcError(INVALID_PARAMS, 'tools/call\'s "arguments" must be an object')
            return self.call(name, arguments)
        raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        env = self.env
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
            "instructions": (
                f"agentrun's verbs for session {env.session} of build {env.build} "
                f"({env.phase} round {env.round}). Call `context` for the goal, plan and "
                "feedback; finish the phase by calling one of its verbs."
            ),
        }

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        spec = self.tools.get(name)
        if spec is None:
            known = ", ".join(self.tools)
            raise RpcError(INVALID_PARAMS, f"unknown tool {name!r}; agentrun's tools are: {known}")
        problem = spec.problem(arguments)
        if problem is not None:
            return text_result(f"refused: {problem}; nothing recorded", error=True)
        try:
            return text_result(self._run(name, arguments))
        except AgentrunError as exc:  # VerbError above all: the verb's own refusal
            return text_result(f"refused: {exc}", error=True)
        except OSError as exc:
            return text_result(f"{name} failed: {exc.strerror or exc}", error=True)

    def _run(self, name: str, arguments: dict[str, Any]) -> str:
        from agentrun.agent.verbs import submit, submit_fact
        from agentrun.runtimes.tool_catalog import report_of

        if name == "context":
            return self._context()
        if name == "remember":
            rep = report_of(name, arguments)
            return submit_fact(self.env, rep.text, rep.paths, self.cwd, self.environ)
        if name == "usage":
            return self._usage(arguments)
        return submit(self.env, report_of(name, arguments), self.cwd, self.environ)

    def _context(self) -> str:
        from agentrun.agent.context import write_context
        from agentrun.agent.verbs import log_repository, worktree_of

        repo = log_repository(self.cwd, self.environ)
        worktree = worktree_of(self.cwd)
        path = write_context(repo, self.env, worktree)
        text = path.read_text(encoding="utf-8")[:MAX_CONTEXT_CHARS]
        return f"{text}\n[also written to {path.relative_to(worktree)}]"

    def _usage(self, arguments: dict[str, Any]) -> str:
        from agentrun.agent.usage import checked_cost, checked_tokens, submit_usage
        from agentrun.events import Usage

        figures = {
            key: checked_tokens(f"`{key}`", arguments.get(key, 0))
            for key in ("tokens_in", "tokens_out", "cache_read", "cache_write")
        }
        cost = arguments.get("cost")
        usage = Usage(**figures, cost_usd=None if cost is None else checked_cost(cost))
        model = arguments.get("model")
        return submit_usage(self.env, usage, model, self.cwd, self.environ)

    def _reports_usage(self) -> bool:
        """Whether the session's runtime counts on its agent for usage (a ``command``'s)."""
        from agentrun.agent.context import reports_usage
        from agentrun.agent.verbs import ReadOnlyCache, log_repository
        from agentrun.store.cache import load_state
        from agentrun.store.log import EventLog

        try:
            repo = log_repository(self.cwd, self.environ)
            _, state = load_state(EventLog(repo), ReadOnlyCache(repo), self.env.build)
        except (AgentrunError, OSError):
            return False  # the calls will say what is wrong
        return reports_usage(state.model_dump(mode="json"))


def serve(server: VerbServer, reader: BinaryIO, writer: TextIO) -> None:
    """Answer each line read until the client closes the stream."""
    while line := reader.readline():
        reply = server.answer(line)
        if reply is not None:
            writer.write(reply)
            writer.flush()


def serve_stdio(environ: Mapping[str, str], cwd: Path) -> None:
    """``git agentrun mcp``: the session's server on stdin and stdout."""
    from agentrun.agent.verbs import agent_env

    server = VerbServer(agent_env(environ), cwd, environ)
    try:
        serve(server, sys.stdin.buffer, sys.stdout)
    except BrokenPipeError:
        return  # the client went away: the session is over
