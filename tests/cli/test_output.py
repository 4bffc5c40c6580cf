"""Output that never stops a build, and progress a CI log can follow."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pygit2
from runner.helpers import VENV_BIN, cli_env, configure, run_cli

GOAL = "Add the app module"
SLUG = "add-the-app-module"
STEPS = [
    {"phase": "plan", "verb": "plan", "text": "1. Add app.py.\n", "say": "reading the tree"},
    {"phase": "implement", "write": {"app.py": "VALUE = 1\n"}, "text": "add the app"},
]


def closed_pipe() -> int:
    """The write end of a pipe whose reader has gone, as after `| head -1`."""
    read, write = os.pipe()
    os.close(read)
    return write


def built(repo_path: Path) -> list[tuple[str, str]]:
    listed = json.loads(run_cli(repo_path, "status", "--json").stdout)
    return [(b["slug"], b["state"]) for b in listed["builds"]]


def test_a_closed_stdout_does_not_stop_the_build(repo_path: Path, repo: pygit2.Repository) -> None:
    configure(repo_path, STEPS)
    out = closed_pipe()
    try:
        done = subprocess.run(
            ["git", "agentrun", "run", GOAL],
            cwd=repo_path,
            env=cli_env(),
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(out)
    assert (done.returncode, done.stderr) == (0, "")
    assert built(repo_path) == [(SLUG, "complete")]
    spilled = (Path(repo.path) / "agentrun" / "logs" / f"{SLUG}.log").read_text()
    lines = spilled.splitlines()
    assert lines[0].startswith(f"build {SLUG} from main (")
    assert lines[-2:] == [
        f"build {SLUG}: complete at done",
        "proposal #1 (ready for review): git agentrun pulls show 1",
    ]


def test_closed_stdout_and_stderr_do_not_stop_a_build_that_parks(repo_path: Path) -> None:
    configure(repo_path, [{"phase": "implement", "verb": "escalate", "text": "Which one?"}])
    out, err = closed_pipe(), closed_pipe()
    try:
        done = subprocess.run(
            ["git", "agentrun", "run", GOAL], cwd=repo_path, env=cli_env(), stdout=out, stderr=err
        )
    finally:
        os.close(out)
        os.close(err)
    assert done.returncode == 4
    assert built(repo_path) == [(SLUG, "parked")]


def test_a_closed_descriptor_does_not_stop_the_build(repo_path: Path) -> None:
    configure(repo_path, STEPS)
    done = subprocess.run(
        ["bash", "-c", f"exec >&- 2>&-; git agentrun run {GOAL!r}"],
        cwd=repo_path,
        env=cli_env(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert built(repo_path) == [(SLUG, "complete")]


def test_a_quiet_session_still_prints_a_line_in_a_ci_log(repo_path: Path) -> None:
    """Off a terminal: a line at least every AGENTRUN_PROGRESS_SECONDS while work runs."""
    configure(
        repo_path,
        [
            {"phase": "plan", "verb": "plan", "text": "1. Add app.py.\n", "say": "planning"},
            {
                "phase": "implement",
                "say": "writing app.py",
                "sleep": 3,
                "text": "add the app",
                "write": {"app.py": "print('app')\n"},
            },
        ],
        extra='[[verify]]\nname = "slow"\ncommand = "echo checking-now; sleep 3"\n',
    )
    done = subprocess.run(
        ["git", "agentrun", "run", GOAL],
        cwd=repo_path,
        env=cli_env({"AGENTRUN_PROGRESS_SECONDS": "1"}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    beats = [line for line in done.stdout.splitlines() if " running for " in line]
    implement = [line for line in beats if line.split()[0] == "implement@1"]
    assert len(implement) >= 2, done.stdout
    # Each beat shows the session's latest output: what it printed while it worked, then,
    # on a loaded machine, the verb it ended with, while the runner closes the session.
    said = [re.fullmatch(r"\s+implement@1 running for 0:0\d: (.+)", line) for line in implement]
    outputs = [m.group(1) if m else line for m, line in zip(said, implement, strict=True)]
    working = [o for o in outputs if o == "writing app.py"]
    assert len(working) >= 2 and outputs[: len(working)] == working, done.stdout
    assert set(outputs[len(working) :]) <= {"done recorded"}, done.stdout
    assert not any("planning" in line for line in implement)
    check = [line for line in beats if line.split()[0] == "verify:slow@1"]
    assert check and check[-1].endswith(": checking-now"), done.stdout


def test_the_live_line_shows_the_current_sessions_output(repo_path: Path) -> None:
    """On a terminal: once the next session starts, the previous one's line is gone."""
    configure(
        repo_path,
        [
            {
                "phase": "plan",
                "verb": "plan",
                "text": "1. Add app.py.\n",
                "say": "OLD-LINE",
                "sleep": 1,
            },
            {"phase": "plan-review", "verb": "approve", "sleep": 2},
            {"phase": "implement", "write": {"app.py": "VALUE = 1\n"}, "text": "add the app"},
        ],
    )
    screen = _on_a_terminal(repo_path, [str(VENV_BIN / "git-agentrun"), "run", GOAL])
    start = screen.index("plan-review@1 on scripted")
    shown = re.findall(r"running · plan@1  \d+:\d\d  ([^\r\n]+)", screen[:start])
    assert "OLD-LINE" in shown
    during = screen[start : screen.index("plan-review.verdict")]
    assert "running · plan-review@1  0:01" in during
    for line in shown:  # the plan session's lines, its last one too, are gone
        assert line not in during


def _on_a_terminal(cwd: Path, argv: list[str]) -> str:
    """Everything a terminal would have been sent, escape codes stripped."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal for stdout and stderr
        os.chdir(cwd)
        env = cli_env({"COLUMNS": "200", "TERM": "xterm"})
        os.execve(argv[0], argv, env)
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            break  # the child closed the terminal
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
