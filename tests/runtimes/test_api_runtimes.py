"""The ``openai`` and ``anthropic`` runtimes against a scripted model server over real HTTP.

Whole builds of a small repository (plan, plan review, implement with real file edits,
code review, a verify check, the local proposal), and the failures a real provider
produces: rate limits, 5xx with an alternate, a refused key, a stream cut in the middle,
a model that never reports, tool calls that try to leave the worktree, no key, and a
session that runs out of its budget.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pygit2
import pytest
from runner.helpers import configure, events, git, payloads, tip
from support.model_server import ModelServer, Request, ToolCall, Turn

from agentrun.commands.build import create_build, run_build
from agentrun.config import RuntimeConfig
from agentrun.events import Usage
from agentrun.runner.loop import Outcome
from agentrun.runtimes.anthropic import Messages
from agentrun.runtimes.base import (
    ABORTED,
    AUTH,
    TIMEOUT,
    UNAVAILABLE,
    SessionControl,
    SessionSpec,
    make_runtime,
    probe_runtime,
)
from agentrun.runtimes.failures import BadReply, IncompleteStream
from agentrun.runtimes.openai import ChatCompletions
from agentrun.runtimes.wire import Call, StreamFailure, sse
from agentrun.store.log import EventLog

KINDS = ["openai", "anthropic"]
KEY = "MOCK_KEY"
GOAL = "Greet the world"
PLAN = "1. Change the README greeting.\n2. Add greet.txt.\n"
VERIFY = """\
[[verify]]
name = "greeting"
command = "grep -q 'hello, world' README.md && test -f greet.txt"
"""
Responder = Callable[[Request], Turn]


# --- the scripted model -------------------------------------------------------------


def tool_names(request: Request) -> list[str]:
    tools = request.body.get("tools", []) if isinstance(request.body, dict) else []
    return [t.get("name") or t.get("function", {}).get("name", "") for t in tools]


def phase_of(request: Request) -> str:
    """The phase a request belongs to: from its tools, and for reviews from the prompt."""
    names = tool_names(request)
    if "submit_plan" in names:
        return "plan"
    if "done" in names:
        return "implement"
    if "pass" in names:
        return "verify"
    return "plan-review" if "review the plan" in request.text().lower() else "code-review"


def call(name: str, **arguments: Any) -> Turn:
    return Turn(text=f"calling {name}", tool_calls=(ToolCall(name, arguments),))


def builder(request: Request) -> Turn:
    """A model that does the whole build: each phase by its tools, each step by how many
    tool results have come back so far."""
    phase, done = phase_of(request), len(request.tool_results())
    if phase == "plan":
        return [call("list_files"), call("submit_plan", plan=PLAN)][min(done, 1)]
    if phase == "implement":
        steps = [
            call("edit_file", path="README.md", old="hello\n", new="hello, world\n"),
            call("write_file", path="greet.txt", content="hi\n"),
            call("done", summary="greet the world"),
        ]
        return steps[min(done, 2)]
    return call("approve")


def config_for(kind: str, url: str, name: str = "api", **extra: Any) -> str:
    base = url + "/v1" if kind == "openai" else url
    lines = [
        f"[runtimes.{name}]",
        f'kind = "{kind}"',
        f'base_url = "{base}"',
        'model = "mock"',
        f'api_key_env = "{KEY}"',
    ]
    lines += [f"{key} = {value!r}".replace("'", '"') for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def setup_build(
    repo_path: Path,
    runtimes: str,
    roles: str = 'default = ["api"]',
    policy: str = "",
) -> None:
    base = f"[roles]\n{roles}\n\n{runtimes}\n{policy}\n"
    configure(repo_path, extra=VERIFY, base=base)


def build(repo: pygit2.Repository) -> tuple[str, Outcome]:
    created = create_build(repo, GOAL)
    return created.slug, run_build(repo, created.slug)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY, "k-test-123")
    return "k-test-123"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(builder) as running:
        yield running


def phases_of(server: ModelServer) -> list[str]:
    return [phase_of(r) for r in server.model_requests()]


def header(request: Request, name: str) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == name), "")


# --- whole builds ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_whole_build(
    kind: str, repo_path: Path, repo: pygit2.Repository, server: ModelServer, key: str
) -> None:
    setup_build(repo_path, config_for(kind, server.url))
    slug, outcome = build(repo)

    assert (outcome.waiting, outcome.state.state_name) == ("complete", "complete")
    assert phases_of(server) == [
        "plan",
        "plan",
        "plan-review",
        "implement",
        "implement",
        "implement",
        "code-review",
    ]
    started = payloads(repo, slug, "session.started")
    assert [(s.phase, s.runtime, s.model) for s in started] == [
        (phase, "api", "mock") for phase in ("plan", "plan-review", "implement", "code-review")
    ]
    ended = payloads(repo, slug, "session.ended")
    assert [e.outcome for e in ended] == ["ok"] * 4
    # Usage is what the server reported, summed over the session's requests.
    assert [(e.usage.tokens_in, e.usage.tokens_out) for e in ended] == [
        (200, 40),
        (100, 20),
        (300, 60),
        (100, 20),
    ]
    # The tools really worked: the plan, the edits on the build branch, the verify check.
    log = EventLog(repo)
    assert log.text(tip(repo, slug) or "", "plan-r1.md") == PLAN
    assert git(repo_path, "show", f"agentrun/{slug}:README.md") == "hello, world"
    assert git(repo_path, "show", f"agentrun/{slug}:greet.txt") == "hi"
    implement = payloads(repo, slug, "implement.completed")[0]
    assert set(implement.changed_paths) == {"README.md", "greet.txt"}
    assert [v.outcome for v in payloads(repo, slug, "verify.completed")] == ["pass"]
    assert [p.number for p in payloads(repo, slug, "proposal.opened")] == [1]
    assert "proposal.ready" in [e.type for e in events(repo, slug)]
    # The model saw the list of files and the results of its edits.
    first, *rest = server.model_requests()
    assert "README.md" in rest[0].tool_results()[0]
    implement_requests = [r for r in server.model_requests() if phase_of(r) == "implement"]
    assert implement_requests[-1].tool_results() == [
        "edited README.md (1 replacement)",
        "wrote greet.txt (3 bytes)",
    ]
    # The wire: the key in the provider's header, streaming asked for, tools in its shape.
    if kind == "openai":
        assert header(first, "authorization") == f"Bearer {key}"
        assert first.body["stream_options"] == {"include_usage": True}
        assert first.body["messages"][0]["role"] == "system"
        assert first.body["tools"][0]["type"] == "function"
    else:
        assert header(first, "x-api-key") == key
        assert header(first, "anthropic-version") == "2023-06-01"
        assert first.body["max_tokens"] > 0
        assert "input_schema" in first.body["tools"][0]
    assert first.body["stream"] is True
    assert "submit_plan" in tool_names(first) and "done" not in tool_names(first)
    assert "shell" not in tool_names(first)  # the shell is opt-in
    # The transcript is readable: the prompt, the model's calls and the tools' results.
    transcript = log.text(tip(repo, slug) or "", ended[2].transcript or "") or ""
    assert "## user\nYou implement" in transcript
    assert '-> edit_file {"path": "README.md"' in transcript
    assert "<- done recorded" in transcript
    assert key not in transcript


# --- failures -------------------------------------------------------------------------


def fail_first(plan_turn: Turn) -> Responder:
    """The first request answers ``plan_turn`` (a failure); the rest build normally."""
    seen: list[Request] = []

    def respond(request: Request) -> Turn:
        seen.append(request)
        return plan_turn if len(seen) == 1 else builder(request)

    return respond


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limit_is_retried_after_retry_after(
    kind: str, repo_path: Path, repo: pygit2.Repository, server: ModelServer, key: str
) -> None:
    limited = Turn(status=429, headers={"Retry-After": "1"}, error="slow down")
    server.responder = fail_first(limited)
    setup_build(repo_path, config_for(kind, server.url))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    first, second = server.model_requests()[:2]
    assert second.at - first.at >= 0.95  # Retry-After respected
    plan_sessions = [s for s in payloads(repo, slug, "session.started") if s.phase == "plan"]
    assert len(plan_sessions) == 1
    assert payloads(repo, slug, "phase.failed") == []
    ended = payloads(repo, slug, "session.ended")[0]
    transcript = EventLog(repo).text(tip(repo, slug) or "", ended.transcript or "") or ""
    assert "rate-limit: HTTP 429: slow down" in transcript
    assert "retrying in 1.0s (1/3)" in transcript


def test_server_errors_move_to_the_alternate(
    repo_path: Path, repo: pygit2.Repository, key: str
) -> None:
    broken = Turn(status=500, error="internal error")
    with ModelServer(lambda _r: broken) as primary, ModelServer(builder) as alternate:
        runtimes = config_for("anthropic", primary.url, max_retries=1)
        runtimes += config_for("openai", alternate.url, name="api2")
        setup_build(repo_path, runtimes, roles='default = ["api", "api2"]')
        slug, outcome = build(repo)
        retried = [phase_of(r) for r in primary.model_requests()]

    assert outcome.state.state_name == "complete"
    # The primary was retried once per phase before giving up on it.
    assert retried == [p for p in ("plan", "plan-review", "implement", "code-review") for _ in "ab"]
    started = payloads(repo, slug, "session.started")
    plan = [s for s in started if s.phase == "plan"]
    assert [(s.runtime, s.substitution) for s in plan] == [("api", None), ("api2", "api")]
    ended = {e.session: e for e in payloads(repo, slug, "session.ended")}
    failed = ended[plan[0].session]
    assert failed.outcome == "failed"
    assert "HTTP 500: internal error" in (failed.error or "")
    assert "gave up after 2 tries" in (failed.error or "")
    assert ended[plan[1].session].outcome == "ok"
    # An availability failure is not an attempt of the phase.
    assert payloads(repo, slug, "phase.failed") == []


@pytest.mark.parametrize("kind", KINDS)
def test_refused_key_escalates_at_once_naming_the_variable(
    kind: str, repo_path: Path, repo: pygit2.Repository, server: ModelServer, key: str
) -> None:
    server.responder = lambda _r: Turn(status=401, error="invalid x-api-key")
    setup_build(repo_path, config_for(kind, server.url))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "parked"
    assert len(server.model_requests()) == 1  # a refused key is not retried
    failed = payloads(repo, slug, "phase.failed")
    assert [(f.phase, f.permanent, f.will_retry) for f in failed] == [("plan", True, False)]
    escalation = payloads(repo, slug, "escalation.raised")[0]
    assert escalation.cause == "permanent-failure"
    assert KEY in escalation.question
    assert "invalid x-api-key" in escalation.question


@pytest.mark.parametrize(("kind", "cut"), [("openai", 1), ("anthropic", 2)])
def test_stream_cut_in_the_middle_is_retried(
    kind: str,
    cut: int,
    repo_path: Path,
    repo: pygit2.Repository,
    server: ModelServer,
    key: str,
) -> None:
    # Retried, not failed: tools run only once a whole reply has arrived, so the cut
    # reply did nothing and sending the same request again is safe. The cut falls inside
    # the tool call (chat: before finish_reason; anthropic: inside the tool_use block).
    cut_turn = Turn(tool_calls=(ToolCall("list_files", {}),), cut_after=cut)
    server.responder = fail_first(cut_turn)
    setup_build(repo_path, config_for(kind, server.url))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    assert phases_of(server)[:3] == ["plan", "plan", "plan"]  # cut, retried, then submit
    assert server.model_requests()[1].body == server.model_requests()[0].body
    assert len([s for s in payloads(repo, slug, "session.started") if s.phase == "plan"]) == 1
    transcript = EventLog(repo).text(
        tip(repo, slug) or "", payloads(repo, slug, "session.ended")[0].transcript or ""
    )
    assert "stream-cut" in (transcript or "")


def test_a_model_that_never_reports_fails_with_no_terminal(
    repo_path: Path, repo: pygit2.Repository, server: ModelServer, key: str
) -> None:
    server.responder = lambda _r: Turn(text="I have thought about it and all is well.")
    setup_build(repo_path, config_for("openai", server.url))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "parked"
    failed = payloads(repo, slug, "phase.failed")
    assert [(f.phase, f.attempt, f.will_retry) for f in failed] == [
        ("plan", 1, True),
        ("plan", 2, False),
    ]
    assert all(f.error.startswith("no-terminal") for f in failed)
    escalation = payloads(repo, slug, "escalation.raised")[0]
    assert (escalation.source, escalation.cause) == ("policy", "attempts")
    assert "no-terminal" in escalation.question


# At $2,500 a million tokens max_cost_usd = 6.25 buys the same 2,500 (a session is held
# to what the dearer rate buys; input as dear as output spends it as the tokens would).
DEARER = "[prices.mock]\ninput = 2500.0\noutput = 2500.0\n[budget]\nmax_cost_usd = 6.25\n"


@pytest.mark.parametrize(
    ("kind", "budget"),
    [
        ("openai", "[budget]\nmax_tokens = 2500\n"),
        ("anthropic", "[budget]\nmax_tokens = 2500\n"),
        ("openai", DEARER),
    ],
)
def test_a_session_stops_asking_the_model_once_the_token_budget_is_spent(
    repo_path: Path,
    repo: pygit2.Repository,
    server: ModelServer,
    key: str,
    kind: str,
    budget: str,
) -> None:
    # A planner that only ever lists files, 1,000 tokens an answer; one answer is capped
    # at 100, so that the first session's estimate (its prompt and one answer) fits.
    server.responder = lambda _r: replace(call("list_files"), tokens_in=900, tokens_out=100)
    setup_build(repo_path, config_for(kind, server.url, max_output_tokens=100), policy=budget)
    slug, outcome = build(repo)

    assert outcome.state.state_name == "parked"
    # A third request would cost at least what the second did: it is not sent.
    assert len(server.model_requests()) == 2
    (failed,) = payloads(repo, slug, "phase.failed")
    assert failed.phase == "plan"
    assert failed.error == (
        "the session used 2,000 tokens and the build's budget left it 2,500; the next "
        "request would take at least 1,000: stopped before asking the model again"
    )
    (raised,) = payloads(repo, slug, "escalation.raised")
    assert (raised.cause, raised.phase) == ("budget", "plan")
    ended = payloads(repo, slug, "session.ended")[-1]
    assert ended.usage.tokens_in + ended.usage.tokens_out == 2000


@pytest.mark.parametrize("kind", KINDS)
def test_tool_calls_cannot_leave_the_worktree(
    kind: str,
    tmp_path: Path,
    repo_path: Path,
    repo: pygit2.Repository,
    server: ModelServer,
    key: str,
) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("TOP-SECRET-CONTENT\n")
    os.symlink(secret, repo_path / "leak.txt")
    os.symlink(tmp_path, repo_path / "up")
    git(repo_path, "add", "leak.txt", "up")
    git(repo_path, "commit", "-q", "-m", "links out")
    attempts = [
        call("read_file", path="../../etc/passwd"),
        call("read_file", path="leak.txt"),
        call("read_file", path="up/outside.txt"),
        call("write_file", path="up/planted.txt", content="x"),
        call("search", pattern="TOP-SECRET"),
        call("submit_plan", plan=PLAN),
    ]

    def respond(request: Request) -> Turn:
        if phase_of(request) == "plan":
            return attempts[len(request.tool_results())]
        return builder(request)

    server.responder = respond
    setup_build(repo_path, config_for(kind, server.url))
    _, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    results = server.model_requests()[len(attempts) - 1].tool_results()
    assert results[0] == "refused: refused to read outside the worktree: ../../etc/passwd"
    assert results[1] == (
        "refused: refused to read outside the worktree: leak.txt (through a symlink)"
    )
    assert results[2].endswith("up/outside.txt (through a symlink)")
    assert results[3].startswith("refused: refused to write outside the worktree")
    assert results[4] == "no match for 'TOP-SECRET'"
    everything = "\n".join(r.text() for r in server.model_requests())
    assert "TOP-SECRET-CONTENT" not in everything
    assert "root:" not in everything
    assert not (tmp_path / "planted.txt").exists()


def test_missing_key_escalates_naming_the_variable(
    repo_path: Path, repo: pygit2.Repository, server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY, raising=False)
    setup_build(repo_path, config_for("anthropic", server.url))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "parked"
    assert server.model_requests() == []
    escalation = payloads(repo, slug, "escalation.raised")[0]
    assert escalation.cause == "permanent-failure"
    assert f"{KEY} is not set" in escalation.question


def test_session_past_its_budget_ends_with_timeout_promptly(
    repo_path: Path, repo: pygit2.Repository, server: ModelServer, key: str
) -> None:
    server.responder = lambda r: Turn(delay=30, tool_calls=(ToolCall("list_files", {}),))
    policy = "[policy]\nsession_budget_seconds = 1\nmax_phase_attempts = 1\n"
    setup_build(repo_path, config_for("openai", server.url), policy=policy)
    started = time.monotonic()
    slug, outcome = build(repo)
    took = time.monotonic() - started

    assert took < 10, f"the build took {took:.1f}s; the session budget was 1s"
    assert outcome.state.state_name == "parked"
    ended = payloads(repo, slug, "session.ended")
    assert [(e.outcome, e.error) for e in ended] == [
        ("timeout", "the session ran past its budget of 1s")
    ]
    assert payloads(repo, slug, "escalation.raised")[0].cause == "attempts"


# --- the runtime on its own -----------------------------------------------------------


def spec_for(tmp_path: Path, budget: float = 30, resume_from: str | None = None) -> SessionSpec:
    return SessionSpec(
        session="s-test",
        build="no-build",
        phase="implement",
        round=1,
        attempt=1,
        role="implement",
        prompt="Say hello.",
        workdir=tmp_path,
        env={},
        budget_seconds=budget,
        repo_root=tmp_path,
        resume_from=resume_from,
    )


def nobody_listens() -> str:
    """A local URL where nothing listens: a port the kernel gave us, closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def runtime_config(kind: str, url: str, **extra: Any) -> RuntimeConfig:
    base = url + "/v1" if kind == "openai" else url
    data = {"kind": kind, "base_url": base, "model": "mock", "api_key_env": KEY, **extra}
    return RuntimeConfig.model_validate(data)


