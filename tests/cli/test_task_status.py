"""A build's task graph wherever a build is shown: `status` (table and JSON), `show`,
`log`, and the status text the forges get. Real builds of the scripted agent, run by
real `git agentrun` processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pygit2
from conftest import make_repo
from runner.helpers import background, configure, run_cli, wait_for, wait_for_event

from agentrun.errors import EXIT_DONE, EXIT_WAITING
from agentrun.forge.local import LocalForge
from agentrun.kernel.state import BuildState
from agentrun.runner.status_text import render_body, render_hosted_body, render_hosted_status
from agentrun.store.cache import StateCache, load_state
from agentrun.store.lease import acquire, held, task_key
from agentrun.store.log import EventLog

GOAL = "Write three files"
SLUG = "write-three-files"
GRAPH = [
    {"id": "alpha", "goal": "Write alpha.txt\nwith one line in it", "paths": ["alpha.txt"]},
    {"id": "beta", "goal": "Write beta.txt"},
    {"id": "gamma", "goal": "Write gamma.txt", "deps": ["alpha"]},
]
PLAN_STEP = {
    "phase": "plan",
    "verb": "plan",
    "text": f"# Plan\n\n```agentrun-tasks\n{json.dumps(GRAPH)}\n```\n",
}
QUESTION = "Should beta.txt greet the world or the reader?"
VERIFY = '\n[[verify]]\nname = "files"\ncommand = "ls"\n'


def task_steps(**special: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan with the graph, then each task's implement step (``special`` replaces
    one task's)."""
    steps = [PLAN_STEP]
    for spec in GRAPH:
        task = str(spec["id"])
        write = {f"{task}.txt": f"{task}\n"}
        steps.append(special.get(task, {"phase": "implement", "task": task, "write": write}))
    return steps


