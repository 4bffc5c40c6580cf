"""Shared helpers for the end-to-end runner and CLI tests: configs, agents, logs, processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
import pygit2

from agentrun.events import Event
from agentrun.store.log import EventLog

VENV_BIN = Path(sys.executable).parent
WAIT_SECONDS = 30.0
CONFIG = ".agentrun.toml"
SCRIPT = "agent-script.toml"

# The last step of every script `configure` writes: the scripted agent takes the first
# step that matches, so this is what an implement session does when no other step says.
FALLBACK_CHANGE = "build-change.txt"
FALLBACK_IMPLEMENT = {"phase": "implement", "write": {FALLBACK_CHANGE: "changed by the build\n"}}

# One scripted agent for every role: plan, approve, done, pass (the script's defaults).
SCRIPTED = f"""\
[roles]
default = ["scripted"]

[runtimes.scripted]
kind = "script"
script = "{SCRIPT}"
"""


def git(cwd: Path, *args: str, check: bool = True) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, check=check, capture_output=True, text=True, env=cli_env()
    )
    return out.stdout.strip()


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment (identity pinned) with this venv's scripts first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUN_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra or {})
    return env


# --- TOML --------------------------------------------------------------------


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
        )
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def script_toml(steps: list[dict[str, Any]]) -> str:
    """The scripted agent's file: one ``[[step]]`` table per dict."""
    out: list[str] = []
    for step in steps:
        out.append("[[step]]")
        out.extend(f"{key} = {toml_value(value)}" for key, value in step.items())
        out.append("")
    return "\n".join(out)


def script_runtimes(repo_path: Path, scripts: dict[str, list[dict[str, Any]]]) -> str:
    """A scripted runtime per name, each with its own script file (staged), as TOML."""
    tables = []
    for name, steps in scripts.items():
        (repo_path / f"{name}.toml").write_text(script_toml(steps))
        git(repo_path, "add", f"{name}.toml")
        tables.append(f'[runtimes.{name}]\nkind = "script"\nscript = "{name}.toml"\n')
    return "\n".join(tables)


def configure(
    repo_path: Path,
    steps: list[dict[str, Any]] | None = None,
    extra: str = "",
    base: str = SCRIPTED,
    commit: bool = True,
) -> None:
    """Write ``.agentrun.toml`` (the scripted runtime plus ``extra``) and the agent script.

    An implement session no step of ``steps`` matches writes ``FALLBACK_CHANGE``: a build
    that changes nothing parks with a question, and most tests are about something else.
    A test of an empty implement says so with a step of its own (``{"phase": "implement"}``).
    """
    (repo_path / SCRIPT).write_text(script_toml([*(steps or []), FALLBACK_IMPLEMENT]))
    (repo_path / CONFIG).write_text(base + "\n" + extra)
    if commit:
        git(repo_path, "add", CONFIG, SCRIPT)
        git(repo_path, "commit", "-q", "-m", "configure agentrun")


# --- a command agent -----------------------------------------------------------

AGENT_PROGRAM = '''\
"""A test agent: reads its prompt on stdin, reports with `git agentrun agent ...`."""

import os
import subprocess
import sys
import time
from pathlib import Path

sys.stdout.reconfigure(line_buffering=True)
prompt = sys.stdin.read()
phase = os.environ["AGENTRUN_PHASE"]
family = phase.split("@")[0].split(":")[0]
state = Path(os.environ["AGENT_STATE"])
mode = os.environ.get("AGENT_IMPLEMENT", "done")
print(f"agent: {phase} in session {os.environ['AGENTRUN_SESSION']}")
print(f"agent: the prompt has {len(prompt)} characters")
(state / f"prompt-{phase}.txt").write_text(prompt)


def verb(*args):
    done = subprocess.run(["git", "agentrun", "agent", *args], capture_output=True, text=True)
    print(f"agent: git agentrun agent {args[0]} -> {done.returncode} {done.stdout.strip()}")
    if done.returncode:
        print(done.stderr)
        sys.exit(done.returncode)


if family == "plan":
    Path(".agentrun/run/plan.md").write_text("1. Add feature.txt.\\n")
    verb("plan", ".agentrun/run/plan.md")
elif family in ("plan-review", "code-review"):
    verb("approve")
elif family == "implement":
    if mode == "hang" and not (state / "hung").exists():
        (state / "hung").write_text("")
        child = subprocess.Popen(["sleep", "300"])
        (state / "pids").write_text(f"{os.getpid()} {child.pid}")
        print("agent: hanging", flush=True)
        time.sleep(300)
    Path("feature.txt").write_text("made by the command agent\\n")
    verb("done", "--summary", "added feature.txt")
elif family == "verify":
    verb("pass")
else:
    verb("done")
'''


# The scripted agent for every role but implement, which a command agent plays.
SCRIPTED_BUT_IMPLEMENT = f"""\
[roles]
default = ["scripted"]
implement = ["agent"]

[runtimes.scripted]
kind = "script"
script = "{SCRIPT}"
"""


