"""A runner killed right after ``build.completed`` leaves its lease: resume and sweep remove it.

The lease is taken by a real process that then dies without releasing it, the way a kill
after the last event leaves it; a lease whose holder still runs is never removed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pygit2
from conftest import git
from runner.helpers import run_cli
from upgrade.test_bundles import unbundle

from agentrun.store.lease import lease_ref

BUNDLE = Path(__file__).parents[1] / "upgrade" / "v0.1.0.bundle"
DONE = "round-up-the-open-page-count"
TAKE = """
import sys, time
import pygit2
from agentrun.store.lease import acquire
acquire(pygit2.Repository(sys.argv[1]), sys.argv[2], holder="r-killed", ttl=3600)
print("held", flush=True)
if sys.argv[3] == "stay":
    time.sleep(600)
"""


def take_lease(repo: Path, slug: str, stay: bool = False) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", TAKE, str(repo), slug, "stay" if stay else "die"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    if not stay:
        proc.wait(timeout=30)
    return proc


def has_lease(repo: Path, slug: str) -> bool:
    return lease_ref(slug) in pygit2.Repository(str(repo)).references


def test_resume_removes_a_dead_runner_s_lease_on_a_finished_build(tmp_path: Path) -> None:
    repo = unbundle(BUNDLE, tmp_path / "repo")
    take_lease(repo, DONE)
    assert has_lease(repo, DONE)
    done = run_cli(repo, "resume", DONE)
    assert done.returncode == 0, done.stderr
    assert "nothing to resume" in done.stdout
    assert not has_lease(repo, DONE)


def test_sweep_removes_it_too_but_never_a_live_holder_s(tmp_path: Path) -> None:
    repo = unbundle(BUNDLE, tmp_path / "repo")
    take_lease(repo, DONE)
    live = take_lease(repo, "ask-before-refusing-empty-pages", stay=True)
    try:
        done = run_cli(repo, "sweep")
        assert done.returncode == 0, done.stderr
        assert not has_lease(repo, DONE)
        assert has_lease(repo, "ask-before-refusing-empty-pages")
    finally:
        live.kill()
        live.wait()


def test_resume_with_a_remote_removes_the_stale_lease_there(tmp_path: Path) -> None:
    repo = unbundle(BUNDLE, tmp_path / "repo")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", origin.as_uri())
    git(repo, "push", "-q", "origin", "+refs/*:refs/*")
    take_lease(repo, DONE)
    git(repo, "push", "-q", "origin", f"{lease_ref(DONE)}:{lease_ref(DONE)}")
    git(repo, "update-ref", "-d", lease_ref(DONE))
    assert has_lease(origin, DONE)

    done = run_cli(repo, "resume", "--remote", "origin", DONE)

    assert done.returncode == 0, done.stderr
    assert not has_lease(origin, DONE)
    assert not has_lease(repo, DONE)


def test_gc_removes_a_finished_build_s_stale_lease_and_an_archived_build_s_folders(
    tmp_path: Path,
) -> None:
    repo = unbundle(BUNDLE, tmp_path / "repo")
    take_lease(repo, DONE)  # complete, proposal open: not archived
    parked = "ask-before-refusing-empty-pages"
    assert run_cli(repo, "answer", parked, "yes").returncode == 0
    resumed = run_cli(repo, "resume", parked)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    common = Path(pygit2.Repository(str(repo)).path)
    private = common / "agentrun" / "gitdirs" / parked
    assert private.is_dir()  # the worktree's private git dir
    home = common / "agentrun" / "homes" / parked
    (home / "tmp").mkdir(parents=True)  # as isolation leaves it
    number = next(
        line.split()[0].lstrip("#")
        for line in run_cli(repo, "pulls").stdout.splitlines()
        if f"agentrun/{parked}" in line
    )
    assert run_cli(repo, "pulls", "merge", number).returncode == 0

    done = run_cli(repo, "gc")

    assert done.returncode == 0, done.stderr
    assert not has_lease(repo, DONE)
    assert not private.exists() and not home.exists()
    assert f"removed git dir {private}" in done.stdout
