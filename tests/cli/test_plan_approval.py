"""``[policy] plan_approval = "human"`` end to end: real processes, the scripted runtime.

``run`` parks on the plan (exit 4), ``approve`` records the approval, ``resume``
implements; an answer sends the plan back for another round; ``approve`` with no plan
waiting, or on an unknown build, exits 1 with one line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pygit2
from runner.helpers import configure, only_slug, payloads, run_cli, tip, types

from agentrun.runner.status_text import render_hosted_status
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

GOAL = "Add the app module"
PLAN = "1. Add src/app.py with VALUE = 1.\n2. Nothing else."
STEPS = [
    {"phase": "plan", "verb": "plan", "text": PLAN},
    {"phase": "implement", "write": {"src/app.py": "VALUE = 1\n"}, "text": "add the app"},
]
GATE = '[policy]\nplan_approval = "human"\n'


def ok(done: subprocess.CompletedProcess[str], code: int = 0) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"agentrun: {message}\n"


def parked_on_the_plan(repo_path: Path) -> tuple[str, str]:
    configure(repo_path, STEPS, extra=GATE)
    out = ok(run_cli(repo_path, "run", GOAL, timeout=120), 4)
    return only_slug(repo_path), out


def test_run_parks_on_the_plan_approve_then_resume_completes(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, out = parked_on_the_plan(repo_path)

    assert f"build {slug}: parked at plan-approval@1" in out
    assert "question e1 (plan@1): Plan round 1 waits for a person's approval" in out
    assert PLAN in out
    assert f"  approve: git agentrun approve {slug}\n" in out
    assert f'  or:      git agentrun answer {slug} "what to change"\n' in out
    assert "implement.started" not in types(repo, slug)
    status = ok(run_cli(repo_path, "status"))
    assert f"{slug}  parked (plan approval)  plan-approval@1" in status
    shown = ok(run_cli(repo_path, "show", slug))
    assert (
        "state:    parked at plan-approval@1, waiting for plan approval (e1): "
        f"git agentrun approve {slug}\n"
    ) in shown

    hosted = render_hosted_status(load_state(EventLog(repo), StateCache(repo), slug)[1])
    assert "- [x] plan review\n- [ ] plan approval ← now (round 1)\n- [ ] implement" in hosted
    assert (
        "**Question e1** (plan@1): Plan round 1 waits for a person's approval before any code "
        "is written.\nReply with a comment: `/agentrun approve` to go on, or "
        "`/agentrun answer e1 <what to change>` to send the plan back\n"
    ) in hosted
    assert PLAN not in hosted  # the plan is in the question's own comment

    approved = run_cli(repo_path, "approve", slug)

    assert ok(approved) == (
        f"plan approved (e1); run `git agentrun resume {slug}` to continue the build\n"
    )
    (event,) = payloads(repo, slug, "plan.approved")
    assert event.id == "e1" and event.by
    resumed = ok(run_cli(repo_path, "resume", slug, timeout=120))
    assert f"build {slug}: complete at done" in resumed
    started = payloads(repo, slug, "implement.started")
    assert [(s.round, s.feedback) for s in started] == [(1, ())]


def test_approve_with_no_plan_waiting_and_on_an_unknown_build(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, _ = parked_on_the_plan(repo_path)
    ok(run_cli(repo_path, "approve", slug))
    before = tip(repo, slug)

    one_line_error(
        run_cli(repo_path, "approve", slug), f"build {slug} has no plan waiting for approval"
    )
    one_line_error(
        run_cli(repo_path, "approve", "nope"),
        "no build named 'nope': `git agentrun status` lists the builds",
    )
    assert tip(repo, slug) == before


def test_a_build_parked_on_another_question_is_not_approved(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [{"phase": "implement", "verb": "escalate", "text": "Which colour?"}])
    ok(run_cli(repo_path, "run", GOAL, timeout=120), 4)
    slug = only_slug(repo_path)

    one_line_error(
        run_cli(repo_path, "approve", slug),
        f"build {slug} has no plan waiting for approval: it waits on e1, which `answer` replies to",
    )
    assert "plan.approved" not in types(repo, slug)


def test_an_answer_sends_the_plan_back_for_round_2(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, _ = parked_on_the_plan(repo_path)

    answered = ok(run_cli(repo_path, "answer", slug, "Name the module greeting.py"))
    assert answered.startswith("answered e1;")
    again = ok(run_cli(repo_path, "resume", slug, timeout=120), 4)

    assert f"build {slug}: parked at plan-approval@2" in again
    assert "question e2 (plan@2): Plan round 2 waits" in again
    plans = payloads(repo, slug, "plan.started")
    assert [p.round for p in plans] == [1, 2]
    assert plans[1].feedback == (
        "A person read plan round 1 and asked for changes:\nName the module greeting.py",
    )
    assert "implement.started" not in types(repo, slug)


def test_sweep_reports_the_waiting_plan_then_runs_the_approved_one(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    slug, _ = parked_on_the_plan(repo_path)
    waiting = json.loads(ok(run_cli(repo_path, "sweep", "--json")))
    assert waiting["builds"] == [
        {
            "slug": slug,
            "action": "skipped",
            "reason": "waits for plan approval (e1)",
            "state": "parked",
        }
    ]
    ok(run_cli(repo_path, "approve", slug))

    swept = json.loads(ok(run_cli(repo_path, "sweep", "--json", timeout=120)))

    assert [(b["action"], b["reason"], b["state"]) for b in swept["builds"]] == [
        ("resumed", "its questions were answered", "complete")
    ]
    assert "implement.started" in types(repo, slug)