@pytest.mark.parametrize("kind", KINDS)
def test_missing_key_is_an_auth_failure(
    kind: str, tmp_path: Path, server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY, raising=False)
    runtime = make_runtime("api", runtime_config(kind, server.url))
    _, turn = runtime.start(spec_for(tmp_path), SessionControl())
    assert (turn.ok, turn.cause, turn.permanent) == (False, AUTH, True)
    assert turn.error.startswith(f"{KEY} is not set")
    probe = probe_runtime(runtime_config(kind, server.url), {})
    assert (probe.ok, probe.detail) == (False, f"{KEY} is not set")


def test_openai_needs_a_model() -> None:
    from agentrun.errors import RuntimeSetupError

    with pytest.raises(RuntimeSetupError, match="needs a model"):
        make_runtime("api", RuntimeConfig(kind="openai"))
    runtime = make_runtime("api", RuntimeConfig(kind="anthropic"))
    assert getattr(runtime, "model", "").startswith("claude-")


@pytest.mark.parametrize("kind", KINDS)
def test_probe_asks_the_endpoint(kind: str, server: ModelServer) -> None:
    probe = probe_runtime(runtime_config(kind, server.url), {KEY: "k"})
    assert probe.ok, probe.detail
    assert [r.path for r in server.requests] == ["/v1/models"]
    probe = probe_runtime(runtime_config(kind, nobody_listens()), {KEY: "k"})
    assert not probe.ok
    assert "does not answer" in probe.detail


