"""The ``codex`` runtime: the Codex CLI, one ``codex exec`` process per turn.

::

    codex exec --json --skip-git-repo-check -s workspace-write
               -c allow_login_shell=false -c features.unbounded_connection_retries=false
               [-m MODEL] [extra_args] [resume THREAD_ID] -

runs in the worktree with the phase prompt on stdin (``-``). Why the two settings:

- ``allow_login_shell=false``: Codex runs commands with ``bash -lc`` by default, and a
  login shell re-reads ``/etc/profile``, which resets PATH on common systems; the agent
  then cannot find ``git agentrun``, which the runner put on the session's PATH.
- ``features.unbounded_connection_retries=false``: otherwise Codex waits for the
  network forever when the endpoint refuses connections; failing lets an alternate
  runtime take over (DESIGN §7). Per-request retries stay the provider's own.

Codex's ``workspace-write`` sandbox makes everything outside the worktree read-only,
and the build log lives in the main repository's ``.git``: a verb run by the agent
there queues its report in the session's outbox (``.agentrun/run/outbox/``), and this
runtime appends it after the turn, validated as if live (DESIGN §6,
:func:`agentrun.agent.drain.drain`). The sandbox is left as it is: opening the log
to the agent would let it write any event, not only its own report.

Every session gets agentrun's MCP server and the user's servers for its role as
``-c mcp_servers.NAME={…}`` settings (:mod:`agentrun.runtimes.mcp_config`), each
``required``: one that cannot start ends ``codex exec`` before the model is asked, and the
session is ``unavailable`` (the role's next alternate takes over). agentrun's server runs
where Codex runs (inside its sandbox, or ours), and queues reports in the outbox as the
shell verbs do.

The JSONL events (``thread.started``, ``item.*``, ``turn.completed`` with usage,
``turn.failed``, ``error``) become the transcript; the thread id is kept so that a
producer's next round continues it with ``codex exec resume`` (a thread Codex no
longer has starts fresh). ``turn.completed`` reports the thread's running total, so a
resumed turn subtracts what the thread's rollout file recorded before it.

``turn.completed`` comes once, at the end of the run; the rollout file records the
thread's total after every model answer (``token_count``). While Codex runs, that file
is watched, and the process tree is ended once what is left of the session's
``max_tokens`` cannot hold its next request (``base.out_of_tokens``).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pygit2

from agentrun import procs
from agentrun.agent.drain import drain
from agentrun.config import RuntimeConfig
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
    json_object,
    one_line,
    register_cli,
    stopped,
)
from agentrun.runtimes.base import (
    BUDGET,
    UNAVAILABLE,
    Handle,
    SessionControl,
    TurnResult,
    out_of_tokens,
)

DEFAULT_KEY_VAR = "OPENAI_API_KEY"
SETTINGS = ("allow_login_shell=false", "features.unbounded_connection_retries=false")
THREAD_GONE = "no rollout found"
WATCH_SECONDS = 0.05  # how often the rollout file is read against the token budget


class CodexStream(JsonLines):
    """Reads ``codex exec --json`` lines as they come."""

    def __init__(self, handle: Handle, control: SessionControl) -> None:
        super().__init__(handle, control)
        self.thread_id: str | None = None
        self.usage: dict[str, Any] | None = None
        self.failure: str | None = None
        self.errors: list[str] = []
        self.last_message = ""
        self.seen = Usage()  # what the rollout file shows for this run so far
        # Why the budget is spent (None: it is not): the process tree was ended.
        self.over_budget: str | None = None

    def event(self, event: dict[str, Any]) -> None:
        say = self.handle.transcript.append
        kind = event.get("type")
        if kind == "thread.started":
            self.thread_id = str(event.get("thread_id") or "") or None
            say(f"[codex] thread {self.thread_id}\n")
        elif kind in ("item.started", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                self._item(item, done=kind == "item.completed")
        elif kind == "turn.completed":
            usage = event.get("usage")
            self.usage = usage if isinstance(usage, dict) else {}
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            self.failure = str(message or "turn failed")
            say(f"[codex] turn failed: {self.failure}\n")
        elif kind == "error":
            self.errors.append(str(event.get("message") or ""))
            say(f"[codex] error: {self.errors[-1]}\n")

    def _item(self, item: dict[str, Any], done: bool) -> None:
        say = self.handle.transcript.append
        kind = item.get("type")
        if kind == "command_execution":
            command = str(item.get("command") or "")
            if not done:
                self.control.on_activity(one_line(f"$ {command}"))
                return
            say(f"[exec] {command}\n" + indent(clip(str(item.get("aggregated_output") or ""))))
            say(f"[exit {item.get('exit_code')}]\n")
        elif not done:
            return
        elif kind in ("agent_message", "reasoning"):
            text = str(item.get("text") or "")
            if kind == "agent_message":
                self.last_message = text
            say(("" if kind == "agent_message" else "[reasoning] ") + text.rstrip("\n") + "\n")
            self.control.on_activity(one_line(text))
        elif kind == "file_change":
            changes = item.get("changes") if isinstance(item.get("changes"), list) else []
            assert isinstance(changes, list)
            for change in changes:
                if isinstance(change, dict):
                    say(f"[file {change.get('kind')}] {change.get('path')}\n")
        elif kind == "error":
            say(f"[codex] {item.get('message')}\n")
        else:
            say(f"[{kind}] {one_line(json.dumps(item), 300)}\n")


def codex_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")) / ".codex").expanduser()


def thread_totals(env: Mapping[str, str], thread_id: str) -> Usage:
    """The usage a thread's rollout file recorded so far; none if it has none."""
    totals = Usage()
    sessions = codex_home(env) / "sessions"
    for path in sessions.glob(f"*/*/*/rollout-*{thread_id}.jsonl"):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if '"total_token_usage"' not in line:
                continue
            payload = (json_object(line) or {}).get("payload")
            info = payload.get("info") if isinstance(payload, dict) else None
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if isinstance(total, dict):
                totals = usage_of(total)
    return totals


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """Codex's token counts: ``input_tokens`` includes ``cached_input_tokens`` (OpenAI's
    automatic prefix cache), which is the usage's ``cache_read``."""
    cached = integer(raw.get("cached_input_tokens"))
    return Usage(
        tokens_in=max(integer(raw.get("input_tokens")) - cached, 0),
        tokens_out=integer(raw.get("output_tokens")),
        cache_read=cached,
    )


