"""A command agent's usage, end to end: what it reports with ``git agentrun agent usage``.

Real builds in real repositories: the implement role is a small Python program (a real
process) that calls the verb, or writes its own report files as a lying agent would;
the other roles are the scripted agent. Without the verb a command agent's usage is
"unreported"; with a budget the reports are held to it while the program runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pygit2
from runner.helpers import (
    SCRIPTED_BUT_IMPLEMENT,
    Background,
    command_agent,
    configure,
    gone,
    kill_left_over,
    only_slug,
    payloads,
    run_cli,
    run_verb,
    session_started,
    tip,
    wait_for,
    wait_for_event,
)

from agentrun.commands.build import create_build, run_build
from agentrun.events import Usage
from agentrun.runner.loop import Outcome
from agentrun.store.log import EventLog

GOAL = "Add the feature"

# The implement agent: plays AGENT_STEPS (a JSON list), then reports done.
#   ["usage", ARGS...]   git agentrun agent usage ARGS
#   ["file", NAME, OBJ]  writes .agentrun/run/usage/NAME itself ("$SESSION" is its session)
#   ["context"]          copies what `git agentrun agent context` writes to $AGENT_STATE
#   ["sleep", SECONDS]   sleeps
# Its pid is in $AGENT_STATE/pid.
USAGE_AGENT = """\
import json, os, subprocess, sys, time
from pathlib import Path

sys.stdout.reconfigure(line_buffering=True)
sys.stdin.read()
session = os.environ["AGENTRUN_SESSION"]
Path(os.environ["AGENT_STATE"], "pid").write_text(str(os.getpid()))
for step in json.loads(os.environ["AGENT_STEPS"]):
    if step[0] == "usage":
        done = subprocess.run(
            ["git", "agentrun", "agent", *step], capture_output=True, text=True
        )
        print(f"agent: usage -> {done.returncode} {done.stdout.strip()}{done.stderr.strip()}")
    elif step[0] == "file":
        folder = Path(".agentrun/run/usage")
        folder.mkdir(parents=True, exist_ok=True)
        text = step[2] if isinstance(step[2], str) else json.dumps(step[2])
        (folder / step[1]).write_text(text.replace("$SESSION", session))
    elif step[0] == "context":
        done = subprocess.run(["git", "agentrun", "agent", "context"], capture_output=True)
        written = Path(done.stdout.decode().strip()).read_text()
        Path(os.environ["AGENT_STATE"], "context.md").write_text(written)
    elif step[0] == "sleep":
        time.sleep(float(step[1]))
