"""Notes on build-branch commits: ``refs/notes/agentrun``, one JSON line per fact (DESIGN §2)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pygit2
from conftest import git, make_repo
from support.notes import read_notes

from agentrun.store.notes import NOTES_REF, add_note


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


WRITER = """
import sys, time
import pygit2
from agentrun.store.notes import add_note
repo = pygit2.Repository(sys.argv[1])
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
for n, sha in enumerate(sys.argv[3:]):
    add_note(repo, sha, {"writer": sys.argv[2], "n": n})
"""


def test_four_processes_writing_25_notes_each_lose_none(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    """One ref, four writers at once: every note lands, and no writer fails on a lock."""
    shas = []
    for n in range(100):
        git(repo_path, "commit", "-q", "--allow-empty", "-m", f"c{n}")
        shas.append(head(repo_path))
    start = time.time() + 1.0
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(repo_path), str(start), *shas[i::4]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    for proc in writers:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    fresh = pygit2.Repository(str(repo_path))
    assert all(len(read_notes(fresh, sha)) == 1 for sha in shas)
    listed = git(repo_path, "notes", "--ref", "agentrun", "list").splitlines()
    assert len(listed) == 100


def fed(cwd: Path, text: str, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_notes_under_git_fanout_folders_are_appended_in_place(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    """A notes tree git wrote with fan-out (``ab/cdef…``) is extended, not shadowed."""
    sha = head(repo_path)
    blob = fed(repo_path, '{"by": "git"}\n', "hash-object", "-w", "--stdin")
    inner = fed(repo_path, f"100644 blob {blob}\t{sha[2:]}\n", "mktree")
    outer = fed(repo_path, f"040000 tree {inner}\t{sha[:2]}\n", "mktree")
    notes = git(repo_path, "commit-tree", outer, "-m", "fanned out")
    git(repo_path, "update-ref", NOTES_REF, notes)

    add_note(repo, sha, {"by": "agentrun"})

    assert read_notes(repo, sha) == [{"by": "git"}, {"by": "agentrun"}]
    shown = git(repo_path, "notes", "--ref", "agentrun", "show", sha)
    assert shown.splitlines() == ['{"by": "git"}', '{"by": "agentrun"}']
    assert git(repo_path, "rev-parse", f"{NOTES_REF}^") == notes  # a new commit on top
