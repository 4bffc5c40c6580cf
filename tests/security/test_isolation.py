"""[isolation]: the level in force and why, CI's fail-fast, what isolated programs see,
and that budgets, Ctrl-C and the private git dir keep working under isolation."""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pygit2
import pytest
from runner.helpers import SCRIPT, Background, cli_env, configure, git, payloads, wait_for
from runtimes.test_cli_runtimes import (
    assert_whole_build,
    build_script,
    claude_shell,
    claude_table,
    claude_write,
    implement_sessions,
    run_with,
    tool_agent,
    transcript,
)
from security.ci_run import run_build
from support.model_server import ModelServer

from agentrun import procs
from agentrun.config import Isolation, parse_config
from agentrun.errors import ConfigError
from agentrun.isolation import gitdir, resolve, sandbox
from agentrun.runner.workspace import Workspace
from agentrun.runtimes.base import SessionControl, SessionSpec
from agentrun.runtimes.tools import Toolbox
from agentrun.store.log import EventLog

ISOLATED = ("namespace", "user")


def agentrun(
    repo_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", *args],
        cwd=repo_path,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- the level in force -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[isolation]\nmode = "chroot"\n', "isolation.mode"),
        ('[isolation]\nuser = "Root Account"\n', "isolation.user"),
        ("[isolation]\nlevel = 1\n", "isolation.level"),
    ],
)
def test_a_bad_isolation_setting_names_its_key(text: str, where: str) -> None:
    with pytest.raises(ConfigError, match=rf"^x\.toml at `{where}`: "):
        parse_config(text, "x.toml")


def test_isolation_defaults_to_auto_and_the_agentrun_agent_account() -> None:
    config = parse_config("", "x.toml")
    assert (config.isolation.mode, config.isolation.user) == ("auto", "agentrun-agent")


def isolation_line(repo_path: Path, env: dict[str, str] | None = None) -> str:
    done = agentrun(repo_path, "doctor", env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("isolation: ")]
    assert len(lines) == 1, done.stdout + done.stderr
    return lines[0]


def test_doctor_shows_the_level_in_force_and_why(repo_path: Path) -> None:
    configure(repo_path, [])
    assert isolation_line(repo_path) == (
        "isolation: none (auto: not on GitHub Actions or GitLab CI (GITHUB_ACTIONS, GITLAB_CI))"
    )
    assert isolation_line(repo_path, {"CI": "true"}).startswith("isolation: none (auto: ")
    for variable in ("GITHUB_ACTIONS", "GITLAB_CI"):
        assert isolation_line(repo_path, {variable: "true"}) == (
            f"isolation: namespace (auto ({variable}=true): bubblewrap works (/usr/bin/bwrap))"
        )
    configure(repo_path, [], extra='[isolation]\nmode = "user"\n')
    assert isolation_line(repo_path) == (
        "isolation: user (configured; agents run as the unprivileged account agentrun-agent "
        "(as root))"
    )


def no_sandbox_path(tmp_path: Path) -> str:
    """A PATH with git and this venv but neither bwrap nor setpriv nor setfacl."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to("/usr/bin/git")
    return f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}"


def test_ci_asking_for_isolation_that_is_impossible_fails_at_once(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    configure(repo_path, [])
    env = {"GITHUB_ACTIONS": "true", "PATH": no_sandbox_path(tmp_path)}
    done = agentrun(repo_path, "run", "add a file", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("agentrun: GITHUB_ACTIONS=true asks for isolation and none is possible")
    assert 'set [isolation] mode = "none" in .agentrun.toml to accept the risk' in line
    assert list(EventLog(repo).slugs()) == []  # nothing was created
    doctor = agentrun(repo_path, "doctor", env=env)
    assert doctor.returncode == 1
    assert "isolation: impossible: GITHUB_ACTIONS=true asks for isolation" in doctor.stdout
    # The explicit way to accept the risk.
    configure(repo_path, [], extra='[isolation]\nmode = "none"\n')
    accepted = agentrun(repo_path, "run", "add a file", env=env)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr


def test_a_level_asked_for_by_name_is_never_downgraded(repo_path: Path, tmp_path: Path) -> None:
    configure(repo_path, [], extra='[isolation]\nmode = "namespace"\n')
    done = agentrun(repo_path, "run", "add a file", env={"PATH": no_sandbox_path(tmp_path)})
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'agentrun: [isolation] mode = "namespace" is not possible here: bwrap not found '
        "(install bubblewrap: apt-get install bubblewrap)"
    )


def test_the_runner_makes_itself_non_dumpable() -> None:
    code = textwrap.dedent(
        """
        import ctypes
        from agentrun.isolation.dumpable import make_undumpable
        def is_dumpable():
            return ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) != 0  # PR_GET_DUMPABLE
        before = is_dumpable()
        print(before, make_undumpable(), is_dumpable())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True", "False"]


