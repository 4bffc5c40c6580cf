"""The real Claude Code, Codex and aider CLIs drive whole builds against a scripted model.

The CLIs are the pinned ones ``scripts/check`` installs (``tests/clients`` for the npm
packages, ``.venv-aider`` for aider). Each talks to :class:`ModelServer` on 127.0.0.1,
whose scripted model answers from the phase prompt it was sent: its tool calls really
run in the worktree (Claude's Bash and Write, Codex's exec_command) and the agent
reports with ``git agentrun agent …``; aider edits with SEARCH/REPLACE blocks and
reports in an ``agentrun`` block. Every CLI runs with a temporary HOME (the shared
fixture's), its own CODEX_HOME, and retries off, so that a broken mock fails fast.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pygit2
import pytest
from runner.helpers import configure, git, gone, payloads, tip, toml_value
from support.model_server import ModelServer, Request, ToolCall, Turn

from agentrun import procs
from agentrun.agent.drain import drain
from agentrun.agent.outbox import OUTBOX, queue
from agentrun.commands.build import create_build, run_build
from agentrun.config import RuntimeConfig
from agentrun.errors import VerbError
from agentrun.events import Usage
from agentrun.forge.local import LocalForge
from agentrun.kernel.verbs import VerbReport
from agentrun.runner.loop import Outcome
from agentrun.runtimes.agent_cli import failed as classify
from agentrun.runtimes.aider import last_reply, parse_block
from agentrun.runtimes.aider import usage_of as aider_usage
from agentrun.runtimes.base import (
    AUTH,
    BUDGET,
    TIMEOUT,
    UNAVAILABLE,
    SessionControl,
    SessionSpec,
    make_runtime,
    probe_runtime,
)
from agentrun.runtimes.claude import usage_of as claude_usage
from agentrun.store.log import EventLog

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / "tests" / "clients" / "node_modules" / ".bin" / "claude"
CODEX = ROOT / "tests" / "clients" / "node_modules" / ".bin" / "codex"
AIDER = ROOT / ".venv-aider" / "bin" / "aider"
GOAL = "Add hello.txt"
MARK = "agentrun build"
PHASES = {
    "You are the planner": "plan",
    "You review the plan": "plan-review",
    "You implement": "implement",
    "You review the code": "code-review",
}
PLAN = "1. Add hello.txt that says hello."
VERIFY = '[[verify]]\nname = "loud"\ncommand = "grep -q HELLO hello.txt"\n'


def binary(path: Path) -> str:
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/check, which installs the agent CLIs")
    return str(path)


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    """Whatever a CLI left running (it runs in a session of its own) is ended at teardown."""
    yield
    for child in psutil.Process().children(recursive=True):
        procs.end_tree(child.pid, grace=1.0)


# --- the scripted model ------------------------------------------------------------


def items(request: Request) -> list[Any]:
    body = request.body if isinstance(request.body, dict) else {}
    return list(body.get("messages") or body.get("input") or [])


def flat(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(flat(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(flat(value.get(k)) for k in ("text", "content") if k in value)
    return ""


def is_tool_result(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("type") == "function_call_output":
        return True
    content = item.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def latest_prompt(request: Request) -> tuple[int, str]:
    """The newest phase prompt in the conversation (a resumed one holds older ones too)."""
    conversation = items(request)
    for index in range(len(conversation) - 1, -1, -1):
        item = conversation[index]
        if isinstance(item, dict) and item.get("role") == "user" and not is_tool_result(item):
            text = flat(item.get("content"))
            if MARK in text:
                return index, text
    return -1, ""


def phase_of(prompt: str) -> str:
    family = next((p for marker, p in PHASES.items() if marker in prompt), "other")
    found = re.search(r"\(round (\d+)\)", prompt)
    return f"{family}@{found[1] if found else 1}"


Step = tuple[ToolCall, ...]


def tool_agent(script: dict[str, list[Step]]) -> Callable[[Request], Turn]:
    """A model that plays ``script[phase@round]`` one step per request, then says it is done."""

    def respond(request: Request) -> Turn:
        index, prompt = latest_prompt(request)
        steps = script.get(phase_of(prompt), [])
        taken = sum(1 for item in items(request)[index + 1 :] if is_tool_result(item))
        if taken < len(steps):
            return Turn(text=f"step {taken + 1}", tool_calls=steps[taken], tokens_in=50)
        return Turn(text="Finished.", tokens_in=50, tokens_out=5)

    return respond


def build_script(
    shell: Callable[[str], ToolCall], write: Callable[[str, str], ToolCall]
) -> dict[str, list[Step]]:
    verb = "git agentrun agent "
    plan_file = ".agentrun/run/plan.md"
    return {
        "plan@1": [(write(plan_file, PLAN + "\n"),), (shell(verb + "plan " + plan_file),)],
        "plan-review@1": [(shell(verb + "approve"),)],
        "implement@1": [
            (write("hello.txt", "hello\n"),),
            (shell(verb + "done --summary 'add hello.txt'"),),
        ],
        "code-review@1": [(shell(verb + "revise --finding 'say it louder'"),)],
        "implement@2": [
            (write("hello.txt", "HELLO\n"),),
            (shell(verb + "done --summary 'louder'"),),
        ],
        "code-review@2": [(shell(verb + "approve"),)],
    }


def claude_shell(command: str) -> ToolCall:
    return ToolCall("Bash", {"command": command, "description": "run it"})


def write_command(path: str, content: str) -> str:
    script = f"import pathlib; pathlib.Path({path!r}).write_text({content!r})"
    return f"python3 -c {shlex.quote(script)}"


def claude_write(path: str, content: str) -> ToolCall:
    # Claude Code's own Write tool: the worktree lies outside any .git folder, which
    # Claude Code refuses to edit in.
    return ToolCall("Write", {"file_path": path, "content": content})


def codex_shell(command: str) -> ToolCall:
    return ToolCall("exec_command", {"cmd": command})


def codex_write(path: str, content: str) -> ToolCall:
    return codex_shell(write_command(path, content))


# --- configs -------------------------------------------------------------------------


def toml_table(name: str, values: dict[str, Any]) -> str:
    rows = "".join(f"{key} = {toml_value(value)}\n" for key, value in values.items())
    return f"[runtimes.{name}]\n{rows}"


def claude_table(url: str) -> dict[str, Any]:
    return {
        "kind": "claude",
        "binary": binary(CLAUDE),
        "env": {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        },
    }


# Where bubblewrap is installed (isolation uses it), Codex runs its sandbox through it and
# first links its helper binaries into CODEX_HOME; it refuses to do that under the system
# temp folder ("Refusing to create helper binaries under temporary dir"), and every tool
# call then fails. So the tests' Codex homes live under /var/tmp, removed at the end; one
# folder per test process, so that parallel workers do not remove each other's.
CODEX_HOMES = Path(f"/var/tmp/agentrun-test-codex-{os.getpid()}")


@pytest.fixture(autouse=True, scope="module")
def _codex_homes() -> Iterator[None]:
    yield
    shutil.rmtree(CODEX_HOMES, ignore_errors=True)


def codex_home(tmp_path: Path) -> Path:
    """A Codex home for this test, outside the system temp folder (see CODEX_HOMES)."""
    CODEX_HOMES.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{tmp_path.name[:40]}-", dir=CODEX_HOMES))


def codex_table(url: str, home: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    provider = (
        f'model_providers.mock={{name="mock", base_url="{url}/v1", wire_api="responses", '
        'env_key="MOCK_API_KEY", supports_websockets=false, request_max_retries=0, '
        "stream_max_retries=0}"
    )
    home.mkdir(exist_ok=True)
    return {
        "kind": "codex",
        "binary": binary(CODEX),
        "model": "gpt-5.5",
        "api_key_env": "MOCK_API_KEY",
        "extra_args": ["-c", "model_provider=mock", "-c", provider, *extra],
        "env": {"CODEX_HOME": str(home), "MOCK_API_KEY": "test-key"},
    }


def aider_table(url: str) -> dict[str, Any]:
    return {
        "kind": "aider",
        "binary": binary(AIDER),
        "model": "openai/mock",
        "env": {
            "OPENAI_API_BASE": f"{url}/v1",
            "OPENAI_API_KEY": "test-key",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        },
    }


def run_with(
    repo_path: Path, repo: pygit2.Repository, tables: dict[str, dict[str, Any]], roles: str
) -> tuple[str, Outcome]:
    text = roles + "\n" + "".join(toml_table(n, t) for n, t in tables.items()) + VERIFY
    configure(repo_path, base=text)
    created = create_build(repo, GOAL)
    return created.slug, run_build(repo, created.slug)


def transcript(repo: pygit2.Repository, slug: str, session: str) -> str:
    ended = [p for p in payloads(repo, slug, "session.ended") if p.session == session]
    return EventLog(repo).text(tip(repo, slug) or "", ended[0].transcript) or ""


def first_request_of(server: ModelServer, phase: str) -> Request:
    return next(r for r in server.model_requests() if phase_of(latest_prompt(r)[1]) == phase)


def story(repo: pygit2.Repository, slug: str) -> str:
    """The log in a few lines, with each session's transcript: what a failure shows."""
    lines = []
    for stored in EventLog(repo).read(slug):
        event = stored.event
        lines.append(f"{event.type}: {event.payload.model_dump(exclude_defaults=True)}")
        if event.type == "session.ended":
            lines.append(transcript(repo, slug, event.payload.session))
    return "\n".join(lines)