def build(repo_path: Path, steps: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    configure(repo_path, steps, extra=VERIFY)
    return run_cli(repo_path, "run", GOAL, timeout=120)


def state_of(repo_path: Path, slug: str = SLUG) -> BuildState:
    repo = pygit2.Repository(str(repo_path))
    return load_state(EventLog(repo), StateCache(repo), slug)[1]


def status_rows(repo_path: Path) -> dict[str, list[str]]:
    """`status`'s rows by their first column, a task's as ``└ ID``, in order."""
    out = run_cli(repo_path, "status")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == [
        "BUILD",
        "STATE",
        "PHASE",
        "ROUND",
        "ESCALATION",
        "PROPOSAL",
        "TOKENS",
        "COST",
        "AGE",
    ]
    found: dict[str, list[str]] = {}
    for line in lines[1:]:
        cells = line.split()
        if cells[0] == "└":
            assert line.startswith("  └ ")
            found[f"└ {cells[1]}"] = cells[2:]
        else:
            found[cells[0]] = cells[1:]
    return found


def status_json(repo_path: Path) -> dict[str, Any]:
    out = run_cli(repo_path, "status", "--json")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert document["schema"] == 1
    return document


def entry(document: dict[str, Any], slug: str = SLUG) -> dict[str, Any]:
    return next(b for b in document["builds"] if b["slug"] == slug)


def test_a_finished_graph_in_status_show_log_and_the_proposal(tmp_path: Path) -> None:
    repo_path = make_repo(tmp_path / "repo")
    run = build(repo_path, task_steps())
    assert run.returncode == EXIT_DONE, run.stdout + run.stderr
    state = state_of(repo_path)
    assert list(state.tasks) == ["alpha", "beta", "gamma"]
    for task in ("alpha", "beta", "gamma"):  # the live progress names each task's events
        assert re.search(rf" implement\.completed +\[{task}\] head ", run.stdout), run.stdout

    rows = status_rows(repo_path)
    assert list(rows) == [SLUG, "└ alpha", "└ beta", "└ gamma"]  # under the build, in order
    assert rows[SLUG][:2] == ["complete", "done"]
    for task in ("alpha", "beta", "gamma"):
        t = state.tasks[task]
        assert t.usage.tokens > 0 and t.sessions == 2  # implement and code review
        cost = f"${t.usage.cost_usd:.4f}"
        assert rows[f"└ {task}"] == [
            "landed",
            "landed",
            "1",
            "-",
            "-",
            f"{t.usage.tokens:,}",
            cost,
            "-",
        ]
    assert sum(t.usage.tokens for t in state.tasks.values()) < state.usage.tokens

    document = entry(status_json(repo_path))
    assert document["state"] == "complete"
    tasks = document["tasks"]
    assert [t["id"] for t in tasks] == ["alpha", "beta", "gamma"]
    alpha = state.tasks["alpha"]
    assert tasks[0] == {
        "id": "alpha",
        "state": "landed",
        "phase": "landed",
        "round": 1,
        "escalation": None,
        "usage": {
            "tokens_in": alpha.usage.tokens_in,
            "tokens_out": 0,
            "cache_read": 0,
            "cache_write": 0,
            "cost_usd": 0.0,
            "reported": True,
        },
        "sessions": 2,
        "deps": [],
        "branch": f"agentrun/{SLUG}--alpha",
        "runner": None,
    }
    assert tasks[2]["deps"] == ["alpha"]
    assert set(tasks[1]["usage"]) == set(document["usage"]) - {"unpriced"}

    shown = run_cli(repo_path, "show", SLUG)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = lines.index("tasks (3):")
    assert lines[at + 1].split() == [
        "TASK",
        "DEPS",
        "STATE",
        "PHASE",
        "ROUND",
        "TOKENS",
        "COST",
        "BRANCH",
        "GOAL",
    ]
    alpha_line, _, gamma_line = lines[at + 2 : at + 5]
    assert alpha_line.split() == [
        "alpha",
        "-",
        "landed",
        "landed",
        "1",
        f"{alpha.usage.tokens:,}",
        "$0.0000",
        f"agentrun/{SLUG}--alpha",
        "Write",
        "alpha.txt",  # the goal's first line only
    ]
    assert gamma_line.split()[:3] == ["gamma", "alpha", "landed"]
    assert "with one line in it" not in shown.stdout

    log = run_cli(repo_path, "log", SLUG)
    assert log.returncode == 0, log.stderr
    lines = log.stdout.splitlines()
    started = [line for line in lines if " task.started " in line]
    assert len(started) == 3
    for task in ("alpha", "beta", "gamma"):
        assert re.search(rf" session\.started +\[{task}\] s-", log.stdout), task
        assert any(f"[{task}] {task} from " in line for line in started)
    own = next(line for line in lines if " plan.submitted " in line)  # the build's own event
    assert re.search(r" plan\.submitted +[^\[ ]", own)
    assert re.search(r"build\.completed +success", log.stdout)

    # The proposal's body and status (the local forge's), and the hosted forge's texts.
    number = state.proposal.number if state.proposal else 0
    body = LocalForge(pygit2.Repository(str(repo_path))).get(number).body
    assert body == render_body(state)
    table = [
        "**Tasks**",
        "",
        "| task | state | phase | round | usage |",
        "| --- | --- | --- | --- | --- |",
        f"| `alpha` | landed | landed | 1 | {alpha.usage.describe()} |",
    ]
    assert "\n".join(table) in body
    assert "| `gamma` | landed | landed | 1 |" in body
    hosted = render_hosted_status(state)
    assert "\n".join(table) in hosted
    description = render_hosted_body(state, "the plan", 7)
    assert "### Tasks\n\n| task | state | phase | round | usage |" in description
    assert description.index("### Tasks") < description.index("### Verification")


def test_a_build_without_tasks_shows_none(tmp_path: Path) -> None:
    repo_path = make_repo(tmp_path / "plain")
    assert build(repo_path, []).returncode == EXIT_DONE
    slug = SLUG
    rows = status_rows(repo_path)
    assert list(rows) == [slug]
    assert entry(status_json(repo_path))["tasks"] == []
    shown = run_cli(repo_path, "show", slug).stdout
    assert "tasks (" not in shown and "TASK" not in shown
    state = state_of(repo_path)
    for text in (render_body(state), render_hosted_status(state)):
        assert "Tasks" not in text and "| task |" not in text
    assert "### Tasks" not in render_hosted_body(state, "the plan", None)
    log = run_cli(repo_path, "log", slug).stdout.splitlines()
    assert any(" build.completed " in line for line in log)
    assert not any(re.match(r" *\d+ \S+ \S+ \S+ +\[", line) for line in log)  # no task


def test_a_task_parked_on_its_question_while_the_others_landed(tmp_path: Path) -> None:
    repo_path = make_repo(tmp_path / "repo")
    ask = {"phase": "implement", "task": "beta", "verb": "escalate", "text": QUESTION}
    assert build(repo_path, task_steps(beta=ask)).returncode == EXIT_WAITING
    state = state_of(repo_path)
    (question,) = state.open_escalations
    assert question.task == "beta"
    assert state.state_name == "parked"  # every task not landed waits on a question

    rows = status_rows(repo_path)
    assert list(rows) == [SLUG, "└ alpha", "└ beta", "└ gamma"]
    assert rows[SLUG][0] == "parked"
    assert rows[SLUG][3] == question.id  # the build's column names its open question
    assert rows["└ alpha"][:4] == ["landed", "landed", "1", "-"]
    assert rows["└ gamma"][:4] == ["landed", "landed", "1", "-"]
    assert rows["└ beta"][0] == "parked"
    assert rows["└ beta"][3] == question.id

    tasks = {t["id"]: t for t in entry(status_json(repo_path))["tasks"]}
    assert tasks["beta"]["state"] == "parked" and tasks["beta"]["escalation"] == question.id
    assert tasks["beta"]["sessions"] == 1
    assert tasks["alpha"]["escalation"] is None and tasks["gamma"]["state"] == "landed"

    shown = run_cli(repo_path, "show", SLUG).stdout
    assert f"question: {question.id} implement@1 (task beta) {QUESTION} [open]" in shown
    assert re.search(r"\n  beta +- +parked +", shown)

    hosted = render_hosted_status(state)
    assert f"| `beta` | parked (question {question.id}) |" in hosted
    assert f"**Question {question.id}** (implement@1, task `beta`): {QUESTION}" in hosted
    checklist = "- [x] plan\n- [x] plan review\n- [ ] implement ← now (round 1)\n"
    assert checklist in hosted  # running the graph is the build's implement stage
    assert f"(implement@1, task `beta`): {QUESTION}" in render_body(state)
    assert "| `alpha` | landed | landed |" in hosted
    assert f"/agentrun answer {question.id}" in hosted


def test_a_stopped_task_and_one_a_job_runs(tmp_path: Path) -> None:
    """Ctrl-C stopped the runner while alpha's agent ran: the build and alpha are
    ``stopped``; once a job holds alpha's lease (as a CI job running `git agentrun task`
    does), both show running, with the job as alpha's runner."""
    repo_path = make_repo(tmp_path / "repo")
    slow = {"phase": "implement", "task": "alpha", "write": {"alpha.txt": "a\n"}, "sleep": 120}
    configure(repo_path, task_steps(alpha=slow), extra=VERIFY)
    with background(repo_path, "run", GOAL) as runner:
        wait_for_event(
            repo_path,
            SLUG,
            lambda e: e.task == "alpha" and e.type == "session.started",
            "alpha's implement session",
        )
        os.killpg(runner.proc.pid, signal.SIGINT)  # Ctrl-C: the runner and its tasks'
        runner.wait()
        repo = pygit2.Repository(str(repo_path))
        wait_for(
            lambda: held(repo, SLUG) is None and held(repo, task_key(SLUG, "alpha")) is None,
            "the runners to let go",
            # The task's runner is in a session of its own: the build's runner stops it,
            # and it stops its agent's tree first; on a loaded 2-core machine that took
            # over 30 s once.
            timeout=120,
        )
    state = state_of(repo_path)
    assert state.stage == "tasks" and state.tasks["alpha"].stage == "implement"

    rows = status_rows(repo_path)
    assert rows[SLUG][:2] == ["stopped", "tasks@1"]
    assert rows["└ alpha"][:3] == ["stopped", "implement@1", "1"]
    assert rows["└ gamma"][:2] == ["waiting", "waiting"]  # on alpha
    tasks = {t["id"]: t for t in entry(status_json(repo_path))["tasks"]}
    assert tasks["alpha"]["state"] == "stopped" and tasks["alpha"]["runner"] is None

    lease = acquire(repo, task_key(SLUG, "alpha"), "ci-job")
    try:
        rows = status_rows(repo_path)
        assert rows[SLUG][0] == "running"
        assert rows["└ alpha"][0] == "running"
        document = entry(status_json(repo_path))
        assert document["state"] == "running" and document["runner"] is None
        alpha = next(t for t in document["tasks"] if t["id"] == "alpha")
        assert alpha["state"] == "running" and alpha["runner"].startswith("ci-job@")
    finally:
        lease.release()
    assert status_rows(repo_path)["└ alpha"][0] == "stopped"
