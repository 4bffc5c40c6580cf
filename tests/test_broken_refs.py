"""A broken ref is one clear line and exit 1, never a traceback (exit 3), for every command.

The repository is the upgrade bundle of release 0.1.0 (four builds, proposals, notes), with
one ref broken at a time: a build log pointing at a blob, at a tree, at a missing object;
the notes ref pointing at a blob; a local proposal pointing at a blob.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import git
from runner.helpers import cli_env
from upgrade.test_bundles import unbundle

BUNDLE = Path(__file__).parent / "upgrade" / "v0.1.0.bundle"
PARKED = "ask-before-refusing-empty-pages"
OPEN = "round-up-the-open-page-count"
MISSING = "1234567890abcdef1234567890abcdef12345678"


def break_ref(repo: Path, kind: str) -> str:
    """Break one ref; returns the build slug the commands below should be aimed at."""
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, input="x\n", capture_output=True,
        text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if kind == "log-blob":
        git(repo, "update-ref", f"refs/agentrun/builds/{PARKED}", blob)
    elif kind == "log-tree":
        git(
            repo,
            "update-ref",
            f"refs/agentrun/builds/{PARKED}",
            git(repo, "rev-parse", "HEAD^{tree}"),
        )
    elif kind == "log-missing":
        git(repo, "update-ref", "-d", f"refs/agentrun/builds/{PARKED}")
        (repo / ".git/refs/agentrun/builds" / PARKED).write_text(MISSING + "\n")
    elif kind == "notes-blob":
        git(repo, "update-ref", "refs/notes/agentrun", blob)
    elif kind == "pull-blob":
        git(repo, "update-ref", "refs/agentrun/pulls/3", blob)
    return PARKED


COMMANDS: list[tuple[str, ...]] = [
    ("status",),
    ("status", "--json"),
    ("log", PARKED),
    ("log", "--json", PARKED),
    ("show", PARKED),
    ("show", OPEN),
    ("answer", PARKED, "yes"),
    ("pause", PARKED),
    ("resume", PARKED),
    ("retry", PARKED),
    ("abort", PARKED),
    ("run", "Round up the new page count"),
    ("pulls",),
    ("pulls", "show", "3"),
    ("pulls", "merge", "3"),
    ("pulls", "close", "3"),
    ("sync", "origin"),
    ("sweep",),
    ("sweep", "--json"),
    ("gc", "--dry-run"),
    ("gc",),
    ("action",),
    ("agent", "done"),
    ("agent", "context"),
    ("hook", "pre-push", "origin", "file:///nowhere"),
]
KINDS = ["log-blob", "log-tree", "log-missing", "notes-blob", "pull-blob"]


@pytest.mark.parametrize("kind", KINDS)
def test_no_command_crashes_on_a_broken_ref(kind: str, tmp_path: Path) -> None:
    repo = unbundle(BUNDLE, tmp_path / "repo")
    git(tmp_path, "init", "-q", "--bare", "origin.git")
    git(repo, "remote", "add", "origin", (tmp_path / "origin.git").as_uri())
    slug = break_ref(repo, kind)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"inputs": {}}))
    env = cli_env(
        {
            "AGENTRUN_WORKTREES": str(tmp_path / "worktrees"),
            "AGENTRUN_BUILD": slug,
            "AGENTRUN_PHASE": "plan@1",
            "AGENTRUN_SESSION": "s-1",
            "GITHUB_EVENT_NAME": "workflow_dispatch",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": "octo/pager",
        }
    )
    crashed = []
    for args in COMMANDS:
        if args[0] == "run" and kind.startswith("log-"):
            continue  # a new build does not read the broken log: nothing to learn, much time
        stdin = f"refs/heads/agentrun/{slug} {'1' * 40} refs/heads/agentrun/{slug} {'0' * 40}\n"
        done = subprocess.run(
            ["git", "agentrun", *args], cwd=repo, env=env, input=stdin, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        said = done.stdout + done.stderr
        if done.returncode == 3 or "Traceback" in said or "internal error" in said:
            crashed.append(f"{' '.join(args)}: exit {done.returncode}: {said.strip()[-300:]}")
    assert crashed == []
