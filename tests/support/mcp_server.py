"""A small MCP server built with the protocol's reference SDK (``mcp``), for agentrun's client.

Run as a program: ``python mcp_server.py`` serves over stdio; ``--http PORT`` serves the
same tools over streamable HTTP on 127.0.0.1 with the SDK's own server (``--json`` makes
it answer ``application/json`` instead of event streams). The misbehaving servers the
tests need: ``--crash`` exits at start with a message on stderr, ``--silent`` reads its
input and never answers, ``--deaf`` never even reads it, ``--garbage`` answers with a
line that is not JSON-RPC.

Tools: ``define`` (a word's meaning), ``add`` (two integers: the one for bad arguments),
``env`` (a variable of the server's environment), ``read`` (a file, or why not), ``hunt``
(the security tests' hunt), ``wait`` (answers late), ``picture`` (an image and a text),
``fail`` (a tool error), ``die`` (the server exits).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

MEANINGS = {"greeting": "a polite word said on meeting: hello, world"}


def serve() -> None:
    from mcp.server.fastmcp import FastMCP, Image

    http = "--http" in sys.argv
    port = int(sys.argv[sys.argv.index("--http") + 1]) if http else 8000
    server = FastMCP(
        "agentrun-test", host="127.0.0.1", port=port, json_response="--json" in sys.argv
    )

    @server.tool()
    def define(word: str) -> str:
        """The meaning of a word of this project's glossary."""
        return MEANINGS.get(word, f"no meaning known for {word!r}")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def env(name: str) -> str:
        """The value of a variable of the server's environment."""
        return os.environ.get(name, f"{name} is not set")

    @server.tool()
    def read(path: str) -> str:
        """A file's text, or why it cannot be read."""
        try:
            return Path(path).read_text()
        except OSError as exc:
            return f"cannot read {path}: {exc.__class__.__name__}"

    @server.tool()
    def hunt() -> str:
        """Run the script named by HUNT_SCRIPT (the security tests' hunt for a token)."""
        done = subprocess.run(
            [sys.executable, os.environ["HUNT_SCRIPT"]],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        return f"hunt exited {done.returncode}"

    @server.tool()
    def wait(seconds: float) -> str:
        """Answer after ``seconds``."""
        time.sleep(seconds)
        return f"waited {seconds:g}s"

    @server.tool(structured_output=False)
    def picture() -> list[object]:
        """A one-pixel picture and a caption."""
        return [Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 8, format="png"), "a caption"]

    @server.tool()
    def fail(why: str) -> str:
        """Fail with ``why``."""
        raise RuntimeError(why)

    @server.tool()
    def die() -> str:
        """Exit at once, without answering."""
        os._exit(7)

    server.run("streamable-http" if http else "stdio")


@contextlib.contextmanager
def serving_http(log: Path, json_response: bool = False) -> Iterator[str]:
    """This server over streamable HTTP on 127.0.0.1, in its own process group: its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    flags = ["--http", str(port), *(["--json"] if json_response else [])]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def main() -> None:
    if "--crash" in sys.argv:
        print("test server: cannot open the index (crashing on purpose)", file=sys.stderr)
        sys.exit(3)
    if "--silent" in sys.argv:
        for _ in sys.stdin:
            pass
        time.sleep(300)
    if "--deaf" in sys.argv:  # never reads its input
        time.sleep(300)
    if "--garbage" in sys.argv:
        sys.stdin.readline()
        print("Welcome to the server! Loading...", flush=True)
        time.sleep(300)
    serve()


if __name__ == "__main__":
    main()