def assert_whole_build(repo_path: Path, repo: pygit2.Repository, slug: str, outcome: Any) -> None:
    """Plan, review, two implement rounds, reviews, the verify check, a ready proposal."""
    assert outcome.state.state_name == "complete", story(repo, slug)
    started = payloads(repo, slug, "session.started")
    assert [(p.phase, p.round) for p in started] == [
        ("plan", 1),
        ("plan-review", 1),
        ("implement", 1),
        ("code-review", 1),
        ("implement", 2),
        ("code-review", 2),
    ]
    ended = payloads(repo, slug, "session.ended")
    assert [p.outcome for p in ended] == ["ok"] * 6
    assert all(p.usage.tokens_in > 0 and p.usage.tokens_out > 0 for p in ended)
    assert all(p.runtime_session_id for p in ended)
    assert git(repo_path, "show", f"agentrun/{slug}:hello.txt") == "HELLO"
    assert EventLog(repo).text(tip(repo, slug) or "", "plan-r1.md").strip() == PLAN
    verdicts = payloads(repo, slug, "code-review.verdict")
    assert [(v.verdict, v.findings) for v in verdicts] == [
        ("revise", ("say it louder",)),
        ("approve", ()),
    ]
    assert [v.outcome for v in payloads(repo, slug, "verify.completed")] == ["pass"]
    opened = payloads(repo, slug, "proposal.opened")[0]
    final = LocalForge(repo).get(opened.number)
    assert (final.state, final.draft) == ("open", False)


