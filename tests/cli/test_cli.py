"""``git agentrun``: exact exit codes and output, with CliRunner and as a real subprocess."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner, Result
from runner.helpers import cli_env, configure, git, payloads, tip, types

from agentrun import __version__
from agentrun.cli.main import cli
from agentrun.commands.build import create_build, run_build
from agentrun.commands.init import template_text
from agentrun.events import (
    BuildPaused,
    BuildPauseRequested,
    EscalationRaised,
    ObservationRecorded,
)
from agentrun.kernel.draft import Draft
from agentrun.store.lease import acquire
from agentrun.store.log import EventLog

GOAL = "Add the app module"
SLUG = "add-the-app-module"
QUESTION = "Which colour should the button be?"
STEPS = [
    {"phase": "plan", "verb": "plan", "text": "1. Add src/app.py.\n"},
    {"phase": "implement", "write": {"src/app.py": "VALUE = 1\n"}, "text": "add the app"},
]
VERIFY = '[[verify]]\nname = "exists"\ncommand = "test -f src/app.py"\n'
AGENT_VARS = ("AGENTRUN_BUILD", "AGENTRUN_PHASE", "AGENTRUN_SESSION")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def user_error(result: Result, message: str) -> None:
    """Exit 1 with exactly one line, ``agentrun: <message>``, on stderr."""
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"agentrun: {message}\n"


@pytest.fixture
def here(repo_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(repo_path)
    for name in AGENT_VARS:
        monkeypatch.delenv(name, raising=False)
    return repo_path


def completed(repo_path: Path, repo: pygit2.Repository) -> str:
    configure(repo_path, STEPS, extra=VERIFY)
    slug = create_build(repo, GOAL).slug
    assert run_build(repo, slug).state.state_name == "complete"
    return slug


def parked(repo_path: Path, repo: pygit2.Repository, goal: str = GOAL) -> str:
    configure(repo_path, [{"phase": "implement", "verb": "escalate", "text": QUESTION}])
    slug = create_build(repo, goal).slug
    assert run_build(repo, slug).state.state_name == "parked"
    return slug


def refs(path: Path) -> str:
    return git(path, "for-each-ref", "--format=%(refname)")


# --- the basics ----------------------------------------------------------------


def test_version() -> None:
    result = invoke("--version")
    assert (result.exit_code, result.output) == (0, f"agentrun {__version__}\n")


def test_version_imports_no_heavy_module() -> None:
    heavy = {"pydantic", "pygit2", "httpx", "github", "gitlab"}
    code = (
        "import sys\n"
        "from agentrun.cli.main import cli\n"
        "try:\n"
        "    cli.main(['--version'], prog_name='git agentrun', standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(heavy)!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=cli_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"agentrun {__version__}", "[]"]


def test_init_writes_the_file_once(here: Path) -> None:
    path = Path(pygit2.Repository(str(here)).workdir) / ".agentrun.toml"

    first = invoke("init")

    assert (first.exit_code, first.stderr) == (0, "")
    assert first.stdout == (
        f'wrote {path}: configure a runtime in it, then `git agentrun run "GOAL"`\n'
    )
    assert path.read_text() == template_text()
    path.write_text("# my own\n")
    user_error(invoke("init"), f"{path} already exists: edit it, or pass --force to overwrite it")
    assert path.read_text() == "# my own\n"
    forced = invoke("init", "--force")
    assert forced.exit_code == 0
    assert path.read_text() == template_text()


def test_run_without_a_runtime_says_how_to_configure_one(here: Path) -> None:
    # Nothing configured and (in the test's environment) nothing that could be picked.
    result = invoke("run", "do something")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith("agentrun: no agent runtime is configured and none can run")
    assert "`git agentrun init`" in result.stderr
    assert result.stderr.count("\n") == 1
    assert "refs/agentrun" not in refs(here)


def test_run_prints_the_build_its_events_and_its_outcome(
    here: Path, repo: pygit2.Repository
) -> None:
    configure(here, STEPS, extra=VERIFY)
    base = git(here, "rev-parse", "HEAD")

    result = invoke("run", GOAL)

    assert (result.exit_code, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == f"build {SLUG} from main ({base[:10]})"
    assert lines[-2:] == [
        f"build {SLUG}: complete at done",
        "proposal #1 (ready for review): git agentrun pulls show 1",
    ]
    stored = EventLog(repo).read(SLUG)
    shown = [line.split()[3] for line in lines[1:-2]]
    assert shown == [s.event.type for s in stored][1:]


# --- status, log, show ---------------------------------------------------------------


def test_status_table_and_json(here: Path, repo: pygit2.Repository) -> None:
    assert invoke("status").stdout == 'no builds yet: `git agentrun run "GOAL"` starts one\n'
    done = completed(here, repo)
    waiting = parked(here, repo, "Paint the button")

    table = invoke("status")

    assert (table.exit_code, table.stderr) == (0, "")
    lines = table.stdout.splitlines()
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
    # The scripted agent answers without a model: tokens counted, no cost.
    assert [line.split()[:-3] for line in lines[1:]] == [
        [waiting, "parked", "implement@1", "1", "e1", "-"],
        [done, "complete", "done", "1", "-", "#1", "ready"],
    ]
    assert [line.split()[-2] for line in lines[1:]] == ["$0.0000", "$0.0000"]

    as_json = invoke("status", "--json")
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert data["schema"] == 1
    builds = {b["slug"]: b for b in data["builds"]}
    assert list(builds) == [waiting, done]
    fields = {
        "slug",
        "state",
        "phase",
        "round",
        "escalation",
        "proposal",
        "created_at",
        "updated_at",
        "usage",
        "runner",
    }
    for row in builds.values():
        assert fields <= set(row)
        assert datetime.fromisoformat(row["created_at"]) <= datetime.fromisoformat(
            row["updated_at"]
        )
        assert row["usage"]["tokens_in"] > 0
        assert row["runner"] is None
    assert {k: builds[done][k] for k in ("state", "phase", "round", "escalation")} == {
        "state": "complete",
        "phase": "done",
        "round": 1,
        "escalation": None,
    }
    assert builds[done]["proposal"] == {
        "forge": "local",
        "number": 1,
        "url": "agentrun:pulls/1",
        "ready": True,
        "closed": False,
        "merged": False,
    }
    assert builds[waiting]["state"] == "parked"
    assert builds[waiting]["escalation"] == {"id": "e1", "question": QUESTION, "phase": "implement"}
    assert builds[waiting]["proposal"] is None


def test_log_and_log_json(here: Path, repo: pygit2.Repository) -> None:
    slug = completed(here, repo)
    stored = EventLog(repo).read(slug)

    text = invoke("log", slug)

    assert (text.exit_code, text.stderr) == (0, "")
    lines = text.stdout.splitlines()
    lines, usage = lines[: len(stored)], lines[len(stored) :]
    assert usage[-1].startswith("total:    ") and usage[-1].endswith(", $0.0000")
    assert all(u.startswith("usage:    ") for u in usage[:-1])
    line = re.compile(
        r"^ *(\d+) \d\d:\d\d:\d\d ([0-9a-f]{8}) (\S+) +.*  \[(kernel|agent:\S+|human:\S+)\]$"
    )
    for shown, event in zip(lines, stored, strict=True):
        found = line.match(shown)
        assert found is not None, shown
        assert (int(found[1]), found[2], found[3]) == (
            event.event.seq,
            event.oid[:8],
            event.event.type,
        )

    as_json = invoke("log", slug, "--json")
    assert as_json.exit_code == 0
    data = json.loads(as_json.stdout)
    assert (data["schema"], data["slug"]) == (1, slug)
    assert [(e["commit"], e["seq"], e["type"]) for e in data["events"]] == [
        (s.oid, s.event.seq, s.event.type) for s in stored
    ]
    for envelope in data["events"]:
        assert {"commit", "v", "seq", "type", "ts", "actor", "writer", "payload"} <= set(envelope)
        assert envelope["payload"]["type"] == envelope["type"]


def test_show_detail_transcript_and_artifacts(here: Path, repo: pygit2.Repository) -> None:
    slug = completed(here, repo)
    session = next(
        p.session for p in payloads(repo, slug, "session.started") if p.phase == "implement"
    )

    detail = invoke("show", slug)

    assert (detail.exit_code, detail.stderr) == (0, "")
    lines = detail.stdout.splitlines()
    assert lines[:3] == [f"build:    {slug}", f"goal:     {GOAL}", "state:    complete at done"]
    assert "proposal: #1 agentrun:pulls/1" in lines
    assert "verify:   exists pass (attempt 1)" in lines
    artifacts = lines[-1].removeprefix("artifacts: ").split(", ")
    assert {"plan-r1.md", f"transcript-{session}.txt", "verify-exists-r1-a1.txt"} <= set(artifacts)

    transcript = invoke("show", slug, "--transcript", session)
    assert transcript.exit_code == 0
    assert transcript.stdout == (
        "[script] implement@1 attempt 1\n[script] wrote src/app.py\n[script] done recorded\n"
    )
    plan = invoke("show", slug, "--artifact", "plan-r1.md")
    assert (plan.exit_code, plan.stdout) == (0, "1. Add src/app.py.\n")
    report = invoke("show", slug, "--artifact", "verify-exists-r1-a1.txt")
    assert (report.exit_code, report.stdout) == (0, "$ test -f src/app.py\n\n[exit 0]\n")

    user_error(
        invoke("show", slug, "--transcript", "s-nope"),
        f"build {slug} has no transcript for session 's-nope': "
        f"`git agentrun log {slug}` lists its sessions",
    )
    missing = invoke("show", slug, "--artifact", "nope.md")
    assert missing.exit_code == 1
    assert missing.stderr.startswith(
        f"agentrun: build {slug} has no artifact 'nope.md' (artifacts: "
    )


# --- answer ------------------------------------------------------------------------------


def test_answer(here: Path, repo: pygit2.Repository) -> None:
    slug = parked(here, repo)

    ok = invoke("answer", slug, "Blue, please")

    assert (ok.exit_code, ok.stderr) == (0, "")
    assert ok.stdout == f"answered e1; run `git agentrun resume {slug}` to continue the build\n"
    answered = payloads(repo, slug, "escalation.answered")
    assert [(a.id, a.answer) for a in answered] == [("e1", "Blue, please")]
    before = tip(repo, slug)

    user_error(invoke("answer", slug, "Red"), f"build {slug} has no open escalation to answer")
    user_error(
        invoke("answer", slug, "Red", "--escalation", "e1"),
        f"escalation e1 of {slug} was already answered by {answered[0].by}: 'Blue, please'",
    )
    user_error(
        invoke("answer", slug, "Red", "--escalation", "e9"),
        f"build {slug} has no escalation 'e9' (escalations: e1)",
    )
    user_error(invoke("answer", slug, "  "), "the answer is empty: say what the agent should do")
    assert tip(repo, slug) == before


def test_answer_without_any_escalation(here: Path, repo: pygit2.Repository) -> None:
    slug = completed(here, repo)
    user_error(invoke("answer", slug, "hi"), f"build {slug} has no open escalation to answer")


def test_answer_with_several_open_escalations_needs_an_id(
    here: Path, repo: pygit2.Repository
) -> None:
    configure(here)
    slug = create_build(repo, GOAL).slug
    log = EventLog(repo)
    raised = [
        Draft(
            EscalationRaised(
                id=f"e{n}",
                phase="implement",
                round=1,
                source="policy",
                cause="attempts",
                question=f"question {n}",
            )
        )
        for n in (1, 2)
    ]
    log.append(slug, raised, log.tip(slug))
    before = tip(repo, slug)

    user_error(
        invoke("answer", slug, "go on"),
        f"build {slug} has several open escalations (e1, e2): pass --escalation ID",
    )
    assert tip(repo, slug) == before
    chosen = invoke("answer", slug, "go on", "--escalation", "e2")
    assert chosen.stdout == f"answered e2; run `git agentrun resume {slug}` to continue the build\n"
    assert [a.id for a in payloads(repo, slug, "escalation.answered")] == ["e2"]


# --- pulls ---------------------------------------------------------------------------


def test_pulls_and_pulls_show(here: Path, repo: pygit2.Repository) -> None:
    assert invoke("pulls").stdout == "no proposals yet\n"
    slug = completed(here, repo)

    listed = invoke("pulls")

    assert (listed.exit_code, listed.stderr) == (0, "")
    assert [line.split(maxsplit=4) for line in listed.stdout.splitlines()] == [
        ["#", "STATE", "HEAD", "BASE", "TITLE"],
        ["#1", "open", f"agentrun/{slug}", "main", GOAL],
    ]
    shown = invoke("pulls", "show", "1")
    assert shown.exit_code == 0
    lines = shown.stdout.splitlines()
    assert lines[:2] == [
        f"#1 {GOAL}",
        f"state: open   agentrun/{slug} -> main   agentrun:pulls/1",
    ]
    assert "commits (5):" in lines
    assert "comments (1):" in lines
    head = git(here, "rev-parse", f"agentrun/{slug}")
    assert f"  {head[:10]} verify:exists@1: exists pass (exit 0)" in lines
    user_error(invoke("pulls", "show", "7"), "no proposal #7: `git agentrun pulls` lists them")


# --- agent verbs -------------------------------------------------------------------------


def test_agent_verbs_outside_a_session(here: Path) -> None:
    message = (
        "agent verbs run inside an agentrun session: AGENTRUN_BUILD, AGENTRUN_PHASE and "
        "AGENTRUN_SESSION must be set (the runner sets them for the agent)"
    )
    for args in (["done"], ["approve"], ["escalate", "why?"], ["context"]):
        user_error(invoke("agent", *args), message)
    assert "refs/agentrun" not in refs(here)


def test_agent_verbs_that_do_not_fit(
    here: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(here)
    slug = create_build(repo, GOAL).slug
    before = tip(repo, slug)
    monkeypatch.setenv("AGENTRUN_BUILD", slug)
    monkeypatch.setenv("AGENTRUN_PHASE", "implement@1")
    monkeypatch.setenv("AGENTRUN_SESSION", "s-12345678")

    user_error(
        invoke("agent", "approve"),
        "`approve` does not fit phase implement; use one of: done, escalate",
    )
    user_error(
        invoke("agent", "pass"), "`pass` does not fit phase implement; use one of: done, escalate"
    )
    user_error(
        invoke("agent", "done"),
        f"session s-12345678 is not the open session of build {slug} (it ended or was "
        "abandoned); nothing recorded",
    )
    monkeypatch.setenv("AGENTRUN_PHASE", "implement")
    user_error(
        invoke("agent", "done"), "AGENTRUN_PHASE='implement' is not of the form <phase>@<round>"
    )
    assert tip(repo, slug) == before


# --- bad inputs: exit 1, one clear line, nothing changed ----------------------------------------


def test_outside_a_git_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    message = (
        f"{empty} is not inside a git repository: run this in a repository (or `git init` one)"
    )
    for args in (["status"], ["init"], ["run", GOAL], ["log", "x"], ["pulls"]):
        user_error(invoke(*args), message)
    assert list(empty.iterdir()) == []


def test_a_repository_without_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q", "-b", "main")
    configure(fresh, commit=False)
    monkeypatch.chdir(fresh)

    user_error(
        invoke("run", GOAL),
        "this repository has no commits yet: commit something first (a build starts from a commit)",
    )
    assert refs(fresh) == ""
    assert not (fresh / ".git" / "agentrun").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["log", "nope"],
        ["log", "--json", "nope"],
        ["show", "nope"],
        ["resume", "nope"],
        ["pause", "nope"],
        ["abort", "nope"],
        ["answer", "nope", "yes"],
    ],
)
def test_an_unknown_build(here: Path, repo: pygit2.Repository, args: list[str]) -> None:
    slug = completed(here, repo)
    before = refs(here), tip(repo, slug)
    user_error(invoke(*args), "no build named 'nope': `git agentrun status` lists the builds")
    assert (refs(here), tip(repo, slug)) == before


@pytest.mark.parametrize(
    ("extra", "where", "what"),
    [
        ("[policy]\nmax_attempts = 3\n", "policy.max_attempts", "unknown key"),
        (
            '[policy]\nmax_phase_attempts = "two"\n',
            "policy.max_phase_attempts",
            "Input should be a valid integer, unable to parse string as an integer",
        ),
        (
            '[policy]\nplan_approval = "people"\n',
            "policy.plan_approval",
            "Input should be 'agent' or 'human'",
        ),
        (
            '[[verify]]\nname = "t"\ncommand = "true"\npaths = "src/**"\n',
            "verify.0.paths",
            'expects an array of strings, not a string: write paths = ["src/**"]',
        ),
    ],
)
def test_a_bad_config(here: Path, extra: str, where: str, what: str) -> None:
    configure(here, extra=extra)
    path = Path(pygit2.Repository(str(here)).workdir) / ".agentrun.toml"
    user_error(invoke("run", GOAL), f"{path} at `{where}`: {what}")
    assert "refs/agentrun" not in refs(here)


def test_a_misspelled_role_or_runtime_on_the_command_line(here: Path) -> None:
    configure(here)
    user_error(
        invoke("run", GOAL, "--role", "implment=scripted"),
        "--role implment=scripted: no role 'implment': did you mean 'implement'? (roles: "
        "default, plan, plan-review, implement, code-review, verify, finalize, reconcile, select)",
    )
    user_error(
        invoke("run", GOAL, "--role", "implement=scriptd"),
        "--role implement=scriptd: no runtime 'scriptd': did you mean 'scripted'? (configure "
        "[runtimes.scriptd], or use one of: scripted, claude, codex, aider, openai, anthropic)",
    )
    assert "refs/agentrun" not in refs(here)


def test_a_runtime_misspelled_in_roles_default_is_named_there(here: Path) -> None:
    configure(here, base='[roles]\ndefault = ["nosuch"]\n')
    path = Path(pygit2.Repository(str(here)).workdir) / ".agentrun.toml"
    result = invoke("run", GOAL)
    assert result.stderr.startswith(f"agentrun: {path} at `roles.default`: no runtime 'nosuch'")
    assert result.exit_code == 1


def append_by_hand(repo_path: Path, slug: str, message: str) -> str:
    """A commit on the build's log made with the git CLI, not through agentrun."""
    ref = f"refs/agentrun/builds/{slug}"
    old = git(repo_path, "rev-parse", ref)
    tree = git(repo_path, "hash-object", "-t", "tree", "-w", "/dev/null")
    new = git(repo_path, "commit-tree", tree, "-p", old, "-m", message)
    git(repo_path, "update-ref", ref, new, old)
    return new


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("garbage without a body", "is not an agentrun event: no JSON body"),
        (
            'mystery.event: what\n\n{"v": 1, "seq": 27, "type": "mystery.event", "payload": {}}',
            "holds an unknown event type 'mystery.event'",
        ),
        (
            'build.failed: x\n\n{"v": 1, "seq": 27, "type": "build.failed", '
            '"ts": "2026-01-01T00:00:00Z", "actor": {"kind": "kernel"}, "writer": "me", '
            '"payload": {}}',
            "holds a malformed build.failed event: payload.build.failed.reason: Field required",
        ),
    ],
)
def test_a_bad_event_in_the_log_is_named(
    here: Path, repo: pygit2.Repository, message: str, problem: str
) -> None:
    slug = completed(here, repo)
    bad = append_by_hand(here, slug, message)
    before = refs(here), tip(repo, slug)

    for args in (["log", slug], ["resume", slug]):
        user_error(invoke(*args), f"commit {bad[:12]} {problem}")
    # status still lists what it can read, and names the build it cannot, with exit 1.
    listed = invoke("status")
    assert (listed.exit_code, listed.stdout) == (1, "")
    assert listed.stderr == f"agentrun: build {slug} cannot be read: commit {bad[:12]} {problem}\n"
    assert (refs(here), tip(repo, slug)) == before


