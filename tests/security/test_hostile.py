"""A hostile agent on CI's machine finds no token and breaks nothing (issue 9, item 5).

A real ``git agentrun run``, started from ``sh -c`` with ``GITHUB_TOKEN`` exported and
``GITHUB_ACTIONS=true``, runs a ``command`` agent that hunts for the token everywhere it
can look, then plants hooks and ``core.fsmonitor``, forges a log event, deletes its log
ref, moves ``main`` and writes into the user's tree. Each isolation level is run once
(as root, as CI runs), and ``user`` once more by a non-root runner with passwordless sudo.
"""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from security.accounts import as_root, ensure_ci_user, open_folder
from security.ci_run import Run, run_build, token_forms

from agentrun.events import AgentDone, BuildCompleted, SessionStarted

# Where the agent looked: its loot file for each place (the repository's config is apart).
PLACES = (
    "own-environ",
    "proc-environ",
    "proc-cmdline",
    "git-config",
    "credential-fill",
    "git-credentials",
    "gh-hosts",
    "sudo",
)
ISOLATED = ("namespace", "user")


@pytest.fixture(scope="module", params=ISOLATED)
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    mode: str = request.param
    return run_build(tmp_path_factory.mktemp(f"hostile-{mode}"), mode)


@pytest.fixture(scope="module")
def hostile_sudo() -> Iterator[Run]:
    """The runner started by ``agentrun-ci``, not root, through ``sudo -u``."""
    root = open_folder()
    try:
        yield run_build(root / "run", "user", as_user=ensure_ci_user())
    finally:
        as_root("rm", "-rf", str(root))


def leaks(run: Run, place: str) -> list[bytes]:
    data = run.found(place)
    return [form for form in token_forms(run.token) if form in data]


def assert_found_nothing(run: Run) -> None:
    assert run.code == 0, run.output
    for place in PLACES:
        assert leaks(run, place) == [], f"the token leaked through {place}"
    # The hunt really looked: its own variables, some process, git's answer, sudo refused.
    assert "AGENTRUN_BUILD=" in run.found("own-environ").decode()
    assert int(run.found("proc-opened")) >= 1
    assert b"core.worktree=" in run.found("git-config")
    assert not run.found("sudo").startswith(b"exit 0")
    if run.mode == "user":
        assert int(run.found("uid")) == pwd.getpwnam("agentrun-agent").pw_uid
    assert run.found("credential-fill").startswith(b"exit ") and b"x-access-token" not in (
        run.found("credential-fill")
    )


def assert_build_completed(run: Run) -> None:
    assert "runner exited 0" in run.output, run.output
    payloads = run.payloads()
    assert isinstance(payloads[-1], BuildCompleted), run.output
    hostile_session = next(
        p.session for p in payloads if isinstance(p, SessionStarted) and p.runtime == "hostile"
    )
    done = [p for p in payloads if isinstance(p, AgentDone)]
    assert [(d.session, d.summary_text) for d in done] == [(hostile_session, "looked around")]
    # The agent's own commit (in its private git dir) was folded into the phase commit.
    assert run.found("own-commit").startswith(b"exit 0")
    implement = run.repo.revparse_single("agentrun/add-a-feature~1").peel(pygit2.Commit)
    assert implement.message.startswith("implement@1: looked around")
    assert implement.tree["feature.txt"].data == b"made by the hostile agent\n"


def assert_contained(run: Run) -> None:
    attacks = run.attacks()
    for name in ("shared-hook", "shared-fsmonitor", "forge-event", "delete-log", "move-main"):
        assert attacks[name]["ok"] is False, (name, attacks[name])
    # What it may do to its own private git dir runs nothing of the runner's.
    assert attacks["own-hooks"]["ok"] is True and attacks["own-fsmonitor"]["ok"] is True
    assert not run.marker.exists(), run.marker.read_text()
    repo = run.repo
    assert not list((Path(repo.path) / "hooks").glob("post-checkout"))
    assert "core.fsmonitor" not in (Path(repo.path) / "config").read_text()
    assert (run.repo_path / "pwned.txt").exists() is False
    assert str(repo.references["refs/heads/main"].target) == str(
        repo.revparse_single("agentrun/add-a-feature~3").id
    )
    forged = [p for p in run.payloads() if getattr(p, "summary_text", "") == "forged"]
    assert forged == []


def test_the_token_is_nowhere_an_isolated_agent_looks(hostile: Run) -> None:
    assert_found_nothing(hostile)


def test_the_build_of_a_hostile_agent_still_completes_with_its_verbs(hostile: Run) -> None:
    assert_build_completed(hostile)


def test_a_hostile_agent_plants_forges_and_deletes_nothing(hostile: Run) -> None:
    assert_contained(hostile)


def test_the_repository_config_holds_no_token(hostile: Run) -> None:
    """Persisted as actions/checkout does, it is taken out before any agent starts."""
    assert leaks(hostile, "repo-config") == []


def test_a_non_root_runner_with_sudo_isolates_its_agent_too(hostile_sudo: Run) -> None:
    assert_found_nothing(hostile_sudo)
    assert_build_completed(hostile_sudo)
    assert_contained(hostile_sudo)


def test_without_isolation_the_same_agent_finds_the_token(tmp_path: Path) -> None:
    """The hunt can fail: with ``mode = "none"`` the token is in a /proc/*/environ."""
    run = run_build(tmp_path, "none", hunt_only=True)
    assert run.code == 0, run.output
    assert leaks(run, "proc-environ") != []
    assert leaks(run, "own-environ") == []  # the agent's own environment is allow-listed