# --- what isolated programs see -----------------------------------------------------

CHECK = (
    'echo "uid=$(id -u) pids=$(ls /proc | grep -c "^[0-9]")"; '
    'if touch "$AGENTRUN_GIT_DIR/probe" 2>/dev/null; then echo GIT-WRITABLE; '
    "else echo GIT-READONLY; fi; "
    'touch "$HOME/home-ok" && touch /tmp/tmp-ok && echo WROTE-OWN'
)


@pytest.mark.parametrize("mode", ISOLATED)
def test_a_check_command_runs_isolated_like_the_agent(
    repo_path: Path, repo: pygit2.Repository, mode: str
) -> None:
    extra = f'[[verify]]\nname = "look"\ncommand = {json.dumps(CHECK)}\n'
    configure(repo_path, [], extra=extra + f'\n[isolation]\nmode = "{mode}"\n')
    done = agentrun(repo_path, "run", "add a file")
    assert done.returncode == 0, done.stdout + done.stderr
    (slug,) = EventLog(repo).slugs()
    (verdict,) = payloads(repo, slug, "verify.completed")
    report = EventLog(repo).text(EventLog(repo).tip_oid(slug) or "", verdict.report) or ""
    assert verdict.outcome == "pass", report
    assert "GIT-READONLY" in report and "WROTE-OWN" in report
    assert not (Path(repo.path) / "probe").exists()
    seen = re.search(r"^uid=(\d+) pids=(\d+)$", report, re.MULTILINE)
    assert seen is not None, report
    uid, pids = int(seen[1]), int(seen[2])
    if mode == "namespace":
        assert pids < 10, report  # a fresh /proc: bwrap, bash and its own children only
    else:
        assert uid == pwd.getpwnam("agentrun-agent").pw_uid


HANG = """\
import os, subprocess, sys, time
sys.stdin.read()
marked = "import time; time.sleep(300)"
subprocess.Popen([sys.executable, "-c", marked, "agentrun-isolation-test"])
print("agent: hanging", flush=True)
time.sleep(300)
"""


def hanging(repo_path: Path, mode: str, budget: float = 300) -> None:
    """Implement runs a committed agent that starts ``sleep 300`` and sleeps itself."""
    (repo_path / "tools").mkdir(exist_ok=True)
    (repo_path / "tools" / "hang.py").write_text(HANG)
    git(repo_path, "add", "tools/hang.py")
    extra = f"""\
[runtimes.hang]
kind = "command"
command = [{json.dumps(sys.executable)}, "tools/hang.py"]

[policy]
session_budget_seconds = {budget}
max_phase_attempts = 1

[isolation]
mode = "{mode}"
"""
    roles = '[roles]\ndefault = ["scripted"]\nimplement = ["hang"]\n\n'
    scripted = f'[runtimes.scripted]\nkind = "script"\nscript = "{SCRIPT}"\n'
    configure(repo_path, [], extra=extra, base=roles + scripted)


