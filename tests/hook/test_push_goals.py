"""Goals from a push: ``Agentrun-Goal`` trailers through the installed hook, real pushes to
a bare ``file://`` remote, and ``git agentrun sweep`` running the builds elsewhere."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pygit2
import pytest
from hook.hookrepo import Clone, make_clone
from runner.helpers import cli_env, configure, git

from agentrun.events import BuildCreated
from agentrun.store.log import EventLog

SYSTEM_PATH = "/usr/bin:/bin"  # git and sh, and no git-agentrun
STARTED = re.compile(
    r"^agentrun: build (\S+) started for the goal of commit (\w+) on (\S+); ", re.M
)
REFUSE_MAIN = """#!/bin/sh
while read -r old new ref; do
    case "$ref" in refs/heads/main) echo "main is frozen" >&2; exit 1 ;; esac
done
"""


@pytest.fixture
def clone(tmp_path: Path) -> Clone:
    """The hook installed, main pushed with a scripted runtime configured."""
    made = make_clone(tmp_path)
    configure(made.path, [])
    assert made.push("-q", "origin", "main").returncode == 0
    return made


def goal_commit(clone: Clone, *goals: str, subject: str = "ask for a change") -> str:
    """A commit whose message ends in one ``Agentrun-Goal`` trailer per goal."""
    trailers = "\n".join(f"Agentrun-Goal: {goal}" for goal in goals)
    clone.git("commit", "-q", "--allow-empty", "-m", f"{subject}\n\nSome words.\n\n{trailers}")
    return clone.local("HEAD")


def remote_builds(clone: Clone) -> dict[str, BuildCreated]:
    log = EventLog(pygit2.Repository(str(clone.remote)))
    found = {}
    for slug in log.slugs():
        first = next(iter(log.read(slug))).event.payload
        assert isinstance(first, BuildCreated)
        found[slug] = first
    return found


def remote_types(clone: Clone, slug: str) -> list[str]:
    log = EventLog(pygit2.Repository(str(clone.remote)))
    return [stored.event.type for stored in log.read(slug)]


def started(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str]]:
    assert done.returncode == 0, done.stderr
    return STARTED.findall(done.stderr)


def agentrun(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True
    )


# --- the shim's fast path ------------------------------------------------------------


def test_an_ordinary_push_starts_no_python(clone: Clone) -> None:
    """No git-agentrun on PATH, AGENTRUN_HOOK_OPTIONAL unset: the shim alone lets these
    through, so it never asked for git-agentrun."""
    env = {**cli_env(), "PATH": SYSTEM_PATH}
    clone.commit({"a.txt": "a\n"}, "an ordinary change")
    # Not a trailer by git's rules: the words are not in the message's last paragraph.
    clone.git("commit", "-q", "--allow-empty", "-m", "s\n\nAgentrun-Goal: no\n\nmore words")
    assert clone.push("origin", "main", env=env).returncode == 0
    clone.git("checkout", "-q", "-b", "feature")
    clone.commit({"b.txt": "b\n"}, "a new branch")
    assert clone.push("origin", "feature", env=env).returncode == 0
    assert clone.push("origin", ":feature", env=env).returncode == 0  # a deletion
    # A force push over a tip this clone never saw (someone else's push).
    other = clone.path.parent / "someone"
    git(clone.path.parent, "clone", "-q", clone.url, str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "someone else's")
    git(other, "push", "-q", "--no-verify", "origin", "main")
    assert clone.push("--force", "origin", "main", env=env).returncode == 0
    assert remote_builds(clone) == {}

    goal_commit(clone, "add a greeting")
    done = clone.push("origin", "feature", env=env)
    assert done.returncode == 1  # the trailer is what brought git-agentrun in
    assert "brings an Agentrun-Goal trailer" in done.stderr
    # Over a remote tip this clone lacks, the trailer is still found.
    git(other, "commit", "-q", "--allow-empty", "-m", "someone else's again")
    git(other, "push", "-q", "--no-verify", "origin", "main")
    done = clone.push("--force", "origin", "feature:main", env=env)
    assert done.returncode == 1
    assert "brings an Agentrun-Goal trailer" in done.stderr


# --- the hook records builds ---------------------------------------------------------


def test_one_trailer_starts_one_build_whose_log_reaches_the_remote(clone: Clone) -> None:
    sha = goal_commit(clone, "Add a greeting to the README")

    done = clone.push("origin", "main")

    ((slug, short, branch),) = started(done)
    assert (short, branch) == (sha[:10], "main")
    assert re.fullmatch(r"add-a-greeting-to-the-readme-[0-9a-f]{8}", slug)
    assert "the CI job of this push runs it" not in done.stderr  # the local forge
    assert f"`git agentrun resume {slug}` runs it here" in done.stderr
    created = remote_builds(clone)[slug]
    assert (created.source, created.base_ref, created.base_sha) == ("hook", "main", sha)
    assert created.goal == "Add a greeting to the README"
    assert created.branch == f"agentrun/{slug}"
    assert remote_types(clone, slug) == ["build.created"]  # no agent ran in the hook
    assert clone.remote_refs()["refs/heads/main"] == sha


def test_two_trailers_start_two_builds_and_pushing_again_starts_none(clone: Clone) -> None:
    goal_commit(clone, "Add a greeting", "Add a farewell")

    first = started(clone.push("origin", "main"))

    assert len(first) == 2
    assert sorted(remote_builds(clone)) == sorted(slug for slug, _, _ in first)
    # The same commit again, to a second branch and to a second remote.
    other = clone.path.parent / "other.git"
    git(clone.path.parent, "init", "-q", "--bare", str(other))
    clone.git("remote", "add", "other", other.as_uri())
    assert started(clone.push("origin", "main:second")) == []
    again = clone.push("other", "main")
    assert started(again) == []
    assert sorted(remote_builds(clone)) == sorted(slug for slug, _, _ in first)


def test_merge_commits_and_build_branches_carry_no_goals(clone: Clone) -> None:
    env = {**cli_env(), "PATH": SYSTEM_PATH}
    clone.git("checkout", "-q", "-b", "side")
    clone.commit({"side.txt": "s\n"}, "side work")
    clone.git("checkout", "-q", "main")
    clone.commit({"main.txt": "m\n"}, "main work")
    message = "Merge side\n\nAgentrun-Goal: a merge is not a goal"
    clone.git("merge", "-q", "--no-ff", "side", "-m", message)
    assert clone.push("origin", "main", env=env).returncode == 0  # no Python either

    clone.git("checkout", "-q", "-b", "agentrun/by-hand")
    goal_commit(clone, "a build branch is not a goal")
    done = clone.push("origin", "agentrun/by-hand")  # the guards run; no goal does
    assert done.returncode == 0, done.stderr
    assert started(done) == []
    assert remote_builds(clone) == {}


# --- a refused push, then sweep ------------------------------------------------------


def test_a_refused_push_leaves_a_build_that_waits_until_its_base_lands(
    clone: Clone, tmp_path: Path
) -> None:
    hook = clone.remote / "hooks" / "pre-receive"
    hook.write_text(REFUSE_MAIN)
    hook.chmod(0o755)
    sha = goal_commit(clone, "Add a greeting")

    refused = clone.push("origin", "main")

    assert refused.returncode == 1
    assert "main is frozen" in refused.stderr
    ((slug, _, _),) = STARTED.findall(refused.stderr)
    assert slug in remote_builds(clone)  # the log went first; the branch was refused
    assert "refs/heads/main" not in clone.remote_refs() or (
        clone.remote_refs()["refs/heads/main"] != sha
    )
    # Here: the runner asks the remote before it starts, says why in one line, exit 4.
    resumed = agentrun(clone.path, "resume", slug)
    assert resumed.returncode == 4, resumed.stdout + resumed.stderr
    (line,) = resumed.stdout.splitlines()
    assert line.startswith(f"build {slug} waits for its base: commit {sha[:10]} is not on")
    # Elsewhere: a fresh clone's sweep says the same and runs nothing.
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", clone.url, str(fresh))
    swept = agentrun(fresh, "sweep", "--remote", "origin")
    assert swept.returncode == 4, swept.stdout + swept.stderr  # a build waits (§13)
    assert f"{slug}: skipped (build {slug} waits for its base" in swept.stdout
    assert remote_types(clone, slug) == ["build.created"]

    hook.unlink()
    pushed = clone.push("origin", "main")
    assert started(pushed) == []  # the same (commit, goal): nothing new
    assert clone.remote_refs()["refs/heads/main"] == sha

    later = tmp_path / "later"
    git(tmp_path, "clone", "-q", clone.url, str(later))
    swept = agentrun(later, "sweep", "--remote", "origin")
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert f"{slug}: resumed (it never ran); complete" in swept.stdout
    status = json.loads(agentrun(later, "status", "--json").stdout)
    (row,) = [b for b in status["builds"] if b["slug"] == slug]
    assert row["proposal"] is not None
    assert "proposal.opened" in remote_types(clone, slug)


def test_a_goal_that_cannot_start_here_says_why_and_the_push_goes_on(clone: Clone) -> None:
    clone.commit({".agentrun.toml": '[roles]\ndefault = ["nowhere"]\n'}, "break the roles")
    sha = goal_commit(clone, "Add a greeting")

    done = clone.push("origin", "main")

    assert done.returncode == 0, done.stderr
    assert started(done) == []
    (line,) = [x for x in done.stderr.splitlines() if "was not started here" in x]
    assert line.startswith(f"agentrun: the goal of commit {sha[:10]} on main was not started")
    assert "no runtime 'nowhere'" in line
    assert remote_builds(clone) == {}
    assert clone.remote_refs()["refs/heads/main"] == sha
