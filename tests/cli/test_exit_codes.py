"""Exit codes a script can use (DESIGN §13, the README's table), from real processes."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pygit2
import pytest
from runner.helpers import (
    VENV_BIN,
    Background,
    cli_env,
    configure,
    only_slug,
    run_cli,
    session_started,
    wait_for_event,
)

from agentrun.commands.build import create_build
from agentrun.commands.control import abort
from agentrun.errors import EXIT_MEANINGS
from agentrun.events import BuildFailed
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

GOAL = "Add the app module"
QUESTION = "Which colour should the button be?"
ROOT = Path(__file__).resolve().parents[2]


def test_run_exits_4_when_the_build_parks(repo_path: Path) -> None:
    configure(repo_path, [{"phase": "implement", "verb": "escalate", "text": QUESTION}])
    done = run_cli(repo_path, "run", GOAL)
    assert done.returncode == 4, done.stderr
    assert f"question e1 (implement@1): {QUESTION}" in done.stdout


def test_run_and_resume_exit_7_at_the_time_limit_and_0_when_done(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [{"phase": "implement", "attempt": 1, "sleep": 60, "text": "slow"}])
    done = run_cli(repo_path, "run", GOAL, "--time-limit", "0.02")
    slug = only_slug(repo_path)
    assert done.returncode == 7, done.stdout + done.stderr
    assert done.stdout.splitlines()[-2:] == [
        f"build {slug}: stopped at implement@1",
        f"stopped at the time limit; continue with: git agentrun resume {slug}",
    ]
    resumed = run_cli(repo_path, "resume", slug, timeout=60)  # attempt 2 does not sleep
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.splitlines()[-2] == f"build {slug}: complete at done"
    again = run_cli(repo_path, "resume", slug)
    assert (again.returncode, again.stdout) == (0, f"build {slug} is complete; nothing to resume\n")


def test_run_exits_5_when_someone_pauses_the_build(repo_path: Path) -> None:
    # The pause lands at the end of the session, which runs long enough for it to arrive.
    configure(repo_path, [{"phase": "implement", "sleep": 8, "text": "slow"}])
    runner = Background(repo_path, "run", GOAL)
    try:
        slug = only_slug(repo_path)
        wait_for_event(repo_path, slug, session_started("implement"), "the implement session")
        paused = run_cli(repo_path, "pause", slug)
        assert paused.returncode == 0, paused.stderr
        code, out = runner.wait(timeout=60)
    finally:
        runner.stop()
    assert code == 5, out
    assert f"resume with: git agentrun resume {slug}" in out


def test_resume_of_an_aborted_or_failed_build_exits_6(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, [{"phase": "implement", "verb": "escalate", "text": QUESTION}])
    aborted = create_build(repo, GOAL).slug
    assert abort(repo, aborted).acknowledged
    failed = create_build(repo, "Another goal").slug
    log = EventLog(repo)
    log.append(failed, [Draft(BuildFailed(reason="set-up failed"))], log.tip(failed))
    for slug, word in ((aborted, "aborted"), (failed, "failed")):
        done = run_cli(repo_path, "resume", slug)
        assert (done.returncode, done.stdout) == (6, f"build {slug} is {word}; nothing to resume\n")


def test_ctrl_c_exits_130_and_the_build_shows_as_stopped(repo_path: Path) -> None:
    configure(repo_path, [{"phase": "implement", "sleep": 60, "text": "slow"}])
    runner = subprocess.Popen(
        [str(VENV_BIN / "git-agentrun"), "run", GOAL],
        cwd=repo_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        slug = only_slug(repo_path)
        wait_for_event(repo_path, slug, session_started("implement"), "the implement session")
        runner.send_signal(signal.SIGINT)
        out, _ = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    assert runner.returncode == 130, out
    listed = json.loads(run_cli(repo_path, "status", "--json").stdout)
    assert [(b["slug"], b["state"], b["runner"]) for b in listed["builds"]] == [
        (slug, "stopped", None)
    ]
    table = run_cli(repo_path, "status").stdout.splitlines()
    assert table[1].split()[:3] == [slug, "stopped", "implement@1"]


def test_every_crash_gets_a_trace_file_of_its_own(repo_path: Path, tmp_path: Path) -> None:
    """Two bugs in the same second leave two traces.

    The bug: a ``pygit2`` that raises when imported, first on PYTHONPATH.
    """
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "pygit2.py").write_text('raise RuntimeError("a bug planted by the test")\n')
    temp = tmp_path / "temp"
    temp.mkdir()
    named = []
    for _ in range(2):
        done = run_cli_env(repo_path, {"TMPDIR": str(temp), "PYTHONPATH": str(planted)}, "log", "x")
        assert done.returncode == 3
        prefix = "agentrun: internal error (a bug); the trace is in "
        assert done.stderr.startswith(prefix)
        named.append(done.stderr.removeprefix(prefix).strip())
    assert named[0] != named[1]
    assert sorted(str(p) for p in temp.iterdir()) == sorted(named)
    for path in named:
        assert "Traceback" in Path(path).read_text()


def run_cli_env(
    repo_path: Path, extra: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", *args],
        cwd=repo_path,
        env=cli_env(extra),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_readme_table_lists_every_exit_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Exit codes") :]
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
    cells = [row.split("|")[1].strip().strip("`") for row in rows]
    codes = [int(cell) for cell in cells if cell.isdigit()]
    assert codes == list(EXIT_MEANINGS)


@pytest.fixture(autouse=True)
def _no_agent_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENTRUN_BUILD", "AGENTRUN_PHASE", "AGENTRUN_SESSION"):
        monkeypatch.delenv(name, raising=False)


def test_follow_of_a_stopped_build_says_so_and_exits_7(repo_path: Path) -> None:
    configure(repo_path, [{"phase": "implement", "attempt": 1, "sleep": 60, "text": "slow"}])
    assert run_cli(repo_path, "run", GOAL, "--time-limit", "0.02").returncode == 7
    slug = only_slug(repo_path)

    followed = run_cli(repo_path, "log", slug, "--follow")

    assert followed.returncode == 7, followed.stderr
    assert followed.stderr == (
        f"build {slug} is stopped: no runner holds it; `git agentrun resume {slug}` continues it\n"
    )
    assert "phase.failed" in followed.stdout.splitlines()[-1]
