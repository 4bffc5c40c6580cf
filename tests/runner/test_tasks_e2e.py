"""A plan's task graph run for real: `git agentrun run` starts a `git agentrun task`
process per ready task, the tasks' sessions run side by side in their own worktrees, and
the build's runner lands them on the build branch through the integration queue.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pygit2
import pytest
from runner.helpers import (
    background,
    configure,
    events,
    git,
    only_slug,
    payloads,
    run_cli,
    wait_for,
    wait_for_event,
)

from agentrun.events import Event

GOAL = "Write the parts"


def plan_step(graph: list[dict[str, Any]]) -> dict[str, Any]:
    text = "# Plan\n\nIn parts.\n\n```agentrun-tasks\n" + json.dumps(graph) + "\n```\n"
    return {"phase": "plan", "verb": "plan", "text": text}


def parts(*ids: str, **deps: list[str]) -> list[dict[str, Any]]:
    return [{"id": i, "goal": f"write {i}.txt", "deps": deps.get(i, [])} for i in ids]


def writes(task: str, sleep: float = 0.0, **extra: Any) -> dict[str, Any]:
    """The implement step of ``task``: it writes ``<task>.txt``."""
    return {"phase": "implement", "task": task, "write": {f"{task}.txt": f"{task}\n"},
            "sleep": sleep, **extra}  # fmt: skip


def after(kind: str, task: str) -> str:
    """A shell loop an agent runs to wait until the log holds ``kind`` of ``task``: two
    tasks then surely run side by side, from the same build head, however slow CI is."""
    log = 'git --git-dir="$AGENTRUN_GIT_DIR" log --format=%B "refs/agentrun/builds/$AGENTRUN_BUILD"'
    return f'until {log} | grep -q \'"type": "{kind}".*"task": "{task}"\'; do sleep 0.1; done'


def of(events_: list[Event], kind: str, task: str | None = None) -> list[Event]:
    return [e for e in events_ if e.type == kind and (task is None or e.task == task)]


@pytest.fixture(autouse=True)
def no_task_left_running(repo_path: Path) -> Iterator[None]:
    """Task processes run in sessions of their own: a test's leftovers are ended here."""
    yield
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmd = proc.info["cmdline"] or []
        if "agentrun" in " ".join(cmd) and "task" in cmd and proc.info["cwd"] == str(repo_path):
            proc.kill()


def test_ready_tasks_run_side_by_side_and_land_in_dependency_order(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    graph = parts("alpha", "beta", "gamma", gamma=["alpha"])
    steps = [
        plan_step(graph),
        writes(
            "alpha",
            run=after("session.started", "beta")
            + '; echo "$AGENTRUN_TASK $AGENTRUN_PHASE" > who.txt',
        ),
        writes("beta", run=after("session.started", "alpha")),
        writes("gamma"),
    ]
    configure(repo_path, steps, extra='[[verify]]\nname = "listed"\ncommand = "ls"\n')
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    slug = only_slug(repo_path)
    log = events(repo, slug)

    # Side by side: beta's session started before alpha's ended.
    started = {e.task: e.seq for e in of(log, "session.started") if e.payload.phase == "implement"}
    ended = {e.task: e.seq for e in of(log, "session.ended") if e.task}
    assert started["beta"] < ended["alpha"] and started["alpha"] < ended["beta"]
    # gamma starts only once alpha landed, from the build head of that moment.
    landed = [e.payload.task for e in of(log, "task.integrated")]
    assert landed.index("alpha") < landed.index("gamma")
    gamma = of(log, "task.started", "gamma")[0]
    alpha_landed = next(e for e in of(log, "task.integrated") if e.payload.task == "alpha")
    assert gamma.seq > alpha_landed.seq
    # Every event of a task's phases carries its task; AGENTRUN_TASK is set for its agent.
    for e in log:
        if e.type in ("implement.started", "code-review.started", "verify.started"):
            assert e.task in ("alpha", "beta", "gamma") or e.seq > alpha_landed.seq
    tree = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Tree)
    assert {"alpha.txt", "beta.txt", "gamma.txt"} <= {entry.name for entry in tree}
    assert (tree / "who.txt").data == b"alpha implement@1\n"  # type: ignore[attr-defined]
    for task in ("alpha", "beta", "gamma"):
        assert f"refs/heads/agentrun/{slug}--{task}" in repo.references
    # Then the build goes on as one without tasks: a whole-build review, verify, ready.
    then = [e.type for e in log if e.seq > max(e.seq for e in of(log, "task.integrated"))]
    assert "code-review.started" in then and "verify.completed" in then
    assert log[-1].type == "build.completed"
    status = json.loads(run_cli(repo_path, "status", "--json").stdout)["builds"][0]
    assert status["state"] == "complete"


