"""The stdio transport: the server is a program we start, speaking newline-delimited
JSON-RPC on its stdin and stdout (modelcontextprotocol.io, "Transports": one message a
line, nothing else on stdout; stderr is the server's log).

The program runs in the session's worktree with the session's environment plus the
server's own, in its own session (process group), inside the session's sandbox when
there is one, exactly as the shell tool's commands are. Its stderr is kept (the last
lines) for the message when it exits; at close its input is closed, as the spec asks,
and then its whole tree is ended with psutil (``procs.end_tree``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import IO

from agentrun import procs
from agentrun.runtimes.mcp.client import Fault, McpError, Message

STDERR_LINES = 20
QUIT_SECONDS = 1.0  # after its input closes, the time a server gets to exit by itself
GRACE_SECONDS = 2.0


class StdioTransport:
    def __init__(
        self,
        name: str,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        sandbox: procs.Sandbox | None = None,
    ) -> None:
        self.name = name
        self.inbox: queue.Queue[Message | Fault] = queue.Queue()
        self._via: tuple[str, ...] = ()
        if sandbox is not None:
            argv, env = sandbox.wrap(argv, env, cwd)
            self._via = sandbox.signal_via
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise McpError(
                f"MCP server {name!r} could not start {argv[0]!r}: {exc.strerror or exc}"
            ) from None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._closed = self._broken = False
        # Written by a thread of its own: a server that stops reading its input must not
        # hold up the caller past its timeout (a pipe holds only so much).
        self._outbox: queue.Queue[bytes | None] = queue.Queue()
        self._writer = threading.Thread(target=self._write_all, daemon=True)
        self._writer.start()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._log = threading.Thread(target=self._keep_stderr, args=(self.proc.stderr,))
        self._log.daemon = True
        self._log.start()
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,))
        self._reader.daemon = True
        self._reader.start()

    def send(self, message: Message) -> None:
        if self._broken:
            raise McpError(f"MCP server {self.name!r} {self._ended()}")
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        self._outbox.put(data.encode("utf-8"))

    def negotiated(self, version: str) -> None:
        pass  # nothing to say on a pipe

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._outbox.put(None)  # the writer closes the server's input once all is sent
        self._writer.join(timeout=QUIT_SECONDS)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=QUIT_SECONDS)
        # Its descendants too, and whatever is left of its group once it exited.
        procs.end_tree(self.proc.pid, grace=GRACE_SECONDS, via=self._via)
        self._writer.join(timeout=1)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=GRACE_SECONDS)
        self._reader.join(timeout=1)
        self._log.join(timeout=1)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    # --- the threads ---------------------------------------------------------

    def _write_all(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        while (data := self._outbox.get()) is not None:
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError):
                self._broken = True  # it exited: the reader says how
                return
        with contextlib.suppress(OSError):
            stdin.close()

    def _read(self, stdout: IO[bytes]) -> None:
        for raw in iter(stdout.readline, b""):
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                value = json.loads(line)
            except ValueError:
                value = None
            messages = value if isinstance(value, list) else [value]
            for message in messages:
                if isinstance(message, dict):
                    self.inbox.put(message)
                else:
                    said = " ".join(line.split())[:200]
                    self.inbox.put(Fault(f"wrote something that is not JSON-RPC: {said!r}"))
        if not self._closed:
            self.inbox.put(Fault(self._ended(), fatal=True))

    def _keep_stderr(self, stderr: IO[bytes]) -> None:
        for raw in iter(stderr.readline, b""):
            line = raw.decode("utf-8", "replace").strip()
            if line:
                self._stderr.append(line)

    def _ended(self) -> str:
        """How the program ended, with the last line of its stderr."""
        try:
            code = self.proc.wait(timeout=QUIT_SECONDS)
        except subprocess.TimeoutExpired:
            return "closed its output but still runs" + self._said()
        self._log.join(timeout=QUIT_SECONDS)
        if code < 0:
            return f"was killed by signal {-code}" + self._said()
        return f"exited with status {code}" + self._said()

    def _said(self) -> str:
        if not self._stderr:
            return " (nothing on stderr)"
        return ": " + " ".join(self._stderr[-1].split())[:300]