def test_a_second_runner_on_a_build_with_a_live_lease(here: Path, repo: pygit2.Repository) -> None:
    """Not now (exit 7): the build is running; a paused one gets the resume request."""
    configure(here)
    slug = create_build(repo, GOAL).slug
    lease = acquire(repo, slug, holder="r-elsewhere")
    try:
        before = tip(repo, slug)
        result = invoke("resume", slug)
        assert (result.exit_code, result.stderr) == (7, "")
        expires = f"{lease.info.expires_at:%Y-%m-%d %H:%M:%S}"
        held = (
            f"build {slug} is being run by r-elsewhere on {socket.gethostname()} "
            f"(pid {lease.info.pid}); its lease expires at {expires} UTC. Wait for it, or stop "
            "that runner.\n"
        )
        assert result.stdout == held
        assert tip(repo, slug) == before
        assert types(repo, slug) == ["build.created"]

        log = EventLog(repo)
        log.append(slug, [Draft(BuildPauseRequested()), Draft(BuildPaused())], log.tip(slug))
        paused = invoke("resume", slug)
        assert (paused.exit_code, paused.stderr) == (7, "")
        assert paused.stdout == held + (
            f"resume requested: the runner of {slug} acts on it at its next safe step\n"
        )
        assert types(repo, slug)[-1] == "build.resume-requested"
    finally:
        lease.release()


