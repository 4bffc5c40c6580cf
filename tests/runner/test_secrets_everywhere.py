"""The fake-credential corpus planted wherever a secret can enter git, then looked for.

A real ``git agentrun run`` with a ``command`` agent that prints every fake in each
session (the transcripts), writes them into its plan, its ``done --summary``, its
escalation question and its review findings, and leaves a file carrying them in its
worktree (the guard refuses that phase commit; the next round is told why). A human's
answer carries them too, and so does a verify step's output. Then every object of the
repository is read back (``git cat-file --batch-all-objects``), with the notes and the
local forge's proposals, and no fake may appear in it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pygit2
import pytest
from runner.helpers import configure, only_slug, payloads, run_cli, types

from agentrun.forge.local import LocalForge

HERE = Path(__file__).resolve().parent


def _corpus() -> ModuleType:
    # Loaded by path: a package named `secrets` would shadow the standard library's.
    spec = importlib.util.spec_from_file_location(
        "secrets_corpus", HERE.parent / "secrets" / "corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


corpus = _corpus()

AGENT = '''\
"""Leaks every fake it was given wherever an agent's words go."""

import json
import os
import subprocess
import sys
from pathlib import Path

sys.stdout.reconfigure(line_buffering=True)
prompt = sys.stdin.read()
fakes = json.loads(Path(os.environ["FAKES"]).read_text())
state = Path(os.environ["AGENT_STATE"])
phase = os.environ["AGENTRUN_PHASE"]
family, round_ = phase.split("@")[0], int(phase.split("@")[1].split(":")[0])
(state / f"prompt-{phase}.txt").write_text(prompt)
lines = [f["line"] for f in fakes]
said = " ".join(lines)  # a secret known by its name keeps its name
print("\\n".join(lines))  # the transcript


def verb(*args):
    done = subprocess.run(["git", "agentrun", "agent", *args], capture_output=True, text=True)
    print(f"verb {args[0]}: {done.returncode} {done.stdout.strip()} {done.stderr.strip()}")
    if done.returncode:
        sys.exit(done.returncode)


def seen(name):
    marker = state / name
    first = not marker.exists()
    marker.write_text("")
    return not first


if family == "plan":
    plan = f"1. Configure {fakes[0]['secret']}\\n" + "\\n".join(lines)
    Path(".agentrun/run/plan.md").write_text(plan)
    verb("plan", ".agentrun/run/plan.md")
elif family == "plan-review":
    verb("approve")
elif family == "implement":
    if not seen("leaked-a-file"):
        Path("leak.txt").write_text("\\n".join(lines) + "\\n")
        Path("feature.txt").write_text("a feature\\n")
        verb("done", "--summary", said)
    elif not seen("asked"):
        Path("leak.txt").unlink(missing_ok=True)
        verb("escalate", f"Which of these should I use? {said}")
    else:
        Path("leak.txt").unlink(missing_ok=True)
        Path("feature.txt").write_text(f"a feature, round {round_}\\n")
        verb("done", "--summary", said)
elif family == "code-review":
    if not seen("reviewed"):
        verb("revise", *[arg for f in fakes for arg in ("--finding", f"leaked {f['line']}")])
    else:
        verb("approve")
else:
    verb("done", "--summary", said)
'''

SHOW = """\
import json, pathlib, sys
print("\\n".join(f["line"] for f in json.loads(pathlib.Path(sys.argv[1]).read_text())))
"""


def every_object(repo_path: Path) -> bytes:
    argv = ["git", "cat-file", "--batch-all-objects", "--batch"]
    return subprocess.run(argv, cwd=repo_path, capture_output=True, check=True).stdout


def leaked(fakes: list[corpus.Fake], data: bytes) -> list[str]:
    """The fakes whose secret appears in ``data``, as is or JSON-escaped, whole or in part.

    In part: a summary clipped before it was scrubbed once kept half a token (its shape
    lost with its end); 12 characters from near its start are enough to tell (but a
    webhook URL's start is public).
    """
    found = []
    for f in fakes:
        forms = {f.secret, json.dumps(f.secret)[1:-1]}
        if len(f.secret) >= 24 and "://" not in f.secret:  # a URL's start is public
            forms.add(f.secret[8:20])
        if any(form.encode() in data for form in forms):
            found.append(f"{f.provider}: {f.secret[:16]}")
    return found


@pytest.mark.slow
def test_no_fake_credential_reaches_git_from_anywhere(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    fakes = corpus.fakes()
    fakes_file = tmp_path / "fakes.json"
    fakes_file.write_text(json.dumps([{"secret": f.secret, "line": f.line} for f in fakes]))
    state = tmp_path / "agent-state"
    state.mkdir()
    program = tmp_path / "agent.py"
    program.write_text(AGENT)
    show = tmp_path / "show.py"
    show.write_text(SHOW)
    base = f"""\
[roles]
default = ["agent"]

[runtimes.agent]
kind = "command"
command = [{json.dumps(sys.executable)}, {json.dumps(str(program))}]
env = {{ AGENT_STATE = {json.dumps(str(state))}, FAKES = {json.dumps(str(fakes_file))} }}

[[verify]]
name = "prints-them"
command = {json.dumps(f"{sys.executable} {show} {fakes_file}")}
"""
    configure(repo_path, base=base)
    goal = "Wire up the integrations"

    first = run_cli(repo_path, "run", goal, timeout=300)
    assert first.returncode == 4, first.stdout + first.stderr  # parked on the agent's question
    slug = only_slug(repo_path)
    asked = payloads(repo, slug, "escalation.raised")
    assert [(e.source, e.phase) for e in asked] == [("agent", "implement")], first.stdout
    answered = run_cli(repo_path, "answer", slug, "Use these: " + " ".join(f.line for f in fakes))
    assert answered.returncode == 0, answered.stderr
    resumed = run_cli(repo_path, "resume", slug, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert types(repo, slug)[-1] == "build.completed", resumed.stdout

    # Every place was reached: the guard refused the worktree carrying the fakes, the next
    # round was told why, and each verb was recorded.
    failed = payloads(repo, slug, "phase.failed")
    assert failed and "leak.txt" in failed[0].error
    started = payloads(repo, slug, "implement.started")
    assert any("leak.txt" in line for line in started[1].feedback)
    assert "leak.txt" in (state / f"prompt-implement@{started[1].round}.txt").read_text()
    assert any(v.verdict == "revise" for v in payloads(repo, slug, "code-review.verdict"))
    assert "leak.txt" not in repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Commit).tree

    # Nothing carries a fake: objects, notes, the proposal, the command's own output.
    objects = every_object(repo_path)
    assert len(objects) > 10_000
    assert leaked(fakes, objects) == []
    notes = run_cli(repo_path, "log", slug, "--json").stdout
    notes += subprocess.run(
        ["git", "log", "-p", "--notes=agentrun", f"agentrun/{slug}"],
        cwd=repo_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    forge = LocalForge(repo)
    number = payloads(repo, slug, "proposal.opened")[0].number
    proposal = forge.get(number)
    said = [proposal.title, proposal.body, *(c.body for c in proposal.comments)]
    assert len(said) > 2  # the proposal was commented on
    assert leaked(fakes, (notes + "\n".join(said)).encode()) == []
    for output in (first, answered, resumed):
        assert leaked(fakes, (output.stdout + output.stderr).encode()) == []
