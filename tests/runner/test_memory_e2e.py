"""Memory across builds, end to end: real builds in a real repository, one after another.

The implement role is a small Python program (a real process) that saves every prompt
it receives and, when told, proposes a fact with ``git agentrun agent remember``; the
other roles are the scripted agent. A verify command that passed and setup that worked
become accepted facts at once; the agent's fact waits, out of every prompt, until a
person accepts it, and is then in the next build's prompt under its source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
from runner.helpers import SCRIPTED_BUT_IMPLEMENT, command_agent, configure, run_cli

from agentrun.commands.build import create_build, run_build
from agentrun.kernel.memory import HEADING
from agentrun.store.memory import read

# Saves its prompt as $AGENT_STATE/prompt-<n>.txt (n counts its sessions), proposes the
# fact in $AGENT_REMEMBER on its first session (with --path $AGENT_PATH), then is done.
AGENT = """\
import os, subprocess, sys
from pathlib import Path

sys.stdout.reconfigure(line_buffering=True)
prompt = sys.stdin.read()
state = Path(os.environ["AGENT_STATE"])
n = len(list(state.glob("prompt-*.txt"))) + 1
(state / f"prompt-{n}.txt").write_text(prompt)
fact = os.environ.get("AGENT_REMEMBER", "")
if fact and n == 1:
    args = ["git", "agentrun", "agent", "remember", fact, "--path", os.environ["AGENT_PATH"]]
    done = subprocess.run(args, capture_output=True, text=True)
    print(f"agent: remember -> {done.returncode} {done.stdout.strip()} {done.stderr.strip()}")
    (state / "remember.txt").write_text(f"{done.returncode} {done.stderr.strip()}")
Path("src").mkdir(exist_ok=True)
Path("src", "feature.txt").write_text(f"build {n}\\n")
subprocess.run(["git", "agentrun", "agent", "done", "--summary", "changed src/feature.txt"])
"""
VERIFY = '[[verify]]\nname = "tests"\ncommand = "test -f src/feature.txt"\n'
SETUP = '[setup]\ncommand = "true"\n'
TOKEN = "ghp_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"


def agent(tmp_path: Path, remember: str = "") -> tuple[str, Path]:
    env = {"AGENT_REMEMBER": remember, "AGENT_PATH": "src/**"}
    return command_agent(tmp_path, source=AGENT, env=env)


def build(repo: pygit2.Repository, goal: str) -> str:
    slug = create_build(repo, goal).slug
    outcome = run_build(repo, slug)
    assert outcome.state.state_name == "complete", outcome
    return slug


def prompt(state: Path, n: int) -> str:
    return (state / f"prompt-{n}.txt").read_text()


def test_a_passing_verify_and_setup_are_accepted_facts_in_the_next_prompt(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    table, state = agent(tmp_path)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table + VERIFY + SETUP)

    first = build(repo, "Add the feature")
    assert HEADING not in prompt(state, 1)  # no accepted fact yet: no block at all
    facts = read(repo).facts
    assert [(f.id, f.state, f.who, f.build, f.phase) for f in facts.values()] == [
        ("m-1", "accepted", "setup", first, "setup"),
        ("m-2", "accepted", "verify", first, "verify:tests@1"),
    ]
    assert facts["m-2"].text == "The verify step `tests` passes with: `test -f src/feature.txt`"

    second = build(repo, "Change the feature")
    text = prompt(state, 2)
    assert HEADING in text
    assert (
        f"- m-2, from verify (build {first}, verify:tests@1): The verify step `tests` passes "
        "with: `test -f src/feature.txt`"
    ) in text
    assert f"- m-1, from setup (build {first}, setup): Worktree setup that works: `true`" in text
    assert len(read(repo).facts) == 2, "the second build added no duplicate"
    assert second != first


def test_an_agents_fact_stays_out_of_prompts_until_a_person_accepts_it(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    fact = f"Run `make fixtures` before the API tests (token {TOKEN})"
    table, state = agent(tmp_path, remember=fact)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table)

    first = build(repo, "Add the feature")
    (proposed,) = read(repo).facts.values()
    assert (proposed.id, proposed.state, proposed.who) == ("m-1", "proposed", "agent")
    assert (proposed.build, proposed.phase, proposed.paths) == (first, "implement@1", ("src/**",))
    assert TOKEN not in proposed.text and "[redacted]" in proposed.text
    assert TOKEN not in repo_git_log(repo_path)

    shown = run_cli(repo_path, "show", first).stdout
    assert "fact:     m-1 proposed (implement@1): Run `make fixtures`" in shown
    assert shown.rstrip().endswith("-- `git agentrun memory accept m-1`")

    build(repo, "Change the feature")
    assert "make fixtures" not in prompt(state, 2) and HEADING not in prompt(state, 2)

    listed = json.loads(run_cli(repo_path, "memory", "list", "--json").stdout)
    assert listed["schema"] == 1 and listed["facts"][0]["state"] == "proposed"
    accepted = run_cli(repo_path, "memory", "accept", "m-1")
    assert (accepted.returncode, accepted.stdout) == (0, "fact m-1 accepted\n")
    assert "fact:" not in run_cli(repo_path, "show", first).stdout  # no longer waits

    build(repo, "Change the feature again")
    text = prompt(state, 3)
    assert f"- m-1, from agent (build {first}, implement@1), accepted by " in text
    assert "(paths: src/**): Run `make fixtures` before the API tests (token [redacted])" in text

    forgotten = run_cli(repo_path, "memory", "forget", "m-1")
    assert forgotten.returncode == 0
    build(repo, "One more change")
    assert "make fixtures" not in prompt(state, 4)


def repo_git_log(repo_path: Path) -> str:
    from runner.helpers import git

    return git(repo_path, "log", "-p", "refs/agentrun/memory")


def test_a_fact_too_long_is_refused_by_the_verb_at_once(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    table, state = agent(tmp_path, remember="x" * 2001)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table + VERIFY)
    build(repo, "Add the feature")
    said = (state / "remember.txt").read_text()
    assert said == "1 agentrun: the fact has 2,001 characters; at most 2,000", said
    assert [f for f in read(repo).facts.values() if f.who == "agent"] == []


def test_a_damaged_memory_leaves_prompts_without_facts_and_builds_running(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    table, state = agent(tmp_path)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table + VERIFY)
    repo.references.create("refs/agentrun/memory", repo.head.target, force=True)
    ran = run_cli(repo_path, "run", "Add the feature")
    assert ran.returncode == 0, ran.stdout + ran.stderr  # the build goes on without facts
    assert "agentrun: refs/agentrun/memory is damaged" in ran.stderr
    assert "this prompt carries no facts" in ran.stderr
    assert HEADING not in prompt(state, 1)
    listed = run_cli(repo_path, "memory", "list")
    assert listed.returncode == 1 and listed.stderr.count("\n") == 1, listed.stderr
    assert "refs/agentrun/memory is damaged" in listed.stderr
    assert "`git update-ref -d refs/agentrun/memory`" in listed.stderr
