"""The CI fan-out: the Action job stops where a build's tasks are ready and lists them;
matrix jobs, each a fresh clone, run one task each against the origin (two claiming the
same task: one runs it, the other exits 7); a last job lands them and finishes the build.
Git on a bare ``file://`` origin is the only coordinator."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from github_flow import JOB_SECONDS, Site, labeled, must, remote_events, remote_types
from gitlab_flow import DEVELOPER, Pipeline, issue_event
from runner.helpers import cli_env, git
from support.gitlab_api import serving
from support.prism import GitHubAPI

from agentrun.events import Event

SLUG = "issue-7-fix-the-greeting"
HELD = 7
GRAPH = [
    {"id": "a", "goal": "write a.txt", "paths": ["a.txt"]},
    {"id": "b", "goal": "write b.txt"},
    {"id": "c", "goal": "write c.txt"},
]
PLAN = f"# Plan\n\n```agentrun-tasks\n{json.dumps(GRAPH)}\n```\n"
STEPS = [
    {"phase": "plan", "verb": "plan", "text": PLAN},
    # a's session lasts long enough for a second job to claim the task meanwhile.
    {"phase": "implement", "task": "a", "write": {"a.txt": "a\n"}, "sleep": 4},
    {"phase": "implement", "task": "b", "write": {"b.txt": "b\n"}},
    {"phase": "implement", "task": "c", "write": {"c.txt": "c\n"}},
]
VERIFY = '[[verify]]\nname = "files"\ncommand = "ls"\n'


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    found = Site(tmp_path, github_api)
    found.configure(STEPS, VERIFY)
    return found


def start(site: Site, *args: str) -> subprocess.Popen[str]:
    """A CI job of the workflow's matrix or its last job: a fresh clone, one command."""
    return subprocess.Popen(
        ["git", "agentrun", *args, "--remote", "origin"],
        cwd=site.clone(),
        env=cli_env(site.api.env()),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=JOB_SECONDS)
    return proc.returncode, out


def sessions_of(log: list[Event], task: str) -> list[str]:
    """The phases a task's events start and the agent sessions they record."""
    found = []
    for e in log:
        if e.task == task and e.type == "session.started":
            found.append(f"session {e.payload.phase}@{e.payload.round}")
        elif e.task == task and e.type.endswith(".started"):
            found.append(e.type)
    return found


# Each task ran once: its start, one implement and one code review, one verify step.
ONCE = [
    "task.started",
    "implement.started",
    "session implement@1",
    "code-review.started",
    "session code-review@1",
    "verify.started",
]


def test_the_job_lists_the_ready_tasks_and_matrix_jobs_run_each_once(site: Site) -> None:
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))

    out = must(job.run())

    outputs = job.outputs()
    assert json.loads(outputs["tasks"]) == ["a", "b", "c"]
    assert outputs["slug"] == SLUG and outputs["state"] == "stopped"
    assert f"tasks a, b, c wait for CI jobs (`git agentrun task {SLUG} ID" in out
    assert "task.started" not in remote_types(site, SLUG)

    # The matrix: one job per task, and a second job for a at the same moment.
    matrix = {"a": "a", "a-again": "a", "b": "b", "c": "c"}
    jobs = {name: start(site, "task", SLUG, task) for name, task in matrix.items()}
    codes = {}
    for name, proc in jobs.items():
        code, text = finish(proc)
        codes[name] = code
        assert code in (0, HELD), f"{name} exited {code}:\n{text}"
        if code == HELD:
            assert f"task a of build {SLUG}" in text  # the one line that says who has it
    assert sorted([codes["a"], codes["a-again"]]) == [0, HELD]
    assert codes["b"] == codes["c"] == 0

    pushed = remote_events(site, SLUG)
    for task in ("a", "b", "c"):
        assert sessions_of(pushed, task) == ONCE, task
        branch = f"refs/heads/agentrun/{SLUG}--{task}"
        assert git(site.origin, "show", f"{branch}:{task}.txt") == task
    assert "task.integrated" not in [e.type for e in pushed]

    code, text = finish(start(site, "resume", SLUG))

    assert code == 0, text
    pushed = remote_events(site, SLUG)
    kinds = [e.type for e in pushed]
    assert kinds[-1] == "build.completed"
    landed = [e.payload.task for e in pushed if e.type == "task.integrated"]
    assert sorted(landed) == ["a", "b", "c"]
    for task in ("a", "b", "c"):
        assert sessions_of(pushed, task) == ONCE, task
        assert git(site.origin, "show", f"refs/heads/agentrun/{SLUG}:{task}.txt") == task


def test_the_last_job_runs_a_task_no_matrix_job_ran(site: Site) -> None:
    """A task job that never ran (cancelled, out of runners): the build's runner in the
    last job runs that task itself, then lands them all."""
    must(site.job("issues", labeled(7, "Fix the greeting", "", "maintainer")).run())
    for task in ("a", "b"):
        code, text = finish(start(site, "task", SLUG, task))
        assert code == 0, text

    code, text = finish(start(site, "resume", SLUG))

    assert code == 0, text
    pushed = remote_events(site, SLUG)
    assert pushed[-1].type == "build.completed"
    for task in ("a", "b", "c"):
        assert sessions_of(pushed, task) == ONCE, task


def test_a_build_without_a_task_graph_lists_no_tasks(site: Site) -> None:
    site.configure([])
    job = site.job("issues", labeled(8, "Fix the farewell", "Say bye.", "maintainer"))

    must(job.run())

    assert job.outputs()["tasks"] == "[]"
    assert job.outputs()["state"] == "complete"


def test_a_gitlab_job_runs_the_tasks_itself_and_lists_none(tmp_path: Path) -> None:
    """A pipeline's matrix cannot be made from a job's output: no fan-out on GitLab."""
    with serving(tmp_path / "origin.git") as api:
        site = Site(tmp_path, api)  # type: ignore[arg-type]  # the origin and checkouts only
        site.configure(STEPS, VERIFY)
        api.add_member("maintainer", DEVELOPER)
        issue = api.add_issue("Fix the greeting", "Say hello.", "maintainer", ("agentrun",))
        job = Pipeline(site.clone(), api, issue_event(issue, "maintainer"))

        must(job.run("--forge", "gitlab"))

    outputs = job.outputs()
    assert "tasks" not in outputs
    assert outputs["state"] == "complete"
    pushed = remote_events(site, outputs["slug"])
    landed = [e.payload.task for e in pushed if e.type == "task.integrated"]
    assert sorted(landed) == ["a", "b", "c"]
    for task in ("a", "b", "c"):
        assert sessions_of(pushed, task) == ONCE, task
