"""Notes on build-branch commits: ``refs/notes/agentrun``, one JSON line per fact (DESIGN §2)."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
from conftest import git, make_repo

from agentrun.store.notes import NOTES_REF, add_note, read_notes


def head(repo_path: Path) -> str:
    return git(repo_path, "rev-parse", "HEAD")


def test_add_note_appends_json_lines(repo: pygit2.Repository, repo_path: Path) -> None:
    sha = head(repo_path)
    add_note(repo, sha, {"phase": "implement", "round": 1, "session": "s1"})
    add_note(repo, sha, {"phase": "verify:tests", "outcome": "pass"})

    shown = git(repo_path, "notes", "--ref", "agentrun", "show", sha)
    lines = shown.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"phase": "implement", "round": 1, "session": "s1"},
        {"outcome": "pass", "phase": "verify:tests"},
    ]
    assert lines[0] == '{"phase": "implement", "round": 1, "session": "s1"}'  # keys sorted
    assert read_notes(repo, sha) == [
        {"phase": "implement", "round": 1, "session": "s1"},
        {"outcome": "pass", "phase": "verify:tests"},
    ]
    assert git(repo_path, "for-each-ref", "--format=%(refname)", "refs/notes/") == NOTES_REF


def test_the_same_fact_is_written_once(repo: pygit2.Repository, repo_path: Path) -> None:
    sha = head(repo_path)
    fact = {"phase": "code-review", "verdict": "approve"}
    add_note(repo, sha, fact)
    notes_tip = str(repo.references[NOTES_REF].target)
    add_note(repo, sha, dict(reversed(list(fact.items()))))  # same fact, other key order
    assert str(repo.references[NOTES_REF].target) == notes_tip
    assert read_notes(repo, sha) == [fact]
    assert len(git(repo_path, "notes", "--ref", "agentrun", "show", sha).splitlines()) == 1


def test_notes_on_different_commits_are_separate(repo: pygit2.Repository, repo_path: Path) -> None:
    first = head(repo_path)
    git(repo_path, "commit", "-q", "--allow-empty", "-m", "second")
    second = head(repo_path)
    add_note(repo, first, {"n": 1})
    add_note(repo, second, {"n": 2})
    assert read_notes(repo, first) == [{"n": 1}]
    assert read_notes(repo, second) == [{"n": 2}]
    listed = git(repo_path, "notes", "--ref", "agentrun", "list").splitlines()
    assert sorted(line.split()[1] for line in listed) == sorted([first, second])


def test_a_commit_without_notes_reads_empty(repo: pygit2.Repository, repo_path: Path) -> None:
    assert read_notes(repo, head(repo_path)) == []
    add_note(repo, head(repo_path), {"n": 1})
    git(repo_path, "commit", "-q", "--allow-empty", "-m", "second")
    assert read_notes(repo, head(repo_path)) == []


def test_notes_written_by_the_git_cli_are_kept(repo: pygit2.Repository, repo_path: Path) -> None:
    sha = head(repo_path)
    git(repo_path, "notes", "--ref", "agentrun", "add", "-m", '{"by": "cli"}', sha)
    add_note(repo, sha, {"by": "agentrun"})
    assert read_notes(repo, sha) == [{"by": "cli"}, {"by": "agentrun"}]


def test_notes_from_two_clones_merge_with_cat_sort_uniq(tmp_path: Path) -> None:
    """The line-per-fact format is what `git notes merge -s cat_sort_uniq` needs."""
    origin = make_repo(tmp_path / "origin")
    sha = head(origin)
    add_note(pygit2.Repository(str(origin)), sha, {"shared": True})
    git(tmp_path, "clone", "-q", str(origin), "clone")
    clone = tmp_path / "clone"
    git(clone, "fetch", "-q", "origin", f"{NOTES_REF}:{NOTES_REF}")

    add_note(pygit2.Repository(str(origin)), sha, {"from": "origin"})
    add_note(pygit2.Repository(str(clone)), sha, {"from": "clone"})
    git(clone, "fetch", "-q", "origin", f"{NOTES_REF}:refs/notes/remote-agentrun")
    git(clone, "notes", "--ref", "agentrun", "merge", "--strategy=cat_sort_uniq", "remote-agentrun")

    facts = read_notes(pygit2.Repository(str(clone)), sha)
    assert sorted(json.dumps(f, sort_keys=True) for f in facts) == sorted(
        json.dumps(f, sort_keys=True)
        for f in [{"shared": True}, {"from": "origin"}, {"from": "clone"}]
    )
    assert len(facts) == 3
