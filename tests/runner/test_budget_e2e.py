"""Budgets and usage, end to end: whole builds in real repositories with the scripted agent.

The scripted agent reports per-step usage; the runner prices it with the model's price
(``gpt-5`` from the default table, ``my-model`` from ``[prices]`` or not at all). A build
that crosses a budget parks on a policy escalation before its next session; its spend
shows in ``status``, ``show``, ``log`` and the local proposal's status comment.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pygit2
import pytest
from click.testing import CliRunner, Result
from runner.helpers import SCRIPT, SCRIPTED, configure, events, git, payloads

from agentrun.cli.main import cli
from agentrun.commands.build import create_build, resume_build, run_build
from agentrun.commands.control import answer
from agentrun.commands.inspect import transcript
from agentrun.events import Event, SessionStarted
from agentrun.forge.local import LocalForge
from agentrun.kernel.state import BuildState
from agentrun.runner.loop import Outcome

GOAL = "Add the app module"
SLUG = "add-the-app-module"
PLAN = "1. Add src/app.py.\n"
APP = {"src/app.py": "VALUE = 1\n"}


def runtime(model: str) -> str:
    """The scripted agent for every role, on ``model``."""
    return f'{SCRIPTED}model = "{model}"\n'


PRICED = runtime("gpt-5")  # $1.25 in, $10 out per million tokens (the default table)


def used(tokens_in: int, tokens_out: int = 0) -> dict[str, int]:
    return {"tokens_in": tokens_in, "tokens_out": tokens_out}


# At gpt-5's price: plan $0.001, plan-review $0.001, implement $0.0105, code-review $0.001.
STEPS: list[dict[str, Any]] = [
    {"phase": "plan", "verb": "plan", "text": PLAN, "usage": used(800)},
    {"phase": "plan-review", "usage": used(800)},
    {"phase": "implement", "write": APP, "text": "add the app", "usage": used(400, 1000)},
    {"phase": "code-review", "usage": used(800)},
]


def build(repo: pygit2.Repository) -> tuple[str, Outcome]:
    slug = create_build(repo, GOAL).slug
    return slug, run_build(repo, slug)


def budget_escalation(repo: pygit2.Repository, slug: str) -> Any:
    (esc,) = payloads(repo, slug, "escalation.raised")
    assert (esc.source, esc.cause) == ("policy", "budget")
    return esc


def started(log: list[Event]) -> list[SessionStarted]:
    return [e.payload for e in log if isinstance(e.payload, SessionStarted)]


def nothing_started_after_the_last_session(log: list[Event]) -> None:
    kinds = [e.type for e in log]
    last_end = max(i for i, kind in enumerate(kinds) if kind == "session.ended")
    assert "session.started" not in kinds[last_end:]
    assert kinds[-1] == "escalation.raised"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# --- max_cost_usd -----------------------------------------------------------------------------


def test_crossing_max_cost_parks_before_the_next_session(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, STEPS, extra="[budget]\nmax_cost_usd = 0.01\n", base=PRICED)
    slug, outcome = build(repo)

    assert (outcome.waiting, outcome.state.state_name) == ("parked", "parked")
    log = events(repo, slug)
    # implement@1 took the spend to $0.0125: code-review@1 is not started.
    assert [(s.phase, s.round) for s in started(log)] == [
        ("plan", 1),
        ("plan-review", 1),
        ("implement", 1),
    ]
    nothing_started_after_the_last_session(log)
    costs = [p.usage.cost_usd for p in payloads(repo, slug, "session.ended")]
    assert costs == pytest.approx([0.001, 0.001, 0.0105])
    esc = budget_escalation(repo, slug)
    assert (esc.phase, esc.round) == ("code-review", 1)
    assert esc.question.startswith(
        "The build stopped at its budget: it has spent $0.0125 of its max_cost_usd budget of $0.01"
    )
    assert "work so far is on the build branch" in esc.question
    # The work so far is on the build branch, and in the draft proposal.
    assert git(repo_path, "show", f"agentrun/{slug}:src/app.py") == "VALUE = 1"
    assert outcome.state.proposal is not None

    # The answer allows as much again ($0.02 in all): the build finishes.
    answer(repo, slug, "spend up to two cents")
    resumed = resume_build(repo, slug)
    assert isinstance(resumed, Outcome)
    assert resumed.state.state_name == "complete"
    assert resumed.state.usage.cost_usd == pytest.approx(0.0135)
    assert [(s.phase, s.round) for s in started(events(repo, slug))][-1] == ("code-review", 1)


def test_unknown_price_parks_with_a_question_naming_the_model(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, STEPS, extra="[budget]\nmax_cost_usd = 1.0\n", base=runtime("my-model"))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "parked"
    assert outcome.state.unpriced_models == ("my-model",)
    log = events(repo, slug)
    assert len(started(log)) <= 1  # nothing spent blind beyond what showed the price missing
    nothing_started_after_the_last_session(log)
    esc = budget_escalation(repo, slug)
    assert "my-model" in esc.question
    assert 'add [prices."my-model"]' in esc.question
    assert all(p.usage.cost_usd is None for p in payloads(repo, slug, "session.ended"))


def test_a_configured_price_is_used(repo_path: Path, repo: pygit2.Repository) -> None:
    prices = '[budget]\nmax_cost_usd = 1.0\n\n[prices."my-model"]\ninput = 1.0\noutput = 2.0\n'
    configure(repo_path, STEPS, extra=prices, base=runtime("my-model"))
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    assert outcome.state.unpriced_models == ()
    costs = [p.usage.cost_usd for p in payloads(repo, slug, "session.ended")]
    # 800 in at $1/M; implement: 400 in at $1/M + 1,000 out at $2/M.
    assert costs == pytest.approx([0.0008, 0.0008, 0.0024, 0.0008])


# --- max_tokens and max_wall_minutes ----------------------------------------------------------


def test_max_tokens_does_not_start_a_session_the_estimate_would_cross(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    steps: list[dict[str, Any]] = [
        {"phase": "plan", "verb": "plan", "text": PLAN, "usage": used(100)},
        {"phase": "plan-review", "usage": used(100)},
        {"phase": "implement", "write": APP, "usage": used(600, 400)},
        {
            "phase": "code-review",
            "round": 1,
            "verb": "revise",
            "findings": ["name the constant"],
            "usage": used(100),
        },
        {"phase": "code-review", "usage": used(100)},
    ]
    configure(repo_path, steps, extra="[budget]\nmax_tokens = 2000\n", base=PRICED)
    slug, outcome = build(repo)

    assert outcome.state.state_name == "parked"
    log = events(repo, slug)
    # 1,300 spent + implement@1's 1,000 > 2,000: implement@2 is not started.
    assert ("implement", 2) not in [(s.phase, s.round) for s in started(log)]
    nothing_started_after_the_last_session(log)
    esc = budget_escalation(repo, slug)
    assert (esc.phase, esc.round) == ("implement", 2)
    assert (
        "it has used 1,300 tokens of its max_tokens budget of 2,000; "
        "the next implement session is estimated at 1,000"
    ) in esc.question


def test_max_wall_minutes_parks_after_the_work(repo_path: Path, repo: pygit2.Repository) -> None:
    steps: list[dict[str, Any]] = [
        {"phase": "plan", "verb": "plan", "text": PLAN, "sleep": 0.5, "usage": used(10)},
    ]
    configure(repo_path, steps, extra="[budget]\nmax_wall_minutes = 0.005\n", base=PRICED)
    slug, outcome = build(repo)

    state = outcome.state
    assert state.state_name == "parked"
    assert state.active_seconds >= 0.5
    assert state.plan is not None  # the plan was submitted before the build stopped
    assert [(s.phase, s.round) for s in started(events(repo, slug))] == [("plan", 1)]
    esc = budget_escalation(repo, slug)
    assert (esc.phase, esc.round) == ("plan-review", 1)
    assert "max_wall_minutes budget of 0.005" in esc.question


def test_run_max_cost_sets_the_budget_of_the_build(
    repo_path: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(repo_path, STEPS, base=PRICED)
    monkeypatch.chdir(repo_path)

    result = invoke("run", GOAL, "--max-cost", "0.01")
    assert result.exit_code == 4, result.output  # parked at the budget
    (created,) = payloads(repo, SLUG, "build.created")
    assert created.config["budget"]["max_cost_usd"] == 0.01
    assert (
        "question e1 (code-review@1): The build stopped at its budget: "
        "it has spent $0.0125 of its max_cost_usd budget of $0.01"
    ) in result.stdout

    monkeypatch.setenv("AGENTRUN_MAX_COST", "0.5")
    result = invoke("run", "Add the app module again")
    assert result.exit_code == 0, result.output
    (again,) = payloads(repo, "add-the-app-module-again", "build.created")
    assert again.config["budget"]["max_cost_usd"] == 0.5

    refused = invoke("run", GOAL, "--max-cost", "0")
    assert refused.exit_code == 2


# --- usage shown --------------------------------------------------------------------------------


def status_row(output: str, slug: str) -> dict[str, str]:
    """The status table's row of ``slug``, by column (columns are split on 2+ spaces)."""
    header, *rows = output.splitlines()
    names = re.split(r"\s{2,}", header.strip())
    row = next(r for r in rows if r.startswith(slug + " "))
    return dict(zip(names, re.split(r"\s{2,}", row.strip()), strict=True))