def test_a_local_server_needs_no_key(tmp_path: Path, server: ModelServer) -> None:
    server.responder = lambda _r: Turn(text="hello")
    config = RuntimeConfig(kind="openai", base_url=server.url + "/v1", model="m", api_key_env="")
    _, turn = make_runtime("local", config).start(spec_for(tmp_path), SessionControl())
    assert (turn.ok, turn.text, turn.usage) == (True, "hello", Usage(tokens_in=100, tokens_out=20))
    assert header(server.model_requests()[0], "authorization") == ""


@pytest.mark.parametrize("kind", KINDS)
def test_cancel_ends_a_waiting_request_at_once(
    kind: str, tmp_path: Path, server: ModelServer, key: str
) -> None:
    server.responder = lambda _r: Turn(text="late", delay=300)
    control = SessionControl()
    threading.Timer(0.3, control.cancel.set).start()
    started = time.monotonic()
    _, turn = make_runtime("api", runtime_config(kind, server.url)).start(
        spec_for(tmp_path), control
    )
    assert (turn.ok, turn.cause) == (False, ABORTED)
    assert time.monotonic() - started < 120  # not the answer's 300 s


def test_budget_ends_a_silent_request(tmp_path: Path, server: ModelServer, key: str) -> None:
    server.responder = lambda _r: Turn(text="late", delay=300)
    started = time.monotonic()
    runtime = make_runtime("api", runtime_config("anthropic", server.url))
    _, turn = runtime.start(spec_for(tmp_path, budget=0.5), SessionControl())
    assert (turn.ok, turn.cause) == (False, TIMEOUT)
    assert time.monotonic() - started < 120  # not the answer's 300 s