Path("feature.txt").write_text("made by the agent\\n")
subprocess.run(["git", "agentrun", "agent", "done", "--summary", "added feature.txt"])
"""


def usage_agent(tmp_path: Path, steps: list[list[Any]]) -> tuple[str, Path]:
    """The ``[runtimes.agent]`` table of the implement agent playing ``steps``."""
    return command_agent(tmp_path, source=USAGE_AGENT, env={"AGENT_STEPS": json.dumps(steps)})


def build(repo: pygit2.Repository) -> tuple[str, Outcome]:
    slug = create_build(repo, GOAL).slug
    return slug, run_build(repo, slug)


def implement_ends(repo: pygit2.Repository, slug: str) -> list[Any]:
    started = payloads(repo, slug, "session.started")
    ids = {s.session for s in started if s.phase == "implement"}
    return [e for e in payloads(repo, slug, "session.ended") if e.session in ids]


def transcript_of(repo: pygit2.Repository, slug: str, ended: Any) -> str:
    text = EventLog(repo).text(tip(repo, slug) or "", ended.transcript)
    assert text is not None
    return text


def usage_call(tokens_in: int, tokens_out: int, *more: str) -> list[Any]:
    return ["usage", "--tokens-in", str(tokens_in), "--tokens-out", str(tokens_out), *more]


# --- the verb's figures are the session's usage ----------------------------------------


def test_the_verbs_figures_land_on_session_ended_and_two_calls_add_up(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    steps = [
        ["context"],
        usage_call(1000, 200, "--cache-read", "50"),
        usage_call(500, 100, "--cost", "0.25"),
    ]
    table, state = usage_agent(tmp_path, steps)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table)
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    (ended,) = implement_ends(repo, slug)
    assert ended.usage == Usage(
        tokens_in=1500, tokens_out=300, cache_read=50, cost_usd=0.25, reported=True
    )
    text = transcript_of(repo, slug, ended)
    assert "agent: usage -> 0 usage queued in .agentrun/run/usage/0001.json: 1,250 tokens" in text
    counted = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("usage 0")]
    assert counted == [
        "1,250 tokens (1,000 in, 200 out, 50 cache read), cost unknown counted",
        "600 tokens (500 in, 100 out), $0.2500 counted",
    ]
    context = (state / "context.md").read_text()
    assert "Report what you spend with `git agentrun agent usage --tokens-in N" in context
    shown = run_cli(repo_path, "show", slug)
    assert "usage:    implement: 1,850 tokens (1,500 in, 300 out, 50 cache read), $0.2500" in (
        shown.stdout
    )


def test_without_the_verb_a_command_agents_usage_is_unreported(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    table, _ = command_agent(tmp_path)
    configure(repo_path, base='[roles]\ndefault = ["agent"]\n\n' + table)
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    ended = payloads(repo, slug, "session.ended")
    assert ended and {e.usage for e in ended} == {Usage(reported=False)}  # no characters/4
    assert "total:    usage unreported" in run_cli(repo_path, "show", slug).stdout.splitlines()
    assert "total:    usage unreported" in run_cli(repo_path, "log", slug).stdout.splitlines()
    status = run_cli(repo_path, "status")
    assert "unreported" in next(line for line in status.stdout.splitlines() if slug in line)
    (row,) = json.loads(run_cli(repo_path, "status", "--json").stdout)["builds"]
    assert row["usage"]["reported"] is False
    assert row["usage"]["tokens_in"] == 0


# --- budgets ------------------------------------------------------------------------


BUDGET_WARNING = (
    "budget: max_tokens = 100000 cannot be enforced on runtime agent (command, "
    "role implement): its usage is unreported unless the agent reports it with "
    "`git agentrun agent usage`, which makes the budget enforceable"
)


def test_a_token_budget_on_a_command_agent_is_named_when_the_build_starts(
    tmp_path: Path, repo_path: Path
) -> None:
    table, _ = command_agent(tmp_path)
    budget = "[budget]\nmax_tokens = 100000\n"
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=f"{table}\n{budget}")

    done = run_cli(repo_path, "run", GOAL, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines().count(f"agentrun: warning: {BUDGET_WARNING}") == 1


def test_a_command_agent_past_what_the_budget_left_is_ended_and_the_build_parks(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    steps = [usage_call(30_000, 0), usage_call(60_000, 20_000), ["sleep", 60], usage_call(9, 9)]
    table, state = usage_agent(tmp_path, steps)
    budget = "[budget]\nmax_tokens = 100000\n"
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=f"{table}\n{budget}")
    started_at = time.monotonic()
    try:
        slug, outcome = build(repo)
        took = time.monotonic() - started_at
        pid = int((state / "pid").read_text())
        wait_for(lambda: gone(pid), "the agent to be ended", 5)
    finally:
        kill_left_over(state / "pid")

    assert took < 30  # not the agent's 60 s sleep
    (ended,) = implement_ends(repo, slug)
    assert ended.outcome == "failed"
    before = sum(e.usage.tokens for e in payloads(repo, slug, "session.ended") if e != ended)
    left = 100_000 - before
    assert ended.error == (
        f"the agent reported 110,000 tokens and the build's budget left the session {left:,}: "
        "its process tree was ended"
    )
    assert ended.usage == Usage(tokens_in=90_000, tokens_out=20_000)
    # It crossed on its second report: the build is over by less than that one report.
    assert 0 < outcome.state.usage.tokens - 100_000 <= 80_000
    (esc,) = payloads(repo, slug, "escalation.raised")
    assert (esc.source, esc.cause) == ("policy", "budget")
    assert outcome.state.state_name == "parked"
    assert "[agentrun] the agent reported 110,000 tokens" in transcript_of(repo, slug, ended)


# --- bad input and lying agents ---------------------------------------------------------


def test_bad_figures_and_calls_outside_a_session_exit_1_with_one_line(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    table, _ = command_agent(tmp_path)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table)
    slug, _ = build(repo)
    session = implement_ends(repo, slug)[0].session

    def refused(*args: str) -> str:
        done = run_verb(repo_path, slug, "implement@1", session, "usage", *args)
        assert (done.returncode, done.stdout) == (1, ""), done
        assert len(done.stderr.splitlines()) == 1, done.stderr
        return done.stderr.strip()

    assert refused("--tokens-in", "-5", "--tokens-out", "1") == (
        "agentrun: --tokens-in -5 is negative: report what the session spent"
    )
    assert refused("--tokens-in", "many", "--tokens-out", "1") == (
        "agentrun: --tokens-in 'many' is not a whole number of tokens"
    )
    assert refused("--tokens-in", "1", "--tokens-out", str(10**12)) == (
        "agentrun: --tokens-out 1,000,000,000,000 is more than one report may carry (1,000,000,000)"
    )
    assert refused("--tokens-in", "1", "--tokens-out", "1", "--cost", "nan") == (
        "agentrun: --cost nan is not a number of dollars"
    )
    assert refused("--tokens-in", "1", "--tokens-out", "1", "--cost", "-1") == (
        "agentrun: --cost -1.0 is negative: report what the session spent"
    )
    # The session ended: a late report (or one from a session that is not its own) is refused.
    assert refused("--tokens-in", "1", "--tokens-out", "1") == (
        f"agentrun: session {session} is not the open session of build {slug} "
        "(it ended or was abandoned); usage not recorded"
    )
    outside = run_cli(repo_path, "agent", "usage", "--tokens-in", "1", "--tokens-out", "1")
    assert outside.returncode == 1
    assert outside.stderr.startswith("agentrun: agent verbs run inside an agentrun session")
    assert len(outside.stderr.splitlines()) == 1
    assert not (repo_path / ".agentrun" / "run" / "usage").exists()


def test_reports_an_agent_forges_are_refused_and_only_its_own_count(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    steps: list[list[Any]] = [
        ["file", "0001.json", {"session": "s-someone", "tokens_in": 5}],
        ["file", "0002.json", {"session": "$SESSION", "tokens_in": -1_000_000}],
        ["file", "0003.json", {"session": "$SESSION", "tokens_out": 10**15}],
        ["file", "0004.json", {"session": "$SESSION", "tokens_in": "many"}],
        ["file", "0005.json", {"session": "$SESSION", "tokens_in": 1, "cost_usd": -3.0}],
        ["file", "0006.json", "not json"],
        ["sleep", 1],  # the runtime reads the files before the verb queues its report
        usage_call(100, 10),
    ]
    table, _ = usage_agent(tmp_path, steps)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table)
    slug, outcome = build(repo)

    assert outcome.state.state_name == "complete"
    (ended,) = implement_ends(repo, slug)
    assert ended.usage == Usage(tokens_in=100, tokens_out=10)
    lines = transcript_of(repo, slug, ended).splitlines()
    said = [line for line in lines if line.startswith("usage 000")]
    assert said == [
        "usage 0001.json: from session s-someone, not ours; refused",
        "usage 0002.json: refused (tokens_in -1,000,000 is negative: report what the session "
        "spent)",
        "usage 0003.json: refused (tokens_out 1,000,000,000,000,000 is more than one report "
        "may carry (1,000,000,000))",
        "usage 0004.json: refused (tokens_in 'many' is not a whole number of tokens)",
        "usage 0005.json: refused (--cost -3.0 is negative: report what the session spent)",
        "usage 0006.json: refused (Expecting value: line 1 column 1 (char 0))",
        "usage 0001.json: 110 tokens (100 in, 10 out), cost unknown counted",
    ]


def test_a_runtime_that_reports_its_own_usage_refuses_the_verb(repo_path: Path) -> None:
    """The scripted runtime books its own figures: the verb would count them twice."""
    configure(repo_path, [{"phase": "implement", "sleep": 5, "write": {"f.txt": "f\n"}}])
    runner = Background(repo_path, "run", GOAL)
    try:
        slug = only_slug(repo_path)
        started = wait_for_event(repo_path, slug, session_started("implement"), "implement")
        session = started.payload.session
        done = run_verb(
            repo_path,
            slug,
            "implement@1",
            session,
            "usage",
            "--tokens-in",
            "9",
            "--tokens-out",
            "9",
        )
        code, _ = runner.wait(60)
    finally:
        runner.stop()

    assert code == 0
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "agentrun: runtime scripted (script) reports this session's usage itself; its figures "
        "count and these are not recorded (no usage is counted twice)\n"
    )
    assert not (repo_path / ".agentrun" / "run" / "usage").exists()
