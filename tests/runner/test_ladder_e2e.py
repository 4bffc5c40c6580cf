"""A model ladder and the stall detection for real: `git agentrun run` with scripted
runtimes, a real verify command and the local forge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pygit2
from runner.helpers import configure, events, only_slug, run_cli, script_runtimes

GOAL = "Make the answer good"
CHECK = '[[verify]]\nname = "good"\ncommand = "grep -q good answer.txt"\n'
NO_REVIEWS = "[pipeline]\nplan_review = false\ncode_review = false\n"


def answers(text: str) -> list[dict[str, Any]]:
    return [{"phase": "implement", "write": {"answer.txt": text}}]


def implement_sessions(repo: pygit2.Repository, slug: str) -> list[tuple[str, int | None]]:
    return [
        (e.payload.runtime, e.payload.rung)
        for e in events(repo, slug)
        if e.type == "session.started" and e.payload.phase == "implement"
    ]


def ladder_build(repo_path: Path, tables: str, rungs: list[str]) -> str:
    """A build whose implement climbs ``rungs``, run to its end (it passes): its slug."""
    ladder = f"[ladder.implement]\nrungs = {json.dumps(rungs)}\n"
    configure(repo_path, extra=f"{tables}\n{ladder}\n{NO_REVIEWS}{CHECK}")
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return only_slug(repo_path)


def test_a_cheap_rung_that_fails_verify_climbs_to_the_strong_one(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    tables = script_runtimes(repo_path, {"cheap": answers("bad\n"), "strong": answers("good\n")})
    slug = ladder_build(repo_path, tables, ["cheap", "strong"])
    assert implement_sessions(repo, slug) == [("cheap", 0), ("strong", 1)]
    climbed = [e.payload for e in events(repo, slug) if e.type == "ladder.climbed"]
    assert [(p.role, p.rung, p.runtime, p.reason) for p in climbed] == [
        ("implement", 1, "strong", "1 failed round on cheap")
    ]
    build = json.loads(run_cli(repo_path, "status", "--json").stdout)["builds"][0]
    assert build["state"] == "complete"
    rungs = [(r["role"], r["rung"], r["runtime"], r["current"]) for r in build["rungs"]]
    assert rungs == [("implement", 0, "cheap", False), ("implement", 1, "strong", True)]
    assert all(r["usage"]["tokens_in"] > 0 for r in build["rungs"])
    shown = run_cli(repo_path, "show", slug).stdout
    assert "rung:     implement 0 (cheap): " in shown
    assert "rung:     implement 1 (strong, now): " in shown
    body = run_cli(repo_path, "pulls", "show", "1").stdout
    assert "| implement | 0 · cheap | " in body and "| implement | 1 · strong (now) | " in body


def test_a_rung_that_cannot_be_reached_falls_to_the_next(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    tables = script_runtimes(repo_path, {"strong": answers("good\n")})
    ghost = '[runtimes.ghost]\nkind = "claude"\nbinary = "/nonexistent/claude"\n'
    slug = ladder_build(repo_path, f"{tables}\n{ghost}", ["ghost", "strong"])
    assert implement_sessions(repo, slug) == [("ghost", 0), ("strong", 1)]
    ran = [e.payload for e in events(repo, slug) if e.type == "session.started"]
    assert ran[-1].substitution == "ghost"


def test_the_same_failure_twice_parks_the_build_with_what_keeps_failing(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    tables = script_runtimes(repo_path, {"stuck": answers("bad\n")})
    check = (
        '[[verify]]\nname = "good"\n'
        "command = \"echo 'FAILED test_answer.py::test_good - took 0.0$RANDOM s'; exit 1\"\n"
    )
    config = f"{tables}\n{NO_REVIEWS}[policy]\nmax_review_rounds = 5\n{check}"
    configure(repo_path, extra=config, base='[roles]\ndefault = ["stuck"]\n')
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr  # parked
    slug = only_slug(repo_path)
    assert len(implement_sessions(repo, slug)) == 2  # not 5 rounds of the same
    build = json.loads(run_cli(repo_path, "status", "--json").stdout)["builds"][0]
    assert build["state"] == "parked"
    question = build["escalation"]["question"]
    assert question.startswith(
        "The same failure came back 2 rounds in a row (good: test_answer.py::test_good)"
    )
    assert "it has spent " in question and " tokens" in question