def implement_sessions(repo: pygit2.Repository, slug: str) -> list[Any]:
    ids = [p.session for p in payloads(repo, slug, "session.started") if p.phase == "implement"]
    return [p for p in payloads(repo, slug, "session.ended") if p.session in ids]


# --- whole builds ----------------------------------------------------------------------


def test_claude_runs_a_whole_build(repo_path: Path, repo: pygit2.Repository) -> None:
    with ModelServer(tool_agent(build_script(claude_shell, claude_write))) as server:
        tables = {"claude": claude_table(server.url)}
        slug, outcome = run_with(repo_path, repo, tables, 'roles.default = ["claude"]')

    assert_whole_build(repo_path, repo, slug, outcome)
    first, second = implement_sessions(repo, slug)
    # The producer continued its session: implement@2 was started with --resume, so
    # its first request carries implement@1's conversation.
    resumed = first_request_of(server, "implement@2")
    assert "(round 1)" in resumed.text() and "done recorded" in resumed.text()
    said = transcript(repo, slug, second.session)
    assert f"continuing Claude Code session {first.runtime_session_id}" in said
    assert "[tool Write]" in said and "done recorded" in said
    assert first.usage.cost_usd is not None  # Claude Code reports its own estimate


def test_codex_runs_a_whole_build_through_its_sandbox(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    # Outside the temp folder (where repositories usually live) Codex's sandbox keeps the
    # main repository's .git read-only; these settings make it so for this temp repo too.
    read_only_tmp = (
        "-c",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "-c",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    )
    with ModelServer(tool_agent(build_script(codex_shell, codex_write))) as server:
        tables = {"codex": codex_table(server.url, codex_home(tmp_path), read_only_tmp)}
        slug, outcome = run_with(repo_path, repo, tables, 'roles.default = ["codex"]')

    assert_whole_build(repo_path, repo, slug, outcome)
    first, second = implement_sessions(repo, slug)
    assert first.runtime_session_id == second.runtime_session_id  # the same Codex thread
    resumed = first_request_of(server, "implement@2")
    assert "(round 1)" in resumed.text()
    said = transcript(repo, slug, second.session)
    assert f"continuing Codex thread {first.runtime_session_id}" in said
    # The verb only queued the report (as every verb does), and the runner appended it.
    assert "done queued in .agentrun/run/outbox/0001.json" in said
    assert "outbox 0001.json: done recorded" in said
    # Usage is this turn's own, not the thread's running total.
    assert second.usage.tokens_in < first.usage.tokens_in + second.usage.tokens_in


AIDER_REPLIES = {
    "plan@1": f"Here is my plan.\n\n```agentrun\nplan\n{PLAN}\n```\n",
    "plan-review@1": "The plan is fine.\n\n```agentrun\napprove\n```\n",
    "implement@1": (
        "hello.txt\n```\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n```\n\n"
        '```agentrun\ndone --summary "add hello.txt"\n```\n'
    ),
    "code-review@1": "```agentrun\nrevise\n- say it louder\n```\n",
    "implement@2": (
        "hello.txt\n```\n<<<<<<< SEARCH\nhello\n=======\nHELLO\n>>>>>>> REPLACE\n```\n\n"
        '```agentrun\ngit agentrun agent done --summary "louder"\n```\n'
    ),
    "code-review@2": "Good.\n\n```agentrun\napprove\n```\n",
}


def test_aider_runs_a_whole_build(repo_path: Path, repo: pygit2.Repository) -> None:
    def respond(request: Request) -> Turn:
        phase = phase_of(latest_prompt(request)[1])
        return Turn(text=AIDER_REPLIES.get(phase, "?"), tokens_in=80, tokens_out=20)

    with ModelServer(respond) as server:
        tables = {"aider": aider_table(server.url)}
        slug, outcome = run_with(repo_path, repo, tables, 'roles.default = ["aider"]')

    assert_whole_build(repo_path, repo, slug, outcome)
    first, second = implement_sessions(repo, slug)
    resumed = first_request_of(server, "implement@2")
    assert "(round 1)" in resumed.text()  # aider's chat history of implement@1, restored
    said = transcript(repo, slug, second.session)
    assert f"restoring aider's chat history {first.runtime_session_id}" in said
    assert "done recorded" in said
    assert not list(Path(repo_path).glob("**/.aider.tags.cache.v*"))
    branch_files = git(repo_path, "ls-tree", "-r", "--name-only", f"agentrun/{slug}")
    assert set(branch_files.split()) == {".agentrun.toml", "README.md", "agent-script.toml"} | {
        "hello.txt"
    }  # no aider droppings (.gitignore, .aider.*) and no scratch files


# --- one session at a time ---------------------------------------------------------------

KINDS = ("claude", "codex", "aider")


def table_for(kind: str, url: str, tmp_path: Path) -> dict[str, Any]:
    if kind == "claude":
        return claude_table(url)
    if kind == "codex":
        return codex_table(url, codex_home(tmp_path))
    return aider_table(url)


def runtime_config(table: dict[str, Any], **changes: Any) -> RuntimeConfig:
    return RuntimeConfig.model_validate({**table, **changes})


def spec(tmp_path: Path, budget: float = 60.0, resume_from: str | None = None) -> SessionSpec:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return SessionSpec(
        session="s-test",
        build="no-build",
        phase="implement",
        round=1,
        attempt=1,
        role="implement",
        prompt="You implement an agentrun build (round 1).\n\nGoal: say hello",
        workdir=workdir,
        env={k: v for k, v in os.environ.items() if not k.startswith("AGENTRUN_")},
        budget_seconds=budget,
        repo_root=workdir,
        resume_from=resume_from,
    )


class Watch(SessionControl):
    """A session control that remembers the CLI's pid and what it said."""

    def __init__(self) -> None:
        super().__init__()
        self.pids: list[int] = []
        self.lines: list[str] = []
        self.on_process = self.pids.append
        self.on_activity = self.lines.append


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_cli_is_unavailable(kind: str, tmp_path: Path) -> None:
    config = RuntimeConfig(kind=kind, binary=str(tmp_path / "no" / kind))
    runtime = make_runtime(kind, config)
    handle, result = runtime.start(spec(tmp_path), Watch())

    assert (result.ok, result.cause, result.permanent) == (False, UNAVAILABLE, True)
    assert f"{tmp_path / 'no' / kind} not found" in result.error
    assert "not found" in runtime.end(handle).text
    assert not probe_runtime(config, os.environ).ok


@pytest.mark.parametrize("kind", KINDS)
def test_the_probe_names_the_version(kind: str) -> None:
    path = {"claude": CLAUDE, "codex": CODEX, "aider": AIDER}[kind]
    found = probe_runtime(RuntimeConfig(kind=kind, binary=binary(path)), os.environ)
    assert found.ok, found.detail
    version = {"claude": "2.1.332", "codex": "0.171.0", "aider": "0.86.2"}[kind]
    assert version in found.detail and str(path) in found.detail


def test_an_alternate_takes_over_when_the_cli_is_missing(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    gone = {"kind": "codex", "binary": str(tmp_path / "no-codex")}
    scripted = {"kind": "script", "script": "agent-script.toml"}
    configure(
        repo_path,
        [{"phase": "implement", "write": {"hello.txt": "HELLO\n"}}],
        base='roles.default = ["gone", "scripted"]\n'
        + toml_table("gone", gone)
        + toml_table("scripted", scripted)
        + VERIFY,
    )
    created = create_build(repo, GOAL)
    outcome = run_build(repo, created.slug)

    assert outcome.state.state_name == "complete", story(repo, created.slug)
    started = payloads(repo, created.slug, "session.started")
    assert [p.runtime for p in started] == ["gone", "scripted"] * 4
    assert {p.substitution for p in started if p.runtime == "scripted"} == {"gone"}
    failed = [p for p in payloads(repo, created.slug, "session.ended") if p.outcome != "ok"]
    assert len(failed) == 4
    assert all(f"{tmp_path / 'no-codex'} not found on PATH" in p.error for p in failed)
    assert not payloads(repo, created.slug, "phase.failed")


SLEEPER = "echo started > sleeper.txt; exec sleep 299.5"


class TreeWatch(Watch):
    """Also records every process of the CLI's tree while the session runs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[int, float], str] = {}
        self.done = threading.Event()
        self.on_process = self._watch

    def _watch(self, pid: int) -> None:
        self.pids.append(pid)
        threading.Thread(target=self._poll, args=(pid,), daemon=True).start()

    def _poll(self, pid: int) -> None:
        while not self.done.wait(0.05):
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(pid)
                for proc in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        key = (proc.pid, proc.create_time())
                        self.seen.setdefault(key, " ".join(proc.cmdline()))

    def left_running(self) -> list[str]:
        """What of the tree still runs: the same pid with the same start time."""
        alive = []
        for (pid, started), cmd in self.seen.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {cmd}")
        return alive


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_past_its_budget_ends_the_whole_tree(kind: str, tmp_path: Path) -> None:
    def respond(request: Request) -> Turn:
        if kind == "aider":
            return Turn(text="thinking", delay=30)
        if request.tool_results():
            return Turn(text="slept")
        call = claude_shell(SLEEPER) if kind == "claude" else codex_shell(SLEEPER)
        return Turn(tool_calls=(call,))

    watch = TreeWatch()
    budget = 8.0 if kind == "aider" else 6.0
    session = spec(tmp_path, budget=budget)
    with ModelServer(respond) as server:
        runtime = make_runtime(kind, runtime_config(table_for(kind, server.url, tmp_path)))
        handle, result = runtime.start(session, watch)
    watch.done.set()

    assert (result.ok, result.cause) == (False, TIMEOUT), runtime.end(handle).text
    assert f"budget of {budget:g}s" in result.error
    assert len(watch.pids) == 1 and gone(watch.pids[0])
    assert watch.left_running() == []
    if kind != "aider":  # the agent's tool call was running, a grandchild of the CLI
        assert (session.workdir / "sleeper.txt").exists(), runtime.end(handle).text
        assert any("sleep 299.5" in cmd for cmd in watch.seen.values()), watch.seen


@pytest.mark.parametrize("kind", KINDS)
def test_a_rejected_key_is_permanent_and_names_the_variable(kind: str, tmp_path: Path) -> None:
    with ModelServer(lambda _req: Turn(status=401, error="invalid x-api-key")) as server:
        runtime = make_runtime(kind, runtime_config(table_for(kind, server.url, tmp_path)))
        _, result = runtime.start(spec(tmp_path), Watch())

    assert (result.ok, result.cause, result.permanent) == (False, AUTH, True), result
    variable = {"claude": "ANTHROPIC_API_KEY", "codex": "MOCK_API_KEY", "aider": "OPENAI_API_KEY"}
    assert variable[kind] in result.error
    assert server.model_requests(), "the CLI never reached the model server"


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_connection_is_unavailable_at_once(kind: str, tmp_path: Path) -> None:
    table = table_for(kind, closed_port_url(), tmp_path)
    runtime = make_runtime(kind, runtime_config(table, max_retries=1))
    # No minute of backing off: the CLI gives up by itself, well inside a budget shorter
    # than its default retries would take (a session cut at its budget is not unavailable).
    handle, result = runtime.start(spec(tmp_path, budget=45), Watch())

    assert (result.ok, result.cause) == (False, UNAVAILABLE), runtime.end(handle).text


@pytest.mark.parametrize("kind", ["claude", "codex"])
def test_a_session_continues_with_the_clis_resume(kind: str, tmp_path: Path) -> None:
    def respond(request: Request) -> Turn:
        prompts = [t for t in request.texts() if "Goal: say hello" in t or t == "again"]
        if request.tool_results() or len(prompts) > 1:
            return Turn(text=f"turn {len(prompts)} done", tokens_in=40, tokens_out=4)
        if kind == "claude":  # outside .git, Claude Code's own Write tool works
            return Turn(tool_calls=(claude_write("hello.txt", "hello\n"),))
        return Turn(tool_calls=(codex_write("hello.txt", "hello\n"),))

    gone = "00000000-0000-4000-8000-000000000000"
    session = spec(tmp_path, resume_from=gone)
    with ModelServer(respond) as server:
        runtime = make_runtime(kind, runtime_config(table_for(kind, server.url, tmp_path)))
        handle, first = runtime.start(session, Watch())
        started_as = handle.runtime_session_id
        second = runtime.resume(handle, "again", Watch())
    said = runtime.end(handle).text

    assert first.ok and second.ok, said
    assert "is gone here; starting fresh" in said
    assert (session.workdir / "hello.txt").read_text() == "hello\n"
    assert started_as and started_as != gone and handle.runtime_session_id == started_as
    last = server.model_requests()[-1]
    assert "Goal: say hello" in last.text() and second.text == "turn 2 done"
    assert (second.usage.tokens_in, second.usage.tokens_out) == (40, 4)  # this turn's own


# --- reading what the CLIs print ---------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("no block here", None),
        ("```agentrun\napprove\n```", VerbReport("approve")),
        ("```agentrun\nplan\n1. One.\n2. Two.\n```", VerbReport("plan", text="1. One.\n2. Two.")),
        (
            '```agentrun\nrevise --finding "a b" --finding c\n```',
            VerbReport("revise", findings=("a b", "c")),
        ),
        (
            "```agentrun\nrevise\n- first\n\n- second\n```",
            VerbReport("revise", findings=("first", "second")),
        ),
        (
            '```agentrun\ngit agentrun agent done --summary "x y"\n```',
            VerbReport("done", text="x y"),
        ),
        ("```agentrun\ndone\nadded the parser\n```", VerbReport("done", text="added the parser")),
        ('```agentrun\nescalate "Which API?"\n```', VerbReport("escalate", text="Which API?")),
        ('```agentrun\nfail --reason "no tests"\n```', VerbReport("fail", text="no tests")),
        (
            "```agentrun\napprove\n```\nthen\n```agentrun\nrevise --finding late\n```",
            VerbReport("revise", findings=("late",)),
        ),
    ],
)
def test_the_agentrun_block_reads_like_the_verbs(reply: str, expected: VerbReport | None) -> None:
    assert parse_block(reply) == expected


@pytest.mark.parametrize("bad", ["```agentrun\n\n```", '```agentrun\ndone --summary "open\n```'])
def test_a_malformed_agentrun_block_is_refused(bad: str) -> None:
    with pytest.raises(VerbError):
        parse_block(bad)


def test_the_last_reply_is_what_follows_the_last_user_message() -> None:
    history = (
        "# aider chat started\n\n#### first prompt\n\nold reply\n```agentrun\napprove\n```\n"
        "> Tokens: 1 sent\n\n#### second prompt  \n#### ```agentrun\n#### done\n#### ```\n\n"
        "new reply\n> Applied edit to a.txt\n"
    )
    assert last_reply(history).split() == ["new", "reply"]


def test_aiders_usage_lines_add_up() -> None:
    output = (
        "Tokens: 1.8k sent, 35 received.\n"
        "Tokens: 12k sent, 2.0k cache write, 1.1k cache hit, 1.5k received. "
        "Cost: $0.01 message, $0.03 session.\n"
    )
    assert aider_usage(output) == Usage(tokens_in=13_800, tokens_out=1_535, cost_usd=0.03)
    assert aider_usage("nothing") == Usage()


def test_claudes_result_counts_cached_input_in_its_own_fields() -> None:
    result = {
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 100,
            "output_tokens": 7,
        },
        "total_cost_usd": 0.25,
    }
    expected = Usage(tokens_in=10, tokens_out=7, cache_read=100, cache_write=5, cost_usd=0.25)
    assert claude_usage(result) == expected
    assert claude_usage(None) == Usage()


@pytest.mark.parametrize(
    ("message", "status", "cause", "permanent"),
    [
        ("Invalid API key · Fix external API key", 401, AUTH, True),
        ("unexpected status 403 Forbidden: no", None, AUTH, True),
        ("Not logged in · Please run /login", None, AUTH, True),
        ("Missing environment variable: `MOCK_API_KEY`.", None, AUTH, True),
        ("litellm.AuthenticationError: OpenAIException - invalid key", None, AUTH, True),
        ("exceeded retry limit, last status: 429 Too Many Requests", None, UNAVAILABLE, False),
        ("We're currently experiencing high demand", None, UNAVAILABLE, False),
        ("API Error: Connection refused (ECONNREFUSED)", None, UNAVAILABLE, False),
        ("API Error: 500 boom", 500, UNAVAILABLE, False),
        ("stream disconnected before completion", None, UNAVAILABLE, False),
        ("unexpected status 404 Not Found", None, "config", True),
        ("something odd", None, "exit", False),
    ],
)
def test_cli_failures_are_classified(
    message: str, status: int | None, cause: str, permanent: bool
) -> None:
    result = classify("tool", message, Usage(), "SOME_KEY", status)
    assert (result.ok, result.cause, result.permanent) == (False, cause, permanent)
    assert ("SOME_KEY" in result.error) == (cause == AUTH)


def test_the_outbox_refuses_what_another_session_queued(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    request = {"build": "b", "phase": "implement", "round": 1, "verb": "done", "text": ""}
    queue(repo_path, {**request, "session": "s-other"})
    queue(repo_path, {**request, "session": "s-mine"})  # fits the session, not a build
    (repo_path / OUTBOX / "0003.json").write_text("{not json")

    said = drain(repo, repo_path, "s-mine")

    assert said[0] == "outbox 0001.json: from session s-other, not s-mine; refused"
    assert said[1].startswith("outbox 0002.json: `done` refused: no build named 'b'")
    assert said[2].startswith("outbox 0003.json: unreadable")
    assert not list((repo_path / OUTBOX).iterdir())
    assert drain(repo, repo_path, "s-mine") == []


def test_claude_is_ended_once_its_answers_spend_the_token_budget(tmp_path: Path) -> None:
    def respond(request: Request) -> Turn:
        return Turn(tool_calls=(claude_shell("true"),), tokens_in=900, tokens_out=100, delay=0.3)

    watch = Watch()
    session = replace(spec(tmp_path), max_tokens=2500)
    with ModelServer(respond) as server:
        runtime = make_runtime("claude", runtime_config(claude_table(server.url)))
        handle, result = runtime.start(session, watch)
        asked = len(server.model_requests())
    said = runtime.end(handle).text

    assert (result.ok, result.cause) == (False, BUDGET), said
    assert "Claude Code was ended before asking the model again" in result.error
    # After two answers a third request (at least 1,000 more) cannot fit: Claude Code is
    # ended, though it may have sent that request already; without the budget it would
    # never stop.
    assert 2 <= asked <= 3, said
    assert len(watch.pids) == 1 and gone(watch.pids[0])
