"""A build whose implement changed nothing asks first (unless ``run --allow-empty``)."""

from __future__ import annotations

from pathlib import Path

import pygit2
from runner.helpers import configure, payloads, run_cli, types

from agentrun.store.log import EventLog

GOAL = "Tidy the module"
SLUG = "tidy-the-module"
NOTHING = [{"phase": "implement"}]  # the scripted implement says done and writes nothing


def test_an_empty_build_parks_with_a_question_and_proposes_nothing(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, NOTHING)

    done = run_cli(repo_path, "run", GOAL)

    assert "no change against the base" in done.stdout, done.stdout + done.stderr
    (question,) = payloads(repo, SLUG, "escalation.raised")
    assert (question.phase, question.cause) == ("implement", "empty")
    assert "proposal.opened" not in types(repo, SLUG)
    assert run_cli(repo_path, "pulls").stdout.strip() == "no proposals yet"


def test_an_answer_lets_the_empty_build_go_on(repo_path: Path, repo: pygit2.Repository) -> None:
    configure(repo_path, NOTHING)
    run_cli(repo_path, "run", GOAL)

    assert run_cli(repo_path, "answer", SLUG, "yes, nothing to change").returncode == 0
    done = run_cli(repo_path, "resume", SLUG)

    assert done.returncode == 0, done.stderr
    assert types(repo, SLUG)[-1] == "build.completed"
    assert len(payloads(repo, SLUG, "escalation.raised")) == 1


def test_run_allow_empty_is_recorded_and_never_asks(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, NOTHING)

    done = run_cli(repo_path, "run", "--allow-empty", GOAL)

    assert done.returncode == 0, done.stderr
    created = EventLog(repo).read(SLUG)[0].event.payload
    assert getattr(created, "allow_empty", None) is True
    assert payloads(repo, SLUG, "escalation.raised") == []
    assert types(repo, SLUG)[-1] == "build.completed"


def test_a_round_that_adds_nothing_of_its_own_is_not_empty(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    """The build's whole diff counts: round 2 only answers the review, changing nothing."""
    configure(
        repo_path,
        [
            {"phase": "implement", "round": 1, "write": {"src/app.py": "VALUE = 1\n"}},
            {"phase": "code-review", "round": 1, "verb": "revise", "findings": ["explain"]},
            {"phase": "implement", "round": 2},  # writes nothing
        ],
    )

    done = run_cli(repo_path, "run", GOAL)

    assert done.returncode == 0, done.stderr
    rounds = [c.round for c in payloads(repo, SLUG, "implement.completed")]
    assert rounds == [1, 2]
    assert payloads(repo, SLUG, "implement.completed")[1].changed_paths == ("src/app.py",)
    assert payloads(repo, SLUG, "escalation.raised") == []
    assert types(repo, SLUG)[-1] == "build.completed"