def left_over() -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if "agentrun-isolation-test" in (proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found


@pytest.mark.parametrize("mode", ISOLATED)
def test_an_isolated_session_past_its_budget_is_ended_whole(
    repo_path: Path, repo: pygit2.Repository, mode: str
) -> None:
    hanging(repo_path, mode, budget=3)
    done = agentrun(repo_path, "run", "add a file")
    (slug,) = EventLog(repo).slugs()
    ended = [p for p in payloads(repo, slug, "session.ended") if p.outcome == "timeout"]
    assert len(ended) == 1, done.stdout + done.stderr
    assert "ran past its budget of 3s" in (ended[0].error or "")
    assert left_over() == []


@pytest.mark.parametrize("mode", ISOLATED)
def test_ctrl_c_ends_an_isolated_agent_and_its_children(
    repo_path: Path, repo: pygit2.Repository, mode: str
) -> None:
    hanging(repo_path, mode)
    runner = Background(repo_path, "run", "add a file")
    try:
        wait_for(lambda: left_over() != [], "the isolated agent's child")
        # Ctrl-C reaches the runner (`git` only waits for `git-agentrun`, its child).
        (agentrun_process,) = psutil.Process(runner.proc.pid).children()
        agentrun_process.send_signal(signal.SIGINT)
        code, out = runner.wait()
    finally:
        runner.stop()
    assert code == 130, out
    deadline = time.monotonic() + 10
    while left_over() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_over() == []
    (slug,) = EventLog(repo).slugs()
    assert [p.outcome for p in payloads(repo, slug, "session.ended")][-1] == "interrupted"


# --- the private git dir ------------------------------------------------------------


def test_a_reset_private_git_dir_keeps_nothing_an_agent_planted(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    private = gitdir.path_of(repo, "b")
    head = str(repo.head.target)
    gitdir.reset(repo, private, worktree, "refs/heads/agentrun/b", head)
    outside = tmp_path / "outside"
    outside.mkdir()
    (private / "hooks").mkdir()
    (private / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch pwned\n")
    (private / "config").write_text("[core]\n\tfsmonitor = touch pwned\n")
    (private / "index").unlink(missing_ok=True)
    (private / "index").symlink_to(outside / "index")
    (private / "objects" / "ab").symlink_to(outside)
    (worktree / ".git").write_text(f"gitdir: {repo.path}\n")

    gitdir.rearm(repo, private, worktree)

    assert not (private / "hooks").exists()
    assert "fsmonitor" not in (private / "config").read_text()
    assert not (private / "index").is_symlink() and not (private / "objects" / "ab").exists()
    assert (worktree / ".git").read_text() == f"gitdir: {private}\n"
    git(worktree, "reset", "-q", "--hard", head)
    assert sorted(os.listdir(outside)) == []
    assert git(worktree, "rev-parse", "--absolute-git-dir") == str(private)
    assert (worktree / "README.md").read_text() == "hello\n"


def test_auto_under_github_actions_isolates_a_real_build(tmp_path: Path) -> None:
    """``mode = "auto"`` with GITHUB_ACTIONS=true: the hostile agent is contained too."""
    run = run_build(tmp_path, "auto")
    assert run.code == 0, run.output
    assert run.found("pids").split() == [b"1", b"2"]  # bwrap and the agent: a fresh /proc
    assert run.attacks()["delete-log"]["ok"] is False


# --- a real agent CLI, isolated ------------------------------------------------------


@pytest.mark.parametrize("mode", ISOLATED)
def test_claude_code_runs_a_whole_build_isolated_and_resumes_its_session(
    repo_path: Path, repo: pygit2.Repository, mode: str
) -> None:
    """Claude Code's Bash tool, its verbs and its session resume work in the sandbox:
    its sessions live in the per-build HOME, kept across the build's sessions."""
    script = build_script(claude_shell, claude_write)
    script["implement@1"].insert(0, (claude_shell("ls /proc | grep -c '^[0-9]' > procs.txt"),))
    with ModelServer(tool_agent(script)) as server:
        tables = {"claude": claude_table(server.url)}
        roles = f'[isolation]\nmode = "{mode}"\n\n[roles]\ndefault = ["claude"]\n'
        slug, outcome = run_with(repo_path, repo, tables, roles)

    assert_whole_build(repo_path, repo, slug, outcome)
    first, second = implement_sessions(repo, slug)
    said = transcript(repo, slug, second.session)
    assert f"continuing Claude Code session {first.runtime_session_id}" in said
    assert "done queued in .agentrun/run/outbox/" in said  # the log is read-only in there
    home = Path(repo.path) / "agentrun" / "homes" / slug / ".claude" / "projects"
    assert list(home.rglob(f"{first.runtime_session_id}.jsonl")) != []
    procs_seen = int(git(repo_path, "show", f"agentrun/{slug}:procs.txt"))
    if mode == "namespace":
        assert procs_seen < 20  # only the sandbox's own processes


@pytest.mark.parametrize("mode", ISOLATED)
def test_the_shell_tool_of_the_api_runtimes_runs_isolated(
    repo_path: Path, repo: pygit2.Repository, mode: str
) -> None:
    workspace = Workspace(repo, "shell-build", "agentrun/shell-build")
    worktree = workspace.prepare(str(repo.head.target))
    level = resolve(Isolation.model_validate({"mode": mode}))
    box = sandbox(level, repo, "shell-build", worktree)
    spec = SessionSpec(
        session="s-1",
        build="shell-build",
        phase="implement",
        round=1,
        attempt=1,
        role="implement",
        prompt="",
        workdir=worktree,
        env={"PATH": os.environ["PATH"]},
        budget_seconds=60,
        repo_root=repo_path,
        sandbox=box,
        git_dir=Path(repo.path),
    )
    tools = Toolbox(spec, SessionControl(), True, dict(spec.env))
    result = tools.call("shell", {"command": CHECK})
    assert result.text.startswith("exit status 0\n"), result.text
    assert "GIT-READONLY" in result.text and "WROTE-OWN" in result.text
    seen = re.search(r"^uid=(\d+) pids=(\d+)$", result.text, re.MULTILINE)
    assert seen is not None, result.text
    if mode == "namespace":
        assert int(seen[2]) < 10
    else:
        assert int(seen[1]) == pwd.getpwnam("agentrun-agent").pw_uid
    assert (worktree / "README.md").read_text() == "hello\n"


LOGINS = {
    ".claude/.credentials.json": '{"claudeAiOauth": "login"}',
    ".codex/auth.json": '{"OPENAI_API_KEY": "login"}',
    ".aider.conf.yml": "model: x\n",
    ".claude.json": '{"numStartups": 1}',
}
SECRETS = {".git-credentials": "https://x:token@github.com\n", ".ssh/id_ed25519": "key\n"}


@pytest.mark.parametrize("mode", ISOLATED)
def test_only_the_agent_clis_own_login_files_reach_the_per_build_home(
    repo_path: Path, repo: pygit2.Repository, mode: str
) -> None:
    real_home = Path(os.environ["HOME"])
    for name, text in {**LOGINS, **SECRETS}.items():
        (real_home / name).parent.mkdir(parents=True, exist_ok=True)
        (real_home / name).write_text(text)
        (real_home / name).chmod(0o600 if name in SECRETS else 0o644)
    workspace = Workspace(repo, "home-build", "agentrun/home-build")
    worktree = workspace.prepare(str(repo.head.target))
    box = sandbox(resolve(Isolation.model_validate({"mode": mode})), repo, "home-build", worktree)
    assert box is not None
    look = "; ".join(
        [f'cat "$HOME/{name}" 2>/dev/null || echo "missing {name}"' for name in LOGINS]
        + [f'cat "$HOME/{n}" "{real_home}/{n}" 2>/dev/null || echo "hidden {n}"' for n in SECRETS]
        + ['echo changed >> "$HOME/.codex/auth.json" 2>/dev/null || echo "auth read-only"']
    )
    done = procs.run_tree(
        ["sh", "-c", look], cwd=worktree, env={"PATH": os.environ["PATH"]}, timeout=30, sandbox=box
    )
    for text in LOGINS.values():
        assert text in done.output
    assert "hidden .git-credentials" in done.output and "hidden .ssh/id_ed25519" in done.output
    assert "token@github.com" not in done.output
    if mode == "namespace":
        assert "auth read-only" in done.output  # bound read-only, not copied
    assert (real_home / ".codex/auth.json").read_text() == LOGINS[".codex/auth.json"]
    assert box.home == (Path(repo.path) / "agentrun" / "homes" / "home-build").resolve()
