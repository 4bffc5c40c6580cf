"""The API runtimes' tools at work: files of the worktree, an optional shell, the verbs.

What each tool is lives in ``tool_catalog``; here each call is run. Every path is
confined to the worktree (``confine``) and reads and writes are bounded. A refusal is
not an exception for the session: it goes back to the model as the tool's result, and
nothing is read or written. The verbs of DESIGN §6 are the same in-process calls the
CLI verbs make, so they are validated exactly alike (a verb that does not fit the phase
is refused).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pygit2

from agentrun import procs
from agentrun.agent.context import write_context
from agentrun.agent.verbs import report
from agentrun.errors import AgentrunError, VerbError
from agentrun.kernel.verbs import AgentEnv
from agentrun.runtimes.base import SessionControl, SessionSpec
from agentrun.runtimes.confine import readable, writable
from agentrun.runtimes.mcp_tools import UserTools
from agentrun.runtimes.tool_catalog import (
    REMEMBER,
    VERB_TOOLS,
    ToolResult,
    report_of,
    tool_specs,
    verbs_of,
)

MAX_READ_CHARS = 100_000
MAX_WRITE_BYTES = 1_000_000
MAX_LIST_ENTRIES = 2_000
MAX_MATCHES = 200
MAX_SEARCH_FILE_BYTES = 1_000_000
MAX_SEARCH_FILES = 20_000
MAX_LINE_CHARS = 300
MAX_SHELL_OUTPUT = 20_000
SEARCH_SECONDS = 10.0  # one search call, all files together (never past the session)
SHELL_TIMEOUT_SECONDS = 600.0


class Toolbox:
    """Runs the model's tool calls for one session; ``deadline`` bounds the shell."""

    def __init__(
        self,
        spec: SessionSpec,
        control: SessionControl,
        shell: bool,
        env: dict[str, str],
        user: UserTools | None = None,
    ) -> None:
        self.spec = spec
        self.control = control
        self.env = env
        self.user = user  # the user's MCP servers' tools (``mcp_tools``)
        self.specs = (*tool_specs(spec.phase, shell), *(user.specs if user else ()))
        self.deadline = time.monotonic() + spec.budget_seconds
        self.root = spec.workdir.resolve()
        self._verb_names = {VERB_TOOLS[v].name: v for v in verbs_of(spec.phase)}
        self._handlers: dict[str, Callable[[dict[str, Any]], ToolResult]] = {
            "read_file": self._read,
            "list_files": self._list,
            "search": self._search,
            "write_file": self._write,
            "edit_file": self._edit,
            "context": self._context,
            "remember": self._remember,
        }
        if shell:
            self._handlers["shell"] = self._shell

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        try:
            if name in self._verb_names:
                return self._verb(self._verb_names[name], arguments)
            handler = self._handlers.get(name)
            if handler is None and self.user is not None:
                done = self.user.call(name, arguments, self.deadline, self.control.cancel)
                if done is not None:
                    return done
            if handler is None:
                known = ", ".join(s.name for s in self.specs)
                return ToolResult(f"no tool named {name!r} here; the tools are: {known}", True)
            return handler(arguments)
        except (AgentrunError, _BadArgument) as exc:  # GuardError, VerbError: refusals
            return ToolResult(f"refused: {exc}", error=True)
        except OSError as exc:
            return ToolResult(f"{name} failed: {exc.strerror or exc}", error=True)
        except (ValueError, UnicodeError) as exc:  # a NUL in a path, a file not in UTF-8
            return ToolResult(f"{name} failed: {exc}", error=True)

    # --- files --------------------------------------------------------------

    def _path(self, args: dict[str, Any], action: str) -> tuple[str, Path]:
        relative = _arg(args, "path")
        return relative, readable(self.root, relative, action)

    def _read(self, args: dict[str, Any]) -> ToolResult:
        relative, path = self._path(args, "read")
        if not path.is_file():
            return ToolResult(f"no such file: {relative}", error=True)
        with path.open("rb") as handle:
            data = handle.read(MAX_READ_CHARS * 4 + 1)
        if b"\0" in data[:8192]:
            return ToolResult(f"{relative} is a binary file ({path.stat().st_size} bytes)")
        text = data.decode("utf-8", "replace")
        if len(text) > MAX_READ_CHARS or path.stat().st_size > len(data):
            size = path.stat().st_size
            cut = text[:MAX_READ_CHARS]
            return ToolResult(f"{cut}\n[truncated: {relative} has {size} bytes; shown the start]")
        return ToolResult(text)

    def _list(self, args: dict[str, Any]) -> ToolResult:
        relative, top = self._folder(args, "list")
        found = [p for p, _ in itertools.islice(_walk(self.root, top), MAX_LIST_ENTRIES + 1)]
        if not found:
            return ToolResult(f"{relative}: no files")
        more = "\n[more files not shown: list a folder]" if len(found) > MAX_LIST_ENTRIES else ""
        return ToolResult("\n".join(found[:MAX_LIST_ENTRIES]) + more)

    def _search(self, args: dict[str, Any]) -> ToolResult:
        pattern = _arg(args, "pattern")
        if not pattern:
            raise _BadArgument("`pattern` is empty")
        import regex  # re's pattern language, with a time limit per match

        try:
            compiled = regex.compile(
                pattern if args.get("regex") is True else regex.escape(pattern)
            )
        except regex.error as exc:
            raise _BadArgument(f"`pattern` is not a valid regular expression: {exc}") from None
        _, top = self._folder(args, "search")
        hits: list[str] = []
        limit = min(SEARCH_SECONDS, max(self.deadline - time.monotonic(), 0.1))
        deadline = time.monotonic() + limit
        for count, (relative, path) in enumerate(_walk(self.root, top)):
            if count >= MAX_SEARCH_FILES:
                hits.append(f"[stopped after {MAX_SEARCH_FILES} files: search a folder]")
                break
            for number, line in _lines(path):
                try:
                    found = compiled.search(line[:2000], timeout=deadline - time.monotonic())
                except TimeoutError:
                    raise _BadArgument(
                        f"the search ran past {limit:.1f} s (a pattern that backtracks "
                        "too much, or too many files): simplify the pattern or search a folder"
                    ) from None
                if found:
                    hits.append(f"{relative}:{number}: {line[:MAX_LINE_CHARS]}")
                    if len(hits) >= MAX_MATCHES:
                        hits.append(f"[stopped at {MAX_MATCHES} matches]")
                        return ToolResult("\n".join(hits))
        return ToolResult("\n".join(hits) or f"no match for {pattern!r}")

    def _folder(self, args: dict[str, Any], action: str) -> tuple[str, Path]:
        if args.get("path") in (None, "", ".", "./"):
            return ".", self.root
        return self._path(args, action)

    def _write(self, args: dict[str, Any]) -> ToolResult:
        relative, path = self._writable(args)
        content = _arg(args, "content")
        data = content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise _BadArgument(f"the content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
        if path.is_dir():
            return ToolResult(f"{relative} is a folder", error=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return ToolResult(f"wrote {relative} ({len(data)} bytes)")

    def _edit(self, args: dict[str, Any]) -> ToolResult:
        relative, path = self._writable(args)
        old, new = _arg(args, "old"), _arg(args, "new")
        if not old:
            raise _BadArgument("`old` is empty: use write_file to create a file")
        if not path.is_file():
            return ToolResult(f"no such file: {relative}", error=True)
        if path.stat().st_size > MAX_WRITE_BYTES:
            return ToolResult(f"{relative} is over {MAX_WRITE_BYTES} bytes", error=True)
        text = path.read_text(encoding="utf-8")
        count = text.count(old)
        if count == 0:
            return ToolResult(f"`old` was not found in {relative}; nothing changed", error=True)
        if count > 1 and args.get("replace_all") is not True:
            return ToolResult(
                f"`old` occurs {count} times in {relative}: include more of the text around it "
                "or set replace_all; nothing changed",
                error=True,
            )
        path.write_text(text.replace(old, new), encoding="utf-8")
        return ToolResult(f"edited {relative} ({count} replacement{'s' * (count > 1)})")

    def _writable(self, args: dict[str, Any]) -> tuple[str, Path]:
        relative = _arg(args, "path")
        return relative, writable(self.root, relative)

    # --- shell and verbs ----------------------------------------------------

    def _shell(self, args: dict[str, Any]) -> ToolResult:
        command = _arg(args, "command")
        left = min(SHELL_TIMEOUT_SECONDS, self.deadline - time.monotonic())
        if left <= 0:
            return ToolResult("not run: the session has no time left", error=True)
        done = procs.run_tree(
            ["bash", "-c", command],
            cwd=self.spec.workdir,
            env=self.env,
            timeout=left,
            cancel=self.control.cancel,
            on_line=self.control.on_activity,
            on_start=self.control.on_process,
            sandbox=self.spec.sandbox,
        )
        output = done.output
        if len(output) > MAX_SHELL_OUTPUT:
            output = (
                f"[first {len(output) - MAX_SHELL_OUTPUT} characters cut]\n"
                + output[-MAX_SHELL_OUTPUT:]
            )
        if done.timed_out:
            return ToolResult(f"{output}\n[ended after {left:.0f}s: timeout]", error=True)
        if done.cancelled:
            return ToolResult(f"{output}\n[ended: the session was cancelled]", error=True)
        return ToolResult(f"exit status {done.exit_code}\n{output}", error=done.exit_code != 0)

    def _agent_env(self) -> AgentEnv:
        spec = self.spec
        return spec.agent_env()

    def _verb(self, verb: str, args: dict[str, Any]) -> ToolResult:
        problem = VERB_TOOLS[verb].problem(args)
        if problem is not None:
            raise _BadArgument(problem)
        said = report(self._repo(), self._agent_env(), report_of(verb, args))
        self.control.on_activity(said)
        return ToolResult(said, terminal=True)

    def _remember(self, args: dict[str, Any]) -> ToolResult:
        problem = REMEMBER.problem(args)
        if problem is not None:
            raise _BadArgument(problem)
        said = report(self._repo(), self._agent_env(), report_of("remember", args))
        return ToolResult(said)  # a fact ends nothing: the session goes on

    def _context(self, args: dict[str, Any]) -> ToolResult:
        path = write_context(self._repo(), self._agent_env(), self.spec.workdir)
        text = path.read_text(encoding="utf-8")[:MAX_READ_CHARS]
        return ToolResult(f"{text}\n[also written to {path.relative_to(self.spec.workdir)}]")

    def _repo(self) -> pygit2.Repository:
        try:
            return pygit2.Repository(str(self.spec.log_repository()))
        except pygit2.GitError:
            raise VerbError(
                f"{self.spec.workdir} is not a git worktree; nothing recorded"
            ) from None


class _BadArgument(Exception):
    pass


def _arg(args: dict[str, Any], key: str, required: bool = True) -> str:
    value = args.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise _BadArgument(f"`{key}` is required and must be a string")
    return value


def _walk(root: Path, top: Path) -> Iterator[tuple[str, Path]]:
    """Files under ``top``, sorted: .git and what the repository ignores left out.

    Ignored means what git itself ignores here (``.gitignore`` files, ``info/exclude``,
    ``core.excludesFile``), so ``node_modules/`` and ``.venv/`` do not use up the caps.
    A folder asked for by name is walked whole, ignored or not. Symbolic links are
    listed, never followed.
    """
    if top.is_file():
        yield top.relative_to(root).as_posix(), top
        return
    ignored = _ignore_rules(root)
    if top != root and ignored(_relative(root, top) + "/"):
        ignored = _nothing_ignored
    for folder, dirs, files in os.walk(top):
        here = Path(folder)
        prefix = _relative(root, here)
        prefix = "" if prefix == "." else prefix + "/"
        dirs[:] = sorted(d for d in dirs if d != ".git" and not ignored(f"{prefix}{d}/"))
        for name in sorted(files):
            if name != ".git" and not ignored(prefix + name):
                yield prefix + name, here / name


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _nothing_ignored(relative: str) -> bool:
    return False


def _ignore_rules(root: Path) -> Callable[[str], bool]:
    """git's own answer to "is this path ignored?" for the worktree at ``root``."""
    try:
        repo = pygit2.Repository(str(root))
    except pygit2.GitError:
        return _nothing_ignored  # not a repository: no ignore rules apply
    if repo.workdir is None or Path(repo.workdir).resolve() != root.resolve():
        return _nothing_ignored  # ``root`` is inside a repository, not a worktree's root
    return repo.path_is_ignored


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a text file for search; links, big and binary files give none."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_SEARCH_FILE_BYTES:
            return
        data = path.read_bytes()
    except OSError:
        return
    if b"\0" in data[:8192]:
        return
    yield from enumerate(data.decode("utf-8", "replace").splitlines(), 1)
