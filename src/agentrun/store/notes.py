"""Notes on build-branch commits in ``refs/notes/agentrun``, one JSON line per fact."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pygit2

from agentrun.gitrepo import signature

NOTES_REF = "refs/notes/agentrun"


def add_note(repo: pygit2.Repository, commit: str, fact: Mapping[str, object]) -> None:
    """Append a fact to the note on ``commit`` (notes are a milestone record, not the log)."""
    line = json.dumps(dict(fact), sort_keys=True)
    for _ in range(5):
        try:
            existing = repo.lookup_note(commit, NOTES_REF).message
        except KeyError:
            existing = ""
        if line in existing.splitlines():
            return
        body = (existing.rstrip("\n") + "\n" + line).lstrip("\n") + "\n"
        sig = signature()
        try:
            repo.create_note(body, sig, sig, commit, NOTES_REF, True)
            return
        except pygit2.GitError:
            continue  # another writer moved the notes ref: read again


def read_notes(repo: pygit2.Repository, commit: str) -> list[dict[str, object]]:
    try:
        message = repo.lookup_note(commit, NOTES_REF).message
    except KeyError:
        return []
    return [json.loads(line) for line in message.splitlines() if line.strip()]
