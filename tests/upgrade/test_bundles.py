"""Logs recorded by earlier releases stay readable forever (DESIGN §13).

Each bundle under tests/upgrade/ was recorded by ``record.sh`` with a release of its
schema version: four builds (complete and closed, merged, parked on a question, complete
with its proposal open), every ref included. Today's release must list them, answer the
parked one, resume it to the end, and merge the open proposals.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from runner.helpers import run_cli

HERE = Path(__file__).parent
BUNDLES = sorted(HERE.glob("v*.bundle"))


def unbundle(bundle: Path, where: Path) -> Path:
    where.mkdir()
    git(where, "init", "-q", "-b", "main")
    git(where, "fetch", "-q", "--update-head-ok", str(bundle), "+refs/*:refs/*")
    git(where, "checkout", "-q", "main")
    return where


def builds(repo: Path) -> dict[str, dict[str, Any]]:
    done = run_cli(repo, "status", "--json")
    assert done.returncode == 0, done.stderr
    return {b["slug"]: b for b in json.loads(done.stdout)["builds"]}


def number(build: dict[str, Any]) -> str:
    return str(build["proposal"]["number"])


def summary(build: dict[str, Any]) -> tuple[str, bool, str | None]:
    proposal = build["proposal"]
    shown = None
    if proposal is not None:
        shown = "merged" if proposal["merged"] else "closed" if proposal["closed"] else "open"
    return build["state"], build["archived"], shown


def test_there_is_a_bundle_of_release_0_1_0() -> None:
    assert HERE / "v0.1.0.bundle" in BUNDLES


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.stem)
def test_an_old_release_s_builds_are_read_answered_resumed_and_merged(
    bundle: Path, tmp_path: Path
) -> None:
    repo = unbundle(bundle, tmp_path / "repo")
    listed = builds(repo)
    assert {slug: summary(b) for slug, b in listed.items()} == {
        "round-up-the-closed-page-count": ("complete", True, "closed"),
        "round-up-the-merged-page-count": ("complete", True, "merged"),
        "ask-before-refusing-empty-pages": ("parked", False, None),
        "round-up-the-open-page-count": ("complete", False, "open"),
    }
    for slug in listed:
        shown = run_cli(repo, "log", slug, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)

    parked = "ask-before-refusing-empty-pages"
    answered = run_cli(repo, "answer", parked, "Yes, raise ValueError")
    assert answered.returncode == 0, answered.stderr
    resumed = run_cli(repo, "resume", parked)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = builds(repo)
    assert after[parked]["state"] == "complete"
    assert "raise ValueError" in git(repo, "show", f"agentrun/{parked}:pager.py")

    for slug in (parked, "round-up-the-open-page-count"):
        merged = run_cli(repo, "pulls", "merge", number(after[slug]))
        assert merged.returncode == 0, merged.stdout + merged.stderr
    final = builds(repo)
    assert {slug: summary(b) for slug, b in final.items()} == {
        "round-up-the-closed-page-count": ("complete", True, "closed"),
        "round-up-the-merged-page-count": ("complete", True, "merged"),
        "ask-before-refusing-empty-pages": ("complete", True, "merged"),
        "round-up-the-open-page-count": ("complete", True, "merged"),
    }
    assert "raise ValueError" in git(repo, "show", "main:pager.py")
    git(repo, "checkout", "-q", "-f", "main")
    check = subprocess.run(
        ["python3", "-c", "import pager; assert pager.page_count(21, 10) == 3"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