def status_comment(repo: pygit2.Repository, state: BuildState) -> str:
    assert state.proposal is not None
    comments = LocalForge(repo).get(state.proposal.number).comments
    bodies = [c.body for c in comments if c.body.startswith("**agentrun build")]
    assert len(bodies) == 1
    return bodies[0]


def test_usage_in_status_show_log_and_the_proposal(
    repo_path: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(repo_path, STEPS, base=PRICED)
    slug, outcome = build(repo)
    assert outcome.state.state_name == "complete"
    monkeypatch.chdir(repo_path)

    status = invoke("status")
    assert status.exit_code == 0
    row = status_row(status.stdout, slug)
    assert (row["TOKENS"], row["COST"]) == ("3,800", "$0.0135")

    data = json.loads(invoke("status", "--json").stdout)
    (entry,) = data["builds"]
    assert entry["usage"] == {
        "tokens_in": 2800,
        "tokens_out": 1000,
        "cache_read": 0,
        "cache_write": 0,
        "cost_usd": pytest.approx(0.0135),
        "reported": True,
        "unpriced": [],
    }

    shown = invoke("show", slug).stdout.splitlines()
    assert [line for line in shown if line.startswith(("usage:", "total:"))] == [
        "usage:    plan: 800 tokens (800 in, 0 out), $0.0010",
        "usage:    plan-review: 800 tokens (800 in, 0 out), $0.0010",
        "usage:    implement: 1,400 tokens (400 in, 1,000 out), $0.0105",
        "usage:    code-review: 800 tokens (800 in, 0 out), $0.0010",
        "total:    3,800 tokens (2,800 in, 1,000 out), $0.0135",
    ]
    assert not any(line.startswith("unknown price") for line in shown)

    ended = [line for line in invoke("log", slug).stdout.splitlines() if "session.ended" in line]
    assert len(ended) == 4
    assert "· 1,400 tokens (400 in, 1,000 out), $0.0105" in ended[2]
    assert all("tokens (" in line and "$0.0" in line for line in ended)

    comment = status_comment(repo, outcome.state)
    assert "Sessions: 4 · 3,800 tokens (2,800 in, 1,000 out), $0.0135" in comment
    assert "| implement | 1,400 tokens (400 in, 1,000 out), $0.0105 |" in comment
    assert "| code-review | 800 tokens (800 in, 0 out), $0.0010 |" in comment
    assert "Unknown price" not in comment


def test_an_unknown_price_is_shown_as_unknown(
    repo_path: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The planner runs on a model with no price; everything else on gpt-5.
    mixed = (
        PRICED + f'\n[runtimes.cheap]\nkind = "script"\nscript = "{SCRIPT}"\nmodel = "my-model"\n'
    ).replace('default = ["scripted"]', 'default = ["scripted"]\nplan = ["cheap"]')
    configure(repo_path, STEPS, base=mixed)
    slug, outcome = build(repo)
    assert outcome.state.state_name == "complete"
    monkeypatch.chdir(repo_path)

    row = status_row(invoke("status").stdout, slug)
    assert (row["TOKENS"], row["COST"]) == ("3,800", "$0.0125?")  # the plan's cost left out
    shown = invoke("show", slug).stdout.splitlines()
    assert "usage:    plan: 800 tokens (800 in, 0 out), cost unknown" in shown
    assert 'unknown price: my-model (add [prices."my-model"])' in shown
    comment = status_comment(repo, outcome.state)
    assert "| plan | 800 tokens (800 in, 0 out), cost unknown |" in comment
    assert "Unknown price (not in the total): my-model" in comment

    # No price at all: the cost is unknown, not $0.
    configure(repo_path, STEPS, base=SCRIPTED)
    other = create_build(repo, "Add the app module once more").slug
    assert run_build(repo, other).state.unpriced_models == ("scripted",)
    row = status_row(invoke("status").stdout, other)
    assert (row["TOKENS"], row["COST"]) == ("3,800", "unknown")
    data = json.loads(invoke("status", "--json").stdout)
    entry = next(b for b in data["builds"] if b["slug"] == other)
    assert entry["usage"]["cost_usd"] is None


# --- producers continue, reviewers start fresh --------------------------------------------------


def test_producers_continue_their_session_reviewers_start_fresh(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    steps: list[dict[str, Any]] = [
        {"phase": "plan", "verb": "plan", "text": PLAN},
        {"phase": "plan-review", "round": 1, "verb": "revise", "findings": ["say where"]},
        {"phase": "implement", "round": 1, "write": APP},
        {"phase": "code-review", "round": 1, "verb": "revise", "findings": ["name it"]},
        {"phase": "implement", "round": 2, "write": {"src/app.py": "ANSWER = 1\n"}},
    ]
    configure(repo_path, steps)
    slug, outcome = build(repo)
    assert outcome.state.state_name == "complete"

    sessions = {(s.phase, s.round): s.session for s in started(events(repo, slug))}

    def said(phase: str, round_: int) -> str:
        return transcript(repo, slug, sessions[phase, round_]).decode()

    assert f"continuing session script:{sessions['plan', 1]}" in said("plan", 2)
    assert f"continuing session script:{sessions['implement', 1]}" in said("implement", 2)
    for fresh in [
        ("plan", 1),
        ("implement", 1),
        ("plan-review", 1),
        ("plan-review", 2),
        ("code-review", 1),
        ("code-review", 2),
    ]:
        assert "continuing session" not in said(*fresh), fresh