def since(now: Usage, before: Usage) -> Usage:
    """A resumed thread's counts are cumulative: this turn's share of them."""
    return Usage(
        tokens_in=max(now.tokens_in - before.tokens_in, 0),
        tokens_out=max(now.tokens_out - before.tokens_out, 0),
        cache_read=max(now.cache_read - before.cache_read, 0),
    )


class CodexRuntime(CliRuntime):
    binary = "codex"
    hint = "install it with `npm install -g @openai/codex` or set `binary`"

    def argv(
        self, binary: str, resume: str | None, isolated: bool = False, mcp: tuple[str, ...] = ()
    ) -> list[str]:
        # Isolated by agentrun (bubblewrap or an unprivileged account), Codex's own
        # sandbox cannot start inside ours (its bubblewrap needs namespaces we take away),
        # and every tool call would fail: agentrun's sandbox is then the one that holds.
        mode = "danger-full-access" if isolated else "workspace-write"
        argv = [binary, "exec", "--json", "--skip-git-repo-check", "-s", mode]
        for setting in SETTINGS:
            argv += ["-c", setting]
        if self.config.model:
            argv += ["-m", self.config.model]
        argv += [*mcp, *self.config.extra_args]
        return argv + (["resume", resume, "-"] if resume else ["-"])

    def _run(self, turn: CliTurn) -> TurnResult:
        handle, resume = turn.handle, turn.resume
        before = Usage()
        if resume:
            handle.transcript.append(f"[agentrun] continuing Codex thread {resume}\n")
            before = thread_totals(turn.env, resume)
        stream, done = self._once(turn, resume, before)
        if resume and isinstance(done, procs.Finished) and _thread_gone(done, stream):
            handle.transcript.append(f"[agentrun] thread {resume} is gone here; starting fresh\n")
            before = Usage()
            stream, done = self._once(turn, None)
        if stream.thread_id:
            handle.runtime_session_id = stream.thread_id
        self._drain_outbox(handle)
        if isinstance(done, TurnResult):
            return done
        return self._outcome(done, handle, stream, before)

    def _once(
        self, turn: CliTurn, resume: str | None, before: Usage | None = None
    ) -> tuple[CodexStream, procs.Finished | TurnResult]:
        before = before or Usage()
        stream = CodexStream(turn.handle, turn.control)
        spec = turn.handle.spec
        isolated = spec.sandbox is not None
        servers = mcp_config.session_servers(turn.env, spec.mcp_servers)
        flags, carried = mcp_config.codex_settings(servers, spec.workdir, turn.env)
        turn = dataclasses.replace(turn, env={**turn.env, **carried})
        argv = self.argv(turn.binary, resume, isolated, tuple(flags))
        stop = EitherEvent(turn.control.cancel)
        ended = threading.Event()
        limit = turn.handle.spec.max_tokens
        watch = threading.Thread(
            target=_watch_budget,
            args=(turn.env, stream, before, limit, stop, ended),
            name="agentrun-codex-budget",
            daemon=True,
        )
        if limit is not None:
            watch.start()
        try:
            done = turn.run(argv, stream.line, turn.prompt, stop)
        finally:
            ended.set()
            if limit is not None:
                watch.join()
        if stream.over_budget is not None and stream.thread_id:
            # What the rollout file recorded before the process tree ended is booked too.
            stream.seen = since(thread_totals(turn.env, stream.thread_id), before)
        return stream, done

    def _drain_outbox(self, handle: CliHandle) -> None:
        spec = handle.spec
        try:
            repo = pygit2.Repository(str(spec.log_repository()))
        except pygit2.GitError as exc:
            handle.transcript.append(f"[agentrun] cannot read the outbox: {exc}\n")
            return
        for said in drain(repo, spec.workdir, spec.session):
            handle.transcript.append(f"[agentrun] {said}\n")

    def _outcome(
        self,
        done: procs.Finished,
        handle: CliHandle,
        stream: CodexStream,
        before: Usage,
    ) -> TurnResult:
        usage = since(usage_of(stream.usage), before) if stream.usage is not None else stream.seen
        if stream.over_budget is not None and stream.usage is None:
            error = f"{stream.over_budget}: Codex was ended before asking the model again"
            handle.transcript.append(f"[agentrun] {error}\n")
            return TurnResult(ok=False, usage=usage, error=error, cause=BUDGET)
        halted = stopped(done, handle, usage)
        if halted is not None:
            return halted
        server = mcp_config.codex_failed(done.output) if stream.usage is None else None
        if server is not None:
            error = mcp_config.failure(*server)
            handle.transcript.append(f"[agentrun] {error}\n")
            return TurnResult(ok=False, usage=usage, error=error, cause=UNAVAILABLE)
        if stream.usage is not None:
            handle.transcript.append(f"[codex] turn completed: {usage.describe()}\n")
        problem = stream.failure or (stream.errors[-1] if stream.errors else None)
        if stream.failure or done.exit_code != 0 or stream.usage is None:
            if problem is None:
                tail = done.output.strip().splitlines()[-1:] or [f"exit {done.exit_code}"]
                problem = tail[0]
            return failed("codex", problem, usage, _key_var(problem, self.config))
        return TurnResult(ok=True, text=stream.last_message, usage=usage)


