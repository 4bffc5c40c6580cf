"""Runtime overhead per agent session, as a ratio to the model server's own response time.

    .venv/bin/python bench/runtimes.py [--quick]

Each runtime runs whole builds (plan, plan review, implement, code review, a verify
check) against the tests' scripted ``ModelServer``, whose every answer waits a fixed
``DELAY``. Per agent session: ``start`` = the first model request of the session
reaching the server - the ``session.started`` event's ``ts``; ``end`` = the
``session.ended`` event's ``ts`` - the moment the server finished sending the session's
last response. ``ts`` is ``datetime.now(UTC)`` with microseconds, taken when the append
begins, and sessions run one at a time, so requests are attributed to a session by the
time window between its two events. ``server`` = the median time from a request
arriving to its response being sent: the delay, the responder and the send.
Baselines: ``script`` (a ``curl`` to the server in each step) and ``command`` (a tiny
Python agent: one request, its report, one more request). A CLI whose binary is missing
(``scripts/check`` installs them) is skipped. ``--quick``: one openai build.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2
from _common import IDENTITY

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support.model_server import ModelServer, Request, ToolCall, Turn  # noqa: E402

from agentrun.commands.build import create_build, run_build  # noqa: E402
from agentrun.events import SessionEnded, SessionStarted  # noqa: E402
from agentrun.store.log import EventLog  # noqa: E402

DELAY = 0.05
KINDS = ("script", "command", "openai", "anthropic", "claude", "codex", "aider")
BIN = ROOT / "tests" / "clients" / "node_modules" / ".bin"
BINARIES = {
    "claude": BIN / "claude",
    "codex": BIN / "codex",
    "aider": ROOT / ".venv-aider/bin/aider",
}
GOAL = "Add hello.txt"
PLAN = "1. Add hello.txt that says hello."
VERB = "git agentrun agent "
PLAN_FILE = ".agentrun/run/plan.md"
VERIFY = '[[verify]]\nname = "hello"\ncommand = "test -f hello.txt"\n'
Responder = Callable[[Request], Turn]

# --- scripted models (small copies of tests/runtimes/test_{api,cli}_runtimes.py) ------


def call(name: str, **arguments: Any) -> Turn:
    return Turn(text=f"calling {name}", tool_calls=(ToolCall(name, arguments),))


def api_model(request: Request) -> Turn:
    """The openai/anthropic runtimes: each phase told apart by the tools it offers."""
    tools = request.body.get("tools", []) if isinstance(request.body, dict) else []
    names = {t.get("name") or t.get("function", {}).get("name", "") for t in tools}
    done = len(request.tool_results())
    if "submit_plan" in names:
        return [call("list_files"), call("submit_plan", plan=PLAN)][min(done, 1)]
    if "done" in names:
        write = call("write_file", path="hello.txt", content="hello\n")
        return [write, call("done", summary="hi")][min(done, 1)]
    return call("approve")


def latest_prompt(request: Request) -> tuple[int, str]:
    """The newest phase prompt in the conversation, and where it is."""
    body = request.body if isinstance(request.body, dict) else {}
    conversation = list(body.get("messages") or body.get("input") or [])
    for index in range(len(conversation) - 1, -1, -1):
        item = conversation[index]
        if isinstance(item, dict) and item.get("role") == "user":
            text = json.dumps(item.get("content"))
            if "agentrun build" in text and "tool_result" not in text:
                return index, text
    return -1, ""


def cli_model(kind: str) -> Responder:
    """Claude Code / Codex: one tool call per request, then "Finished."."""
    approve = [shell(kind, VERB + "approve")]
    script = {
        "You are the planner": [
            write(kind, PLAN_FILE, PLAN + "\n"),
            shell(kind, VERB + "plan " + PLAN_FILE),
        ],
        "You review the plan": approve,
        "You implement": [
            write(kind, "hello.txt", "hello\n"),
            shell(kind, VERB + "done --summary hi"),
        ],
        "You review the code": approve,
    }

    def respond(request: Request) -> Turn:
        index, prompt = latest_prompt(request)
        steps = next((s for marker, s in script.items() if marker in prompt), [])
        body = request.body if isinstance(request.body, dict) else {}
        later = (body.get("messages") or body.get("input") or [])[index + 1 :]
        taken = sum(
            1
            for item in later
            if "tool_result" in (s := json.dumps(item)) or "function_call_output" in s
        )
        if index >= 0 and taken < len(steps):
            return Turn(text=f"step {taken + 1}", tool_calls=(steps[taken],))
        return Turn(text="Finished.", tokens_out=5)

    return respond


def shell(kind: str, command: str) -> ToolCall:
    if kind == "claude":
        return ToolCall("Bash", {"command": command, "description": "run it"})
    return ToolCall("exec_command", {"cmd": command})


def write(kind: str, path: str, content: str) -> ToolCall:
    if kind == "claude":  # its own Write tool: the worktree lies outside any .git folder
        return ToolCall("Write", {"file_path": path, "content": content})
    script = f"import pathlib; pathlib.Path({path!r}).write_text({content!r})"
    return shell(kind, f"python3 -c {shlex.quote(script)}")


AIDER_REPLIES = {
    "You are the planner": f"```agentrun\nplan\n{PLAN}\n```\n",
    "You implement": "hello.txt\n```\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n```\n\n"
    '```agentrun\ndone --summary "hi"\n```\n',
}


def aider_model(request: Request) -> Turn:
    prompt = request.text()
    marker = next((m for m in AIDER_REPLIES if m in prompt), "")
    return Turn(text=AIDER_REPLIES.get(marker, "```agentrun\napprove\n```\n"), tokens_out=20)


COMMAND_AGENT = f"""\
import json, os, subprocess, sys, urllib.request
from pathlib import Path
def ask(text):
    body = json.dumps({{"model": "mock", "messages": [{{"role": "user", "content": text}}]}})
    head = {{"Content-Type": "application/json"}}
    url = os.environ["BENCH_URL"] + "/v1/chat/completions"
    urllib.request.urlopen(urllib.request.Request(url, body.encode(), head)).read()