def test_connection_refused_is_unavailable(tmp_path: Path, key: str) -> None:
    runtime = make_runtime("api", runtime_config("openai", nobody_listens(), max_retries=0))
    _, turn = runtime.start(spec_for(tmp_path), SessionControl())
    assert (turn.ok, turn.cause, turn.permanent) == (False, UNAVAILABLE, False)
    assert turn.error.startswith("connect:")


@pytest.mark.parametrize("kind", KINDS)
def test_resume_continues_the_conversation(
    kind: str, tmp_path: Path, server: ModelServer, key: str
) -> None:
    server.responder = lambda r: Turn(text=f"answer {len(server.model_requests())}")
    runtime = make_runtime("api", runtime_config(kind, server.url))
    handle, first = runtime.start(spec_for(tmp_path), SessionControl())
    second = runtime.resume(handle, "And now the feedback.", SessionControl())
    assert (first.text, second.text) == ("answer 1", "answer 2")
    texts = server.model_requests()[1].texts()
    assert texts[-3:] == ["Say hello.", "answer 1", "And now the feedback."]
    transcript = runtime.end(handle)
    assert transcript.runtime_session_id and transcript.runtime_session_id.startswith(kind)
    # A later session of the same producer, in this process, continues that conversation.
    again, third = runtime.start(
        spec_for(tmp_path, resume_from=transcript.runtime_session_id), SessionControl()
    )
    assert third.text == "answer 3"
    assert server.model_requests()[2].texts()[-4:] == [
        "answer 1",
        "And now the feedback.",
        "answer 2",
        "Say hello.",
    ]
    assert "[continuing conversation" in runtime.end(again).text