def _watch_budget(
    env: Mapping[str, str],
    stream: CodexStream,
    before: Usage,
    limit: int | None,
    stop: threading.Event,
    ended: threading.Event,
) -> None:
    """Read the thread's rollout file while Codex runs; end the run once the tokens of
    this run's next request cannot fit ``limit``. What it saw is the run's usage if the
    run is ended."""
    while not ended.wait(WATCH_SECONDS):
        if stream.thread_id is None:
            continue
        seen = since(thread_totals(env, stream.thread_id), before)
        last, stream.seen = seen.tokens - stream.seen.tokens, seen
        stream.over_budget = out_of_tokens(seen.tokens, last, limit)
        if stream.over_budget is not None:
            stop.set()
            return


def _thread_gone(done: procs.Finished, stream: CodexStream) -> bool:
    return done.exit_code != 0 and stream.thread_id is None and THREAD_GONE in done.output


def _key_var(problem: str, config: RuntimeConfig) -> str:
    """The variable to set: the one Codex says is missing, else the configured or default."""
    marker = "Missing environment variable: `"
    if marker in problem:
        return problem.split(marker, 1)[1].split("`", 1)[0]
    return config.api_key_env or f"{DEFAULT_KEY_VAR} (or run `codex login`)"


register_cli("codex", CodexRuntime)
