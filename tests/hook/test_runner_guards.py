"""The same guards inside the runner: a refused phase commits nothing, the next round learns why.

DESIGN §12: a guard failure (protected path, secret) starts ``implement@N+1`` with the
reason as feedback, so the Action is protected without the hook.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pygit2
import pytest
from hook.hookrepo import GITHUB, SECRET_VALUE
from runner.helpers import configure, git, payloads

from agentrun.commands.build import create_build, run_build

PROTECT = '[protect]\npaths = ["tests/acceptance/**"]\n'
APP = {"src/app.py": "VALUE = 1\n"}


def build(repo: pygit2.Repository) -> tuple[str, str]:
    slug = create_build(repo, "Add the app").slug
    return slug, run_build(repo, slug).state.state_name


def changed_on_branch(repo_path: Path, slug: str) -> set[str]:
    out = git(repo_path, "log", "--format=", "--name-only", f"main..agentrun/{slug}")
    return {line for line in out.splitlines() if line}


def every_object(repo_path: Path) -> bytes:
    argv = ["git", "cat-file", "--batch-all-objects", "--batch"]
    return subprocess.run(argv, cwd=repo_path, capture_output=True, check=True).stdout


def test_touching_a_protected_path_fails_the_round_and_feeds_the_next(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(
        repo_path,
        [
            {"phase": "implement", "round": 1, "write": {"tests/acceptance/test_login.py": "x\n"}},
            {"phase": "implement", "round": 2, "write": APP},
        ],
        extra=PROTECT,
    )
    slug, state = build(repo)

    reason = (
        "the worktree changes tests/acceptance/test_login.py, a protected path "
        "(protect.paths: 'tests/acceptance/**'): leave protected paths as they are"
    )
    failed = payloads(repo, slug, "phase.failed")
    assert [(f.phase, f.round, f.guard, f.error) for f in failed] == [
        ("implement", 1, True, reason)
    ]
    started = payloads(repo, slug, "implement.started")
    assert [s.round for s in started] == [1, 2]
    assert any(reason in line for line in started[1].feedback)
    assert state == "complete"
    assert changed_on_branch(repo_path, slug) == {"src/app.py"}


def test_an_agent_commit_touching_a_protected_path_is_named(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    step = {"phase": "implement", "round": 1, "write": {"tests/acceptance/a.py": "x\n"}}
    configure(
        repo_path,
        [{**step, "commit": "tweak the acceptance test"}, {"phase": "implement", "write": APP}],
        extra=PROTECT,
    )
    slug, state = build(repo)

    error = payloads(repo, slug, "phase.failed")[0].error
    found = re.fullmatch(
        r"commit ([0-9a-f]{10}) changes tests/acceptance/a\.py, a protected path "
        r"\(protect\.paths: 'tests/acceptance/\*\*'\): leave protected paths as they are",
        error,
    )
    assert found is not None, error
    # The refused commit lived in the worktree's private git dir only.
    with pytest.raises(KeyError):
        repo.revparse_single(found[1])
    assert state == "complete"
    assert "tests/acceptance/a.py" not in changed_on_branch(repo_path, slug)


def test_a_planted_secret_fails_the_round_and_never_becomes_a_git_object(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent copies the secrets in from outside, so that no script in the repository
    # holds them.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.py").write_text(f"# settings\nKEY = {GITHUB!r}\n")
    (outside / "deploy.txt").write_text(f"{SECRET_VALUE}\n")
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET_VALUE)
    configure(
        repo_path,
        [
            {"phase": "implement", "round": 1, "run": f"cp {outside}/* .", "write": APP},
            {"phase": "implement", "round": 2, "write": APP},
        ],
        extra='[secrets]\nenv = ["DEPLOY_TOKEN"]\n',
    )
    slug, state = build(repo)

    reason = (
        "the worktree adds a GitHub token in config.py at line 2; adds the value of "
        "$DEPLOY_TOKEN in deploy.txt at line 1: remove the secret (and treat it as leaked "
        "if it was real)"
    )
    failed = payloads(repo, slug, "phase.failed")
    assert [(f.round, f.guard, f.error) for f in failed] == [(1, True, reason)]
    feedback = payloads(repo, slug, "implement.started")[1].feedback
    assert any(reason in line for line in feedback)
    assert state == "complete"
    assert changed_on_branch(repo_path, slug) == {"src/app.py"}
    objects = every_object(repo_path)
    assert SECRET_VALUE.encode() not in objects
    assert GITHUB.encode() not in objects


def test_a_finalize_command_touching_a_protected_path_is_recorded_not_fatal(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    command = "mkdir -p tests/acceptance && echo y > tests/acceptance/b.py"
    finalize = f'[[finalize]]\nname = "fmt"\ncommand = "{command}"\n'
    configure(repo_path, [{"phase": "implement", "write": APP}], extra=PROTECT + finalize)
    slug, state = build(repo)

    step = payloads(repo, slug, "finalize.step-completed")[0]
    assert (step.ok, step.note) == (
        False,
        "the worktree changes tests/acceptance/b.py, a protected path "
        "(protect.paths: 'tests/acceptance/**'): leave protected paths as they are",
    )
    assert state == "complete"
    assert "tests/acceptance/b.py" not in changed_on_branch(repo_path, slug)