def command_agent(
    tmp_path: Path,
    implement: str = "done",
    source: str = AGENT_PROGRAM,
    env: Mapping[str, str] | None = None,
) -> tuple[str, Path]:
    """The ``[runtimes.agent]`` table of a command agent (``source``, run by this Python
    with ``AGENT_STATE`` and ``env``), and its state folder.

    With the default agent, ``implement = "hang"`` makes the first implement session
    start a ``sleep 300`` child and sleep itself (pids in ``state/pids``); later sessions
    do the work.
    """
    state = tmp_path / "agent-state"
    state.mkdir(exist_ok=True)
    program = tmp_path / ("agent.py" if source == AGENT_PROGRAM else "other_agent.py")
    program.write_text(source)
    variables = {"AGENT_STATE": str(state), "AGENT_IMPLEMENT": implement, **(env or {})}
    listed = ", ".join(f"{k} = {json.dumps(v)}" for k, v in variables.items())
    table = f"""\
[runtimes.agent]
kind = "command"
command = [{json.dumps(sys.executable)}, {json.dumps(str(program))}]
env = {{ {listed} }}
"""
    return table, state


def agent_pids(state: Path) -> tuple[int, int]:
    """The hanging agent's pid and its ``sleep`` child's pid."""
    path = state / "pids"
    wait_for(lambda: path.exists() and len(path.read_text().split()) == 2, "the agent's pids")
    agent, child = path.read_text().split()
    return int(agent), int(child)


def kill_left_over(pid_file: Path) -> None:
    """Teardown: SIGKILL whatever of the pids in ``pid_file`` still runs."""
    if pid_file.exists():
        for pid in map(int, pid_file.read_text().split()):
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    """No such process any more (a zombie waiting to be reaped counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# --- the log and the branch ------------------------------------------------------


def events(repo: pygit2.Repository, slug: str) -> list[Event]:
    return [stored.event for stored in EventLog(repo).read(slug)]


def types(repo: pygit2.Repository, slug: str) -> list[str]:
    return [event.type for event in events(repo, slug)]


def payloads(repo: pygit2.Repository, slug: str, kind: str) -> list[Any]:
    return [event.payload for event in events(repo, slug) if event.type == kind]


def tip(repo: pygit2.Repository, slug: str) -> str | None:
    return EventLog(repo).tip_oid(slug)


def branch_log(repo_path: Path, slug: str, base: str = "main") -> list[tuple[str, str, str]]:
    """(sha, subject, body) of the build branch's commits since ``base``, oldest first."""
    out = git(
        repo_path, "log", "--reverse", "--format=%H%x1f%s%x1f%B%x1e", f"{base}..agentrun/{slug}"
    )
    found = []
    for record in out.split("\x1e"):
        if record.strip():
            sha, subject, body = record.strip("\n").split("\x1f")
            found.append((sha, subject, body))
    return found


def trailers(body: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in body.splitlines() if line.startswith("Agentrun-"))


def note(repo_path: Path, sha: str) -> list[dict[str, Any]]:
    text = git(repo_path, "notes", "--ref", "agentrun", "show", sha)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --- waiting and background processes ------------------------------------------------


def wait_for(check: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


def wait_for_event(repo_path: Path, slug: str, match: Callable[[Event], bool], what: str) -> Event:
    """Poll the log (a fresh repository handle each time) until an event matches."""
    found: list[Event] = []

    def check() -> bool:
        repo = pygit2.Repository(str(repo_path))
        if EventLog(repo).tip_oid(slug) is None:
            return False
        found[:] = [e for e in events(repo, slug) if match(e)]
        return bool(found)

    wait_for(check, what)
    return found[0]


def session_started(phase: str) -> Callable[[Event], bool]:
    return lambda e: e.type == "session.started" and e.payload.phase == phase


def only_slug(repo_path: Path) -> str:
    """The slug of the one build a background `run` created."""
    slugs: list[str] = []

    def check() -> bool:
        slugs[:] = EventLog(pygit2.Repository(str(repo_path))).slugs()
        return len(slugs) == 1

    wait_for(check, "the build to be created")
    return slugs[0]


class Background:
    """A `git agentrun …` process in its own process group, ended at teardown."""

    def __init__(self, repo_path: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            ["git", "agentrun", *args],
            cwd=repo_path,
            env=cli_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def readline(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def wait(self, timeout: float = WAIT_SECONDS) -> tuple[int, str]:
        """The exit code and the rest of the output.

        Read through the same text stream as ``readline``: ``communicate`` reads the pipe
        itself and would lose what ``readline`` had already buffered.
        """
        stream, rest = self.proc.stdout, []
        assert stream is not None
        reader = threading.Thread(target=lambda: rest.append(stream.read()), daemon=True)
        reader.start()
        code = self.proc.wait(timeout=timeout)
        reader.join(timeout=timeout)
        return code, "".join(rest)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired, ValueError):
            self.proc.communicate(timeout=5)


@contextmanager
def background(repo_path: Path, *args: str) -> Iterator[Background]:
    proc = Background(repo_path, *args)
    try:
        yield proc
    finally:
        proc.stop()


def run_cli(
    repo_path: Path, *args: str, timeout: float = WAIT_SECONDS
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", *args],
        cwd=repo_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_verb(
    repo_path: Path, slug: str, phase: str, session: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``git agentrun agent ARGS`` as an agent of ``session`` in ``phase`` would run it."""
    env = {"AGENTRUN_BUILD": slug, "AGENTRUN_PHASE": phase, "AGENTRUN_SESSION": session}
    return subprocess.run(
        ["git", "agentrun", "agent", *args],
        cwd=repo_path,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
    )
