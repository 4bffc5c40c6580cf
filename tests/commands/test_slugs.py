"""Slugs: goals transliterated before slugging; one resolver for every SLUG argument."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure, run_cli

from agentrun.commands.build import create_build, slugify
from agentrun.events import BuildCreated
from agentrun.kernel.draft import Draft
from agentrun.store.archive import archive
from agentrun.store.log import EventLog


def logged(repo: pygit2.Repository, *slugs: str) -> None:
    base = str(repo.references["refs/heads/main"].target)
    for slug in slugs:
        created = BuildCreated(goal=slug, base_ref="main", base_sha=base, branch=f"agentrun/{slug}")
        EventLog(repo).append(slug, [Draft(created)], None)


def types(repo: pygit2.Repository, slug: str) -> list[str]:
    return [s.event.type for s in EventLog(repo).read(slug)]


@pytest.mark.parametrize(
    ("goal", "slug"),
    [
        ("Ünïcödé façade", "unicode-facade"),
        ("Straße über Öl", "strae-uber-ol"),  # ß has no decomposition: dropped, not guessed
        ("ﬁx the ｆｕｌｌｗｉｄｔｈ bug", "fix-the-fullwidth-bug"),  # compatibility forms
        ("修正", "build"),  # nothing transliterates: the fallback
    ],
)
def test_goals_are_transliterated_before_slugging(goal: str, slug: str) -> None:
    assert slugify(goal) == slug


def test_a_build_started_with_accents_gets_an_ascii_slug(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path)
    assert create_build(repo, "Ünïcödé façade").slug == "unicode-facade"


def test_an_exact_slug_wins_over_a_longer_one(repo_path: Path, repo: pygit2.Repository) -> None:
    logged(repo, "fix", "fix-login")
    done = run_cli(repo_path, "pause", "fix")
    assert done.returncode == 0, done.stderr
    assert types(repo, "fix") == ["build.created", "build.pause-requested", "build.paused"]
    assert types(repo, "fix-login") == ["build.created"]


@pytest.mark.parametrize(
    "argv",
    [["pause"], ["abort"], ["retry"], ["resume"], ["show"], ["log"], ["answer", "{}", "yes"]],
)
def test_a_unique_prefix_names_the_build(
    repo_path: Path, repo: pygit2.Repository, argv: list[str]
) -> None:
    logged(repo, "fix-login-redirect", "add-docs")
    args = [a.replace("{}", "fix-lo") for a in argv]
    if len(args) == 1:
        args.append("fix-lo")
    done = run_cli(repo_path, *args)
    # Each command goes on as with the whole slug: a refusal, if any, names the build.
    assert "fix-login-redirect" in done.stdout + done.stderr, (done.stdout, done.stderr)
    assert "no build named" not in done.stderr


def test_an_ambiguous_prefix_exits_1_listing_the_matches(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    logged(repo, "fix-login", "fix-logout", "add-docs")
    done = run_cli(repo_path, "abort", "fix-lo")
    assert done.returncode == 1
    assert done.stderr == (
        "agentrun: 'fix-lo' is the start of 2 builds' slugs (fix-login, fix-logout): "
        "write more of the slug\n"
    )
    assert types(repo, "fix-login") == ["build.created"]
    assert types(repo, "fix-logout") == ["build.created"]


def test_archived_builds_are_found_by_prefix_too(repo_path: Path, repo: pygit2.Repository) -> None:
    logged(repo, "old-feature")
    archive(repo, "old-feature", "complete")
    done = run_cli(repo_path, "log", "old")
    assert done.returncode == 0, done.stderr
    assert "build.created" in done.stdout


def test_an_unknown_slug_is_still_reported_as_unknown(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    logged(repo, "fix-login")
    done = run_cli(repo_path, "show", "nosuch")
    assert done.returncode == 1
    assert "no build named 'nosuch'" in done.stderr
