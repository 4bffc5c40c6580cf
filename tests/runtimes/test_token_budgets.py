"""Token budgets hold from the first session, measured against the scripted model server.

Each runtime that reports usage while it runs is ended once what the build left it
cannot hold the next request (which costs at least what the last one did): the API
runtimes between requests, Claude Code from its stream, Codex from its rollout file. The
model answers 1,000 tokens a response (900 in, 100 out) and never reports; the overshoot
is what the server served past the session's budget, each request counted whole even if
it was cut, and it must stay within one response (a CLI's request already on its way).

Before a role's first session, the prompt and one response at the runtime's output cap
(``max_output_tokens``) must fit: a build that cannot afford them parks on the budget
question without a request to the model.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pygit2
import pytest
import runtimes.test_api_runtimes as api
import runtimes.test_cli_runtimes as cli
from runner.helpers import configure, events, payloads
from support.model_server import ModelServer, Request, ToolCall, Turn

from agentrun import procs
from agentrun.commands.build import create_build, run_build
from agentrun.config import RuntimeConfig
from agentrun.runtimes.base import BUDGET, SessionSpec, make_runtime

RESPONSE = 1_000  # the tokens of one scripted answer
BUDGET_TOKENS = 2_500
KINDS = ("anthropic", "openai", "claude", "codex")
SHELL = {
    "anthropic": ToolCall("list_files", {}),
    "openai": ToolCall("list_files", {}),
    "claude": cli.claude_shell("true"),
    "codex": cli.codex_shell("true"),
}


def lister(kind: str, delay: float = 0.0) -> Any:
    """A model that only ever runs one harmless tool, 1,000 tokens an answer."""

    def respond(_request: Request) -> Turn:
        return Turn(tool_calls=(SHELL[kind],), tokens_in=900, tokens_out=100, delay=delay)

    return respond


def config_of(kind: str, url: str, tmp_path: Path) -> RuntimeConfig:
    if kind in ("anthropic", "openai"):
        return api.runtime_config(kind, url)
    return cli.runtime_config(cli.table_for(kind, url, tmp_path))


def session(kind: str, tmp_path: Path) -> SessionSpec:
    if kind in ("anthropic", "openai"):
        return replace(api.spec_for(tmp_path), max_tokens=BUDGET_TOKENS)
    return replace(cli.spec(tmp_path), max_tokens=BUDGET_TOKENS)


@pytest.fixture
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(api.KEY, "k-test-123")


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    """Whatever a CLI left running is ended at teardown."""
    yield
    for child in psutil.Process().children(recursive=True):
        procs.end_tree(child.pid, grace=1.0)


@pytest.fixture(autouse=True, scope="module")
def _codex_homes() -> Iterator[None]:
    yield
    shutil.rmtree(cli.CODEX_HOMES, ignore_errors=True)


@pytest.mark.usefixtures("_key")
@pytest.mark.parametrize("kind", KINDS)
def test_a_session_overshoots_its_token_budget_by_at_most_one_response(
    kind: str, tmp_path: Path
) -> None:
    with ModelServer(lister(kind)) as server:
        runtime = make_runtime(kind, config_of(kind, server.url, tmp_path))
        handle, result = runtime.start(session(kind, tmp_path), cli.Watch())
        served = len(server.model_requests()) * RESPONSE
    said = runtime.end(handle).text

    assert (result.ok, result.cause) == (False, BUDGET), said
    assert "the next request would take at least" in result.error
    booked = result.usage.tokens_in + result.usage.tokens_out
    overshoot = served - BUDGET_TOKENS
    print(f"{kind}: served {served:,}, booked {booked:,}, overshoot {overshoot:,}")
    # Without the cut-off the model would be asked until the wall clock ran out.
    assert served >= 2 * RESPONSE, said
    assert overshoot <= RESPONSE, said  # at most the request already on its way
    assert booked <= served


@pytest.mark.usefixtures("_key")
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_the_api_runtimes_send_the_output_cap(kind: str, tmp_path: Path) -> None:
    with ModelServer(lambda _r: Turn(text="nothing to do")) as server:
        config = config_of(kind, server.url, tmp_path).model_copy(update={"max_output_tokens": 321})
        runtime = make_runtime(kind, config)
        handle, _ = runtime.start(api.spec_for(tmp_path), cli.Watch())
        runtime.end(handle)
        (request,) = server.model_requests()
    assert isinstance(request.body, dict) and request.body["max_tokens"] == 321


def test_openai_itself_gets_the_cap_by_its_own_name() -> None:
    from agentrun.runtimes.openai import ChatCompletions

    wire = ChatCompletions()
    assert wire.cap_field(None) == "max_completion_tokens"
    assert wire.cap_field("https://api.openai.com/v1/") == "max_completion_tokens"
    assert wire.cap_field("http://127.0.0.1:11434/v1") == "max_tokens"


def test_the_output_cap_defaults_per_runtime() -> None:
    def cap(kind: str, **more: Any) -> int:
        extra = {"script": "s.toml"} if kind == "script" else {}
        extra |= {"command": ["agent"]} if kind == "command" else {}
        return RuntimeConfig.model_validate({"kind": kind, **extra, **more}).output_cap

    assert [cap(k) for k in ("anthropic", "openai", "claude", "codex", "aider")] == [
        8192,
        16384,
        32000,
        32000,
        8192,
    ]
    assert cap("script") == cap("command") == 0
    assert cap("codex", max_output_tokens=500) == 500


# --- whole builds ----------------------------------------------------------------------


def api_build(
    repo_path: Path, repo: pygit2.Repository, url: str, budget: str, **runtime: Any
) -> tuple[str, Any]:
    api.setup_build(repo_path, api.config_for("anthropic", url, **runtime), policy=budget)
    slug = create_build(repo, api.GOAL).slug
    return slug, run_build(repo, slug)


@pytest.mark.usefixtures("_key")
def test_a_first_session_that_cannot_fit_is_never_started(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    # The original case: max_tokens = 400 and a planner the budget cannot pay for. It
    # used to run, and the build stopped at 441 tokens.
    with ModelServer(lister("anthropic")) as server:
        slug, outcome = api_build(repo_path, repo, server.url, "[budget]\nmax_tokens = 400\n")
        asked = server.model_requests()

    assert outcome.state.state_name == "parked"
    assert asked == []  # not one request: the build parked before the session
    assert outcome.state.usage.tokens == 0
    kinds = [e.type for e in events(repo, slug)]
    assert "session.started" not in kinds and "phase.started" not in kinds
    (raised,) = payloads(repo, slug, "escalation.raised")
    assert (raised.source, raised.cause, raised.phase) == ("policy", "budget", "plan")
    assert raised.question.startswith(
        "The build stopped at its budget: it has used 0 tokens of its max_tokens budget of "
        "400; the next plan session is estimated at "
    )
    assert "and one response of 8,192)" in raised.question


@pytest.mark.usefixtures("_key")
def test_a_first_session_that_fits_runs_and_is_cut_at_the_budget(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    with ModelServer(lister("anthropic")) as server:
        slug, outcome = api_build(
            repo_path,
            repo,
            server.url,
            f"[budget]\nmax_tokens = {BUDGET_TOKENS}\n",
            max_output_tokens=100,
        )
        asked = server.model_requests()

    assert outcome.state.state_name == "parked"
    assert all(r.body["max_tokens"] == 100 for r in asked)
    served = len(asked) * RESPONSE
    assert 0 < served <= BUDGET_TOKENS + RESPONSE
    assert outcome.state.usage.tokens == served
    (raised,) = payloads(repo, slug, "escalation.raised")
    assert (raised.cause, raised.phase) == ("budget", "plan")


def test_a_scripted_first_session_is_estimated_at_its_prompt(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    # The scripted agent has no output cap; its prompt alone (some thousand bytes) does
    # not fit 10 tokens.
    configure(repo_path, [{"phase": "plan"}], extra="[budget]\nmax_tokens = 10\n")
    slug = create_build(repo, "Add a thing").slug
    outcome = run_build(repo, slug)

    assert outcome.state.state_name == "parked"
    assert payloads(repo, slug, "session.started") == []
    (raised,) = payloads(repo, slug, "escalation.raised")
    assert "its prompt (about" in raised.question
    assert "and one response of 0)" in raised.question