@pytest.mark.parametrize("kind", KINDS)
def test_tool_results_and_errors_go_back_on_the_wire(
    kind: str, tmp_path: Path, server: ModelServer, key: str
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    turns = iter(
        [
            Turn(
                tool_calls=(
                    ToolCall("read_file", {"path": "a.txt"}),
                    ToolCall("read_file", {"path": "missing.txt"}),
                )
            ),
            Turn(text="finished"),
        ]
    )
    server.responder = lambda _r: next(turns)
    _, turn = make_runtime("api", runtime_config(kind, server.url)).start(
        spec_for(tmp_path), SessionControl()
    )
    assert (turn.ok, turn.text, turn.usage.tokens_in) == (True, "finished", 200)
    second = server.model_requests()[1]
    assert second.tool_results() == ["alpha\n", "no such file: missing.txt"]
    if kind == "anthropic":
        blocks = second.body["messages"][-1]["content"]
        assert [b["is_error"] for b in blocks] == [False, True]
    else:
        ids = [m["tool_call_id"] for m in second.body["messages"] if m["role"] == "tool"]
        assert ids == [c["id"] for c in second.body["messages"][-3]["tool_calls"]]


# --- reading the streams: shapes real providers send that the scripted server does not ----


def test_sse_lines() -> None:
    lines = [": ping", "event: a", "data: {", 'data: "x": 1}', "", "id: 7", "data: two", ""]
    assert list(sse(lines)) == [("a", '{\n"x": 1}'), ("", "two")]


def test_chat_stream_with_arguments_in_pieces_and_usage_last() -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let "}}]},
        {"choices": [{"index": 0, "delta": {"content": "me see."}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "function": {"name": "read_file", "arguments": ""},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]},
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a"}'}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5}},
    ]
    events = [("", json.dumps(c)) for c in chunks] + [("", "[DONE]")]
    reply = ChatCompletions().read(iter(events))
    assert reply.text == "Let me see."
    assert reply.calls == [Call("c1", "read_file", '{"path": "a"}')]
    assert reply.usage == Usage(tokens_in=12, tokens_out=5)
    with pytest.raises(IncompleteStream):
        ChatCompletions().read(iter(events[:3]))
    error = [("", json.dumps({"error": {"message": "overloaded", "code": 503}}))]
    with pytest.raises(StreamFailure) as failed:
        ChatCompletions().read(iter(error))
    assert failed.value.status == 503


def test_messages_stream_usage_and_an_error_mid_stream() -> None:
    start = {
        "type": "message_start",
        "message": {
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}
        },
    }
    tool = {"type": "tool_use", "id": "t1", "name": "done", "input": {}}
    events = [
        ("message_start", start),
        ("ping", {"type": "ping"}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": tool}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"summary"'},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": ': "ok"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 33},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    raw = [(name, json.dumps(data)) for name, data in events]
    reply = Messages().read(iter(raw))
    assert reply.calls == [Call("t1", "done", '{"summary": "ok"}')]
    usage = Usage(tokens_in=10, tokens_out=33, cache_read=90)  # the cache's own field
    assert (reply.usage, reply.stop) == (usage, "tool_use")
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(StreamFailure) as failed:
        Messages().read(iter([raw[0], ("error", json.dumps(overloaded))]))
    assert failed.value.status == 529
    with pytest.raises(IncompleteStream):
        Messages().read(iter(raw[:-1]))
    with pytest.raises(BadReply):
        Messages().read(iter([("message_start", "{not json")]))


def test_the_shell_is_opt_in_and_never_sees_the_key(
    tmp_path: Path, server: ModelServer, key: str
) -> None:
    turns = iter(
        [
            Turn(tool_calls=(ToolCall("shell", {"command": "pwd; echo ${MOCK_KEY:-no key}"}),)),
            Turn(text="ran it"),
        ]
    )
    server.responder = lambda _r: next(turns)
    spec = spec_for(tmp_path)
    spec = dataclasses.replace(spec, env={"PATH": os.environ["PATH"], KEY: key})
    runtime = make_runtime("api", runtime_config("openai", server.url, shell=True))
    _, turn = runtime.start(spec, SessionControl())
    assert turn.ok
    assert "shell" in tool_names(server.model_requests()[0])
    assert server.model_requests()[1].tool_results() == [f"exit status 0\n{tmp_path}\nno key\n"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_proposes_a_fact_and_goes_on(
    kind: str, repo_path: Path, repo: pygit2.Repository, server: ModelServer, key: str
) -> None:
    """``remember`` is a tool of every phase, as it is a verb of every phase: the fact is
    proposed (a person accepts it), the session goes on, and bad arguments are refused."""

    implement = [
        call("remember", text=""),  # refused: a fact needs its text
        call("remember", text="greet.txt holds the greeting", paths=["greet.txt"]),
        call("edit_file", path="README.md", old="hello\n", new="hello, world\n"),
        call("write_file", path="greet.txt", content="hi\n"),
        call("done", summary="greet the world"),
    ]

    def respond(request: Request) -> Turn:
        if phase_of(request) == "implement":
            return implement[min(len(request.tool_results()), len(implement) - 1)]
        return builder(request)

    server.responder = respond
    setup_build(repo_path, config_for(kind, server.url))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    assert "remember" in tool_names(server.model_requests()[0])
    said = [r.tool_results() for r in server.model_requests() if phase_of(r) == "implement"]
    assert said[1] == ["refused: the fact is empty: say what later builds should know"]
    assert said[2][-1].startswith("fact m-1 proposed; a person accepts it with")
    listed = subprocess.run(
        [sys.executable, "-m", "agentrun", "memory", "list", "--json"],
        cwd=repo_path,
        capture_output=True,
        text=True,
        check=True,
    )
    facts = json.loads(listed.stdout)["facts"]
    proposed = [(f["text"], f["paths"]) for f in facts if f["state"] == "proposed"]
    assert proposed == [("greet.txt holds the greeting", ["greet.txt"])]
    assert slug in json.dumps(facts)
