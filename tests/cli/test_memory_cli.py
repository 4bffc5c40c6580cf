"""``git agentrun memory …`` as a person runs it: each verb, and bad input for each."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
from runner.helpers import configure, run_cli, run_verb

from agentrun.commands.build import create_build


def say(repo_path: Path, *args: str) -> tuple[int, str, str]:
    done = run_cli(repo_path, "memory", *args)
    return done.returncode, done.stdout, done.stderr


def test_add_list_show_accept_forget(repo_path: Path) -> None:
    assert say(repo_path, "list")[1].startswith("no facts yet")
    code, out, _ = say(repo_path, "add", "The API lives in src/api", "--path", "src/api/**")
    assert (code, out) == (0, "fact m-1 added (accepted)\n")
    assert say(repo_path, "add", "the API  lives in src/api")[1] == (
        "fact m-1 already says this; it is accepted\n"
    )
    listed = json.loads(say(repo_path, "list", "--json")[1])
    assert listed["schema"] == 1
    (fact,) = listed["facts"]
    assert (fact["id"], fact["state"], fact["who"], fact["paths"]) == (
        "m-1", "accepted", "author@example.com", ["src/api/**"]
    )  # fmt: skip
    shown = say(repo_path, "show", "m-1")[1]
    assert shown.startswith("m-1 (accepted)\nsource: author@example.com\n")
    assert "paths: src/api/**" in shown and shown.endswith("\nThe API lives in src/api\n")
    assert say(repo_path, "accept", "m-1")[1] == "fact m-1 was already accepted\n"
    assert say(repo_path, "forget", "m-1")[1] == "fact m-1 forgotten\n"
    assert say(repo_path, "forget", "m-1")[1] == "fact m-1 was already forgotten\n"
    assert "m-1    forgotten" in say(repo_path, "list")[1]
    # A person may say it again: a new fact, the forgotten one stays forgotten.
    assert say(repo_path, "add", "The API lives in src/api")[1] == "fact m-2 added (accepted)\n"


def test_bad_input_is_one_line_and_exit_1(repo_path: Path) -> None:
    say(repo_path, "add", "A fact")
    say(repo_path, "forget", "m-1")
    cases = {
        ("show", "m-7"): "agentrun: no fact 'm-7' in refs/agentrun/memory: `git agentrun memory "
        "list` lists them",
        ("accept", "m-7"): "agentrun: no fact 'm-7'",
        ("forget", "nope"): "agentrun: no fact 'nope'",
        ("accept", "m-1"): "agentrun: fact m-1 was forgotten by author@example.com; a forgotten "
        "fact stays forgotten",
        ("add", "  "): "agentrun: the fact is empty",
        ("add", "x" * 2001): "agentrun: the fact has 2,001 characters; at most 2,000",
        ("add", "text", "--path", " "): "agentrun: --path ' ' is not a glob",
    }
    for args, line in cases.items():
        code, out, err = say(repo_path, *args)
        assert (code, out) == (1, ""), args
        assert err.startswith(line) and err.count("\n") == 1, (args, err)
    assert say(repo_path, "list", "--bogus")[0] == 2  # a usage error, as click says


def test_the_agent_verb_outside_a_session_or_without_a_fact_is_refused(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path)
    slug = create_build(repo, "Add the feature").slug
    done = run_verb(repo_path, slug, "implement@1", "s-none", "remember", "A fact")
    assert done.returncode == 1
    assert "session s-none is not the open session" in done.stderr
    outside = run_cli(repo_path, "agent", "remember", "A fact")
    assert outside.returncode == 1 and "AGENTRUN_BUILD" in outside.stderr
    for args in (("remember", " "), ("remember", "A fact", "--path", "")):
        done = run_verb(repo_path, slug, "implement@1", "s-none", *args)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert json.loads(say(repo_path, "list", "--json")[1])["facts"] == []