# --- the demo, as a user runs it -------------------------------------------------------------


def test_demo(tmp_path: Path) -> None:
    """The timeline once, then the branch, the fix's diff, the proposal and what to do next;
    nothing is left in the user's cache or temporary folder."""
    cache, temp = tmp_path / "cache", tmp_path / "temp"
    cache.mkdir()
    temp.mkdir()
    done = subprocess.run(
        ["git", "agentrun", "demo"],
        cwd=tmp_path,
        env=cli_env({"XDG_CACHE_HOME": str(cache), "TMPDIR": str(temp)}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    slug = "fix-the-off-by-one-in-pager-py"
    for heading in (
        f"== timeline of {slug} ==",
        f"== build branch agentrun/{slug} ==",
        f"== the fix (git diff main..agentrun/{slug}) ==",
        "== proposal ==",
        "#1 Fix the off-by-one in pager.py",
        "== next: in your own repository ==",
    ):
        assert lines.count(heading) == 1, heading
    timeline = lines[lines.index(f"== timeline of {slug} ==") + 1 :]
    assert timeline[0].split()[3] == "build.created"
    kinds = [line.split()[3] for line in lines if re.match(r"\s*\d+ \d\d:\d\d:\d\d ", line)]
    assert kinds.count("build.created") == kinds.count("build.completed") == 1  # shown once
    branch = lines[lines.index(f"== build branch agentrun/{slug} ==") + 1 :]
    assert branch[0].split()[1].startswith("plan@1:")
    fix = lines[lines.index(f"== the fix (git diff main..agentrun/{slug}) ==") + 1 :]
    assert "-    return total_items // per_page" in fix
    assert "+    return (total_items + per_page - 1) // per_page" in fix
    assert f"demo build {slug}: complete" in lines
    steps = lines[lines.index("== next: in your own repository ==") + 1 :]
    assert [line.split()[:3] for line in steps] == [
        ["git", "agentrun", "init"],
        ["git", "agentrun", "doctor"],
        ["git", "agentrun", "run"],
    ]
    assert list(cache.iterdir()) == [] and list(temp.iterdir()) == []


def test_a_reader_that_stops_early_is_not_a_bug(here: Path, repo: pygit2.Repository) -> None:
    """`git agentrun log SLUG | head -1`: the closed pipe ends the command quietly."""
    slug = completed(here, repo)
    # More than a pipe holds (64 KiB), so that the writer really meets the closed pipe.
    log = EventLog(repo)
    notes = [Draft(ObservationRecorded(phase="x", text="y" * 100)) for _ in range(1000)]
    log.append(slug, notes, log.tip(slug))
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"git agentrun log {slug} | head -1"],
        cwd=here,
        env=cli_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split()[3] == "build.created"