ask(sys.stdin.read())
family = os.environ["AGENTRUN_PHASE"].split("@")[0]
args = ["approve"]
if family == "plan":
    Path({PLAN_FILE!r}).parent.mkdir(parents=True, exist_ok=True)
    Path({PLAN_FILE!r}).write_text({PLAN!r})
    args = ["plan", {PLAN_FILE!r}]
elif family == "implement":
    Path("hello.txt").write_text("hello\\n")
    args = ["done", "--summary", "hi"]
subprocess.run(["git", "agentrun", "agent", *args], check=True)
ask("reported")
"""

# --- runtime tables ---------------------------------------------------------------------


def table(kind: str, url: str, tmp: Path) -> tuple[dict[str, Any], Responder, str]:
    """The runtime's config table, its scripted model, and the agent script's steps."""
    values: dict[str, Any]
    if kind in ("openai", "anthropic"):
        base = url + "/v1" if kind == "openai" else url
        values = {"kind": kind, "base_url": base, "model": "mock", "api_key_env": "MOCK_KEY"}
        return values, api_model, ""
    if kind == "script":
        data = '{"model":"mock","messages":[{"role":"user","content":"hi"}]}'
        run = f"curl -sf -o /dev/null -H 'Content-Type: application/json' -d '{data}' "
        run += f"{url}/v1/chat/completions"
        steps = "".join(
            f"[[step]]\nphase = {json.dumps(p)}\nrun = {json.dumps(run)}\n"
            + ('write = { "hello.txt" = "hello\\n" }\n' if p == "implement" else "")
            for p in ("plan", "plan-review", "implement", "code-review")
        )
        return {"kind": "script", "script": "agent-script.toml"}, lambda _r: Turn(text="ok"), steps
    if kind == "command":
        (tmp / "agent.py").write_text(COMMAND_AGENT)
        values = {"kind": "command", "command": [sys.executable, str(tmp / "agent.py")]}
        return {**values, "env": {"BENCH_URL": url}}, lambda _r: Turn(text="ok"), ""
    if kind == "claude":
        env = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "test-key"}
        env |= {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
        values = {"kind": kind, "binary": str(BINARIES[kind]), "env": env}
        return values, cli_model("claude"), ""
    if kind == "codex":
        provider = (
            f'model_providers.mock={{name="mock", base_url="{url}/v1", wire_api="responses", '
            'env_key="MOCK_API_KEY", supports_websockets=false, request_max_retries=0, '
            "stream_max_retries=0}"
        )
        (tmp / "codex-home").mkdir(exist_ok=True)
        extra = ["-c", "model_provider=mock", "-c", provider]
        for key_ in ("exclude_slash_tmp", "exclude_tmpdir_env_var"):  # .git stays read-only
            extra += ["-c", f"sandbox_workspace_write.{key_}=true"]
        values = {"kind": kind, "binary": str(BINARIES[kind]), "model": "gpt-5.5"}
        env = {"CODEX_HOME": str(tmp / "codex-home"), "MOCK_API_KEY": "test-key"}
        values |= {"api_key_env": "MOCK_API_KEY", "extra_args": extra, "env": env}
        return values, cli_model("codex"), ""
    env = {"OPENAI_API_BASE": f"{url}/v1", "OPENAI_API_KEY": "test-key"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    values = {"kind": "aider", "binary": str(BINARIES[kind]), "model": "openai/mock", "env": env}
    return values, aider_model, ""


def toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return json.dumps(value)


# --- one build, timed -------------------------------------------------------------------


def timed_server() -> tuple[ModelServer, list[Responder], dict[int, float]]:
    """A ModelServer answering ``box[0]`` after ``DELAY``, noting when each answer was sent."""
    box: list[Responder] = [lambda _r: Turn(text="ok")]
    sent: dict[int, float] = {}  # id(request) -> time.time() once its response was written
    current = threading.local()  # ThreadingHTTPServer: one handler thread per connection

    def respond(request: Request) -> Turn:
        current.request = request
        return dataclasses.replace(box[0](request), delay=DELAY)

    server = ModelServer(respond)
    handler: Any = server._httpd.RequestHandlerClass  # the server's own, wrapped not changed

    class Timed(handler):  # type: ignore[misc]
        def do_POST(self) -> None:
            current.request = None
            super().do_POST()  # the handler's writes are unbuffered: sent once this returns
            if current.request is not None:
                sent[id(current.request)] = time.time()

    server._httpd.RequestHandlerClass = Timed
    return server, box, sent


Sample = tuple[list[float], list[float], list[float], str]


def one_build(kind: str, root: Path) -> Sample:
    """Start and end overheads per session, server times per request (s), final state."""
    tmp = root / kind
    repo_path = tmp / "repo"
    repo_path.mkdir(parents=True)
    (repo_path / "README.md").write_text("hello\n")
    server, box, sent = timed_server()
    values, box[0], steps = table(kind, server.url, tmp)
    (repo_path / "agent-script.toml").write_text(steps)
    config = f'roles.default = ["{kind}"]\n[runtimes.{kind}]\n'
    config += "".join(f"{k} = {toml(v)}\n" for k, v in values.items()) + VERIFY
    (repo_path / ".agentrun.toml").write_text(config)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=repo_path, check=True, capture_output=True)
    repo = pygit2.Repository(str(repo_path))
    with server:
        slug = create_build(repo, GOAL).slug
        outcome = run_build(repo, slug)
    requests = server.model_requests()
    events = [s.event for s in EventLog(repo).read(slug)]
    starts = {
        e.payload.session: e.ts.timestamp() for e in events if isinstance(e.payload, SessionStarted)
    }
    begins: list[float] = []
    ends: list[float] = []
    for event in events:
        if isinstance(event.payload, SessionEnded) and event.payload.session in starts:
            t0, t1 = starts[event.payload.session], event.ts.timestamp()
            inside = [r for r in requests if t0 <= r.at <= t1 and id(r) in sent]
            if inside:
                begins.append(inside[0].at - t0)
                ends.append(t1 - max(sent[id(r)] for r in inside))
    served = [sent[id(r)] - r.at for r in requests if id(r) in sent]
    return begins, ends, served, outcome.state.state_name


def isolate(home: Path) -> None:
    """A temporary HOME (the CLIs write their settings there) and a pinned git identity."""
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n")
    os.environ.update(IDENTITY, HOME=str(home), MOCK_KEY="k-bench")
    pygit2.settings.search_path[pygit2.enums.ConfigLevel.GLOBAL] = str(home)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one openai build (smoke test)")
    args = parser.parse_args()
    kinds = ["openai"] if args.quick else list(KINDS)
    builds = 1 if args.quick else 3
    rows: list[tuple[str, float, float, float, int]] = []
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-runtimes-") as tmp:
        root = Path(tmp)
        isolate(root / "home")
        for kind in kinds:
            binary = BINARIES.get(kind)
            if (binary and not binary.exists()) or (kind == "script" and not shutil.which("curl")):
                print(f"{kind}: skipped ({binary or 'curl'} not found)", flush=True)
                continue
            begins: list[float] = []
            ends: list[float] = []
            served: list[float] = []
            t0 = time.perf_counter()
            for n in range(builds):
                b, e, s, state = one_build(kind, root / f"b{n}")
                if state != "complete":
                    print(f"{kind}: build {n + 1} ended {state}, not complete", flush=True)
                begins, ends, served = begins + b, ends + e, served + s
            print(
                f"({kind}: {builds} build(s), {len(begins)} sessions, {len(served)} requests "
                f"in {time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
            if begins:
                med = statistics.median
                rows.append((kind, med(begins), med(ends), med(served), len(begins)))

    print()
    print(f"runtimes: median ms per session (server delay {DELAY * 1000:.0f} ms per answer)")
    header = ("runtime", "sessions", "start", "end", "server", "start/srv", "end/srv")
    print("{:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}".format(*header))
    for kind, start, end, server, count in rows:
        print(
            f"{kind:>10} {count:>8} {start * 1e3:>8.0f} {end * 1e3:>8.0f} {server * 1e3:>8.1f} "
            f"{start / server:>9.2f} {end / server:>8.2f}"
        )
    ratios = [(k, s / v, e / v) for k, s, e, v, _ in rows]
    print("ratio start-overhead/server: " + ", ".join(f"{k} {s:.2f}" for k, s, _ in ratios))
    print("ratio end-overhead/server: " + ", ".join(f"{k} {e:.2f}" for k, _, e in ratios))


if __name__ == "__main__":
    main()