def test_max_parallel_one_runs_one_session_at_a_time(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    steps = [plan_step(parts("alpha", "beta")), writes("alpha", 1), writes("beta", 1)]
    configure(repo_path, steps, extra="[policy]\nmax_parallel = 1\n")
    assert run_cli(repo_path, "run", GOAL, timeout=120).returncode == 0
    log = events(repo, only_slug(repo_path))
    open_now, most = 0, 0
    for e in log:
        if e.type == "session.started":
            open_now += 1
            most = max(most, open_now)
        elif e.type == "session.ended":
            open_now -= 1
    assert most == 1


def test_a_conflict_reconciles_the_task_onto_the_build_head(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    """Both tasks write shared.txt: the second to land conflicts, reconciles, lands."""
    steps = [
        plan_step(parts("alpha", "beta")),
        writes("alpha", write={"shared.txt": "alpha\n"}, run=after("task.started", "beta")),
        writes("beta", 1, write={"shared.txt": "beta\n"}),
        {"phase": "reconcile", "task": "beta", "write": {"shared.txt": "alpha\nbeta\n"}},
    ]
    configure(repo_path, steps)
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    slug = only_slug(repo_path)
    log = events(repo, slug)
    back = [e.payload for e in of(log, "task.returned")]
    assert [(p.task, p.why) for p in back] == [("beta", "conflict")]
    assert "shared.txt" in back[0].reason
    assert of(log, "reconcile.completed", "beta")
    tree = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Tree)
    assert (tree / "shared.txt").data == b"alpha\nbeta\n"  # type: ignore[attr-defined]


def test_a_failing_gate_on_the_merge_sends_the_task_back_to_implement(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    """Each task alone passes `one-part` (at most one part-*.txt); merged, they do not."""
    steps = [
        plan_step(parts("alpha", "beta")),
        writes("alpha", write={"part-alpha.txt": "a\n"}, run=after("task.started", "beta")),
        writes("beta", 1, round=1, write={"part-beta.txt": "b\n"}),
        writes("beta", round=2, delete=["part-beta.txt"], write={"beta.md": "b\n"}),
    ]
    check = 'test "$(ls part-*.txt 2>/dev/null | wc -l)" -le 1'
    configure(
        repo_path, steps, extra=f'[[verify]]\nname = "one-part"\ncommand = {json.dumps(check)}\n'
    )
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    log = events(repo, only_slug(repo_path))
    back = [e.payload for e in of(log, "task.returned")]
    assert [(p.task, p.why) for p in back] == [("beta", "gate")]
    assert "one-part" in back[0].reason
    implement = [e.payload for e in of(log, "implement.started", "beta")]
    assert [p.round for p in implement] == [1, 2]
    assert "failed its gate" in implement[1].feedback[-1]


def test_a_question_parks_its_task_while_the_others_land(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    steps = [
        plan_step(parts("alpha", "beta")),
        {
            "phase": "implement",
            "task": "alpha",
            "attempt": 1,
            "verb": "escalate",
            "text": "Which name for alpha?",
        },
        writes("alpha"),
        writes("beta"),
    ]
    configure(repo_path, steps)
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr  # parked
    slug = only_slug(repo_path)
    log = events(repo, slug)
    assert [e.payload.task for e in of(log, "task.integrated")] == ["beta"]
    asked = of(log, "escalation.raised")
    assert len(asked) == 1 and asked[0].task == "alpha"
    assert run_cli(repo_path, "answer", slug, "alpha.txt").returncode == 0
    done = run_cli(repo_path, "resume", slug, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    landed = [e.payload.task for e in of(events(repo, slug), "task.integrated")]
    assert landed == ["beta", "alpha"]


def test_abort_cancels_every_running_task_session(repo_path: Path, repo: pygit2.Repository) -> None:
    steps = [plan_step(parts("alpha", "beta")), writes("alpha", 60), writes("beta", 60)]
    configure(repo_path, steps)
    with background(repo_path, "run", GOAL) as proc:
        slug = only_slug(repo_path)
        for task in ("alpha", "beta"):
            wait_for_event(
                repo_path,
                slug,
                lambda e, t=task: e.type == "session.started" and e.task == t,  # type: ignore[misc]
                f"{task}'s session",
            )
        assert run_cli(repo_path, "abort", slug).returncode == 0
        code, out = proc.wait(timeout=60)
    assert code == 6, out
    log = events(repo, slug)
    ends = {e.task: e.payload.outcome for e in of(log, "session.ended") if e.task}
    assert ends == {"alpha": "aborted", "beta": "aborted"}
    assert log[-1].type == "build.aborted"


def test_a_killed_runner_and_a_killed_task_resume_with_no_task_run_twice(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    """SIGKILL the build's runner and one task's runner mid-session; `resume` takes over:
    the killed task's phase runs again from its start, on a reset worktree, and each task
    lands once, with one implement commit per round on its branch."""
    steps = [
        plan_step(parts("alpha", "beta")),
        writes("alpha", 30, attempt=1, write={"alpha.txt": "half\n", "junk.txt": "left\n"}),
        writes("alpha"),
        writes("beta", 3),
    ]
    configure(repo_path, steps)
    with background(repo_path, "run", GOAL) as proc:
        slug = only_slug(repo_path)
        wait_for_event(
            repo_path,
            slug,
            lambda e: e.type == "session.started" and e.task == "alpha",
            "alpha's session",
        )
        alpha = _task_process(repo_path, slug, "alpha")
        os.kill(proc.proc.pid, signal.SIGKILL)
        alpha.kill()
    wait_for(lambda: not alpha.is_running(), "alpha's runner to die")
    done = run_cli(repo_path, "resume", slug, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    log = events(repo, slug)
    assert sorted(e.payload.task for e in of(log, "task.integrated")) == ["alpha", "beta"]
    assert [p.outcome for p in payloads(repo, slug, "session.ended") if p.outcome != "ok"] == [
        "abandoned"
    ]
    assert len([e for e in of(log, "agent.done") if e.task == "beta"]) == 1
    commits = git(repo_path, "log", "--format=%s", f"main..agentrun/{slug}--alpha")
    assert [line for line in commits.splitlines() if line.startswith("implement@")] == [
        "implement@1 (alpha): agent.done"
    ]
    tree = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Tree)
    assert "junk.txt" not in {entry.name for entry in tree}


def test_two_runners_claiming_one_task_run_it_once(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    steps = [plan_step(parts("alpha")), writes("alpha", 3)]
    configure(repo_path, steps)
    with background(repo_path, "run", GOAL) as proc:
        slug = only_slug(repo_path)
        wait_for_event(repo_path, slug, lambda e: e.type == "task.started", "alpha to start")
        second = run_cli(repo_path, "task", slug, "alpha", timeout=60)
        assert second.returncode == 7, second.stdout + second.stderr
        assert "task alpha of build" in second.stdout and "is being run by" in second.stdout
        code, out = proc.wait(timeout=120)
    assert code == 0, out
    assert len(of(events(repo, slug), "implement.started", "alpha")) == 1


def test_a_task_the_build_does_not_have_is_one_line_and_exit_1(repo_path: Path) -> None:
    configure(repo_path, [plan_step(parts("alpha"))])
    assert run_cli(repo_path, "run", GOAL, timeout=120).returncode == 0
    slug = only_slug(repo_path)
    done = run_cli(repo_path, "task", slug, "nope")
    assert done.returncode == 1
    assert done.stdout.strip() == "" and len(done.stderr.strip().splitlines()) == 1
    assert "has no task 'nope' (its tasks: alpha)" in done.stderr
    bad = run_cli(repo_path, "task", slug, "../x")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1


def _task_process(repo_path: Path, slug: str, task: str) -> psutil.Process:
    found: list[psutil.Process] = []

    def look() -> bool:
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            cmd = proc.info["cmdline"] or []
            ours = proc.info["cwd"] == str(repo_path)
            if ours and "task" in cmd and slug in cmd and task in cmd:
                found[:] = [proc]
                return True
        return False

    wait_for(look, f"the task process of {task}")
    return found[0]


def test_four_tasks_at_once_keep_the_token_budget(repo_path: Path, repo: pygit2.Repository) -> None:
    """Every session spends 1,000 tokens; 8,500 are allowed. Plan and its review spend
    2,000. A role's first session runs alone (its spend is the estimate of the next);
    then the tasks' sessions start side by side, each reserving its estimate first, and
    one that fits only once others end waits for them. The build stops at its budget
    without overshooting it by more than one session's spend."""
    ids = ("t1", "t2", "t3", "t4")
    used = {"tokens_in": 1000}
    steps = [
        {**plan_step(parts(*ids)), "usage": used},
        {"phase": "plan-review", "usage": used},
        {"phase": "code-review", "usage": used},
        *(writes(t, 1, usage=used) for t in ids),
    ]
    configure(repo_path, steps, extra="[budget]\nmax_tokens = 8500\n")
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr  # parked at its budget
    slug = only_slug(repo_path)
    spent = sum(p.usage.tokens for p in payloads(repo, slug, "session.ended"))
    assert 7000 <= spent <= 8500 + 1000
    asked = payloads(repo, slug, "escalation.raised")
    assert [p.cause for p in asked] == ["budget"]
    open_now, most = 0, 0
    for e in events(repo, slug):
        if e.type == "session.started":
            open_now += 1
            most = max(most, open_now)
        elif e.type == "session.ended":
            open_now -= 1
    assert most >= 2, "the tasks' sessions ran side by side"


def test_setup_runs_once_in_each_task_s_worktree(repo_path: Path, repo: pygit2.Repository) -> None:
    steps = [plan_step(parts("alpha", "beta")), writes("alpha"), writes("beta")]
    (repo_path / ".gitignore").write_text(".stamp\n")
    git(repo_path, "add", ".gitignore")
    configure(repo_path, steps, extra='[setup]\ncommand = "date > .stamp"\n')
    assert run_cli(repo_path, "run", GOAL, timeout=120).returncode == 0
    slug = only_slug(repo_path)
    ran = [e for e in of(events(repo, slug), "observation.recorded") if e.payload.phase == "setup"]
    assert sorted(str(e.task) for e in ran) == ["None", "alpha", "beta"]
    assert all(e.payload.text.startswith("setup ran in ") for e in ran)


def test_a_task_with_nothing_to_do_appends_nothing(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    """A landed task of a finished build, and a task whose dependency has not landed:
    `task` says so and leaves the log as it is."""
    configure(repo_path, [plan_step(parts("alpha")), writes("alpha")])
    assert run_cli(repo_path, "run", GOAL, timeout=120).returncode == 0
    slug = only_slug(repo_path)
    before = len(events(repo, slug))
    done = run_cli(repo_path, "task", slug, "alpha")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"task alpha of build {slug}: landed")
    assert len(events(repo, slug)) == before
