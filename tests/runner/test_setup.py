"""``[setup]``: a worktree is prepared once, and again only when its inputs change.

Real builds with the scripted agent; the setup command is a real shell command that
counts its runs in a file outside the worktree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure, git, payloads

from agentrun.commands.build import create_build, resume_build, run_build
from agentrun.commands.control import answer
from agentrun.config import parse_config
from agentrun.errors import ConfigError
from agentrun.kernel.state import BuildState
from agentrun.store.log import EventLog

THREE_ROUNDS = [
    {"phase": "code-review", "round": 1, "verb": "revise", "findings": ["again"]},
    {"phase": "code-review", "round": 2, "verb": "revise", "findings": ["once more"]},
]


def setup_table(tmp_path: Path, command: str, inputs: str = "") -> str:
    counter = tmp_path / "setup-runs"
    line = json.dumps(f"echo run >> {counter} && {command}")
    return f"[setup]\ncommand = {line}\n{inputs}\n"


def runs(tmp_path: Path) -> int:
    counter = tmp_path / "setup-runs"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def state_of(result: object) -> BuildState:
    return result if isinstance(result, BuildState) else result.state  # type: ignore[attr-defined]


def test_setup_runs_once_in_a_three_round_build(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    configure(repo_path, THREE_ROUNDS, extra=setup_table(tmp_path, "echo installed"))
    slug = create_build(repo, "Three rounds").slug
    outcome = run_build(repo, slug)
    assert outcome.state.state_name == "complete"
    assert outcome.state.impl_round == 3
    assert runs(tmp_path) == 1
    seen = [o.text for o in payloads(repo, slug, "observation.recorded") if o.phase == "setup"]
    assert len(seen) == 1 and seen[0].startswith("setup ran in ") and "(setup-1.txt)" in seen[0]
    log = EventLog(repo)
    output = log.text(log.tip_oid(slug) or "", "setup-1.txt") or ""
    assert "installed" in output and output.rstrip().endswith("[ok]")


def test_setup_runs_again_when_a_file_its_inputs_match_changes(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    (repo_path / "requirements.txt").write_text("one\n")
    git(repo_path, "add", "requirements.txt")
    steps = [
        *THREE_ROUNDS,
        {"phase": "implement", "round": 2, "write": {"requirements.txt": "one\ntwo\n"}},
    ]
    table = setup_table(tmp_path, "true", 'inputs = ["requirements*.txt"]')
    configure(repo_path, steps, extra=table)
    slug = create_build(repo, "Change the inputs").slug
    assert run_build(repo, slug).state.state_name == "complete"
    assert runs(tmp_path) == 2  # once at the start, once after round 2 changed the inputs


def test_a_failing_setup_parks_with_its_output_and_an_answer_runs_it_again(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    flag = tmp_path / "fixed"
    command = f"test -e {flag} || {{ echo 'pip: no matching distribution for nosuchpkg'; exit 3; }}"
    configure(repo_path, [], extra=setup_table(tmp_path, command))
    slug = create_build(repo, "Needs setup").slug

    parked = run_build(repo, slug).state
    assert parked.state_name == "parked"
    question = parked.open_escalations[0] if parked.open_escalations else None
    assert question is not None and question.cause == "setup"
    assert "exit 3" in question.question and "no matching distribution" in question.question

    flag.write_text("")
    answer(repo, slug, "installed the index")
    assert state_of(resume_build(repo, slug)).state_name == "complete"
    assert runs(tmp_path) == 2


def test_setup_after_a_failed_run_starts_from_a_clean_worktree(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    # The first run half-makes its ignored env/ and fails, as a Ctrl-C in `python3 -m venv`
    # leaves a venv without its pip; run again over that, it would fail the same way.
    (repo_path / ".gitignore").write_text("env/\n")
    git(repo_path, "add", ".gitignore")
    flag = tmp_path / "fixed"
    command = (
        "test ! -e env/half || { echo 'env/bin/pip: not found'; exit 127; }; "
        f"mkdir -p env && touch env/half && test -e {flag} && rm env/half"
    )
    configure(repo_path, [], extra=setup_table(tmp_path, command))
    slug = create_build(repo, "Half-made env").slug
    parked = run_build(repo, slug).state
    assert parked.state_name == "parked"
    question = parked.open_escalations[0].question
    assert "exit 1" in question
    assert "abort and run the build again" in question  # how to change the command

    flag.write_text("")
    answer(repo, slug, "fixed the index")
    assert state_of(resume_build(repo, slug)).state_name == "complete"
    assert runs(tmp_path) == 2


def test_setup_that_leaves_untracked_files_fails_naming_them(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    configure(repo_path, [], extra=setup_table(tmp_path, "mkdir -p env && touch env/python"))
    slug = create_build(repo, "Leaves files").slug
    parked = run_build(repo, slug).state
    assert parked.state_name == "parked"
    assert parked.open_escalations
    assert "env/python" in parked.open_escalations[0].question
    assert ".gitignore" in parked.open_escalations[0].question


def test_setup_may_make_what_gitignore_ignores(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    (repo_path / ".gitignore").write_text("env/\n")
    git(repo_path, "add", ".gitignore")
    configure(repo_path, [], extra=setup_table(tmp_path, "mkdir -p env && touch env/python"))
    slug = create_build(repo, "Ignored files").slug
    assert run_build(repo, slug).state.state_name == "complete"


def test_setup_command_as_a_list_runs_as_is(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    marker = tmp_path / "listed"
    table = f'[setup]\ncommand = ["touch", {json.dumps(str(marker))}]\n'
    configure(repo_path, [], extra=table)
    assert run_build(repo, create_build(repo, "A list").slug).state.state_name == "complete"
    assert marker.exists()


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('[setup]\ncommand = ""', "the setup command is empty"),
        ('[setup]\ncommand = "x"\npass_env = ["GITHUB_*"]', "would pass GITHUB_TOKEN"),
        ('[setup]\ncommand = "x"\ntimeout_seconds = 0', "greater than 0"),
    ],
)
def test_bad_setup_settings_are_config_errors(table: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_config(table, ".agentrun.toml")
