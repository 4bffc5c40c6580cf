"""Reading a commit's notes back: what the tests check; the runner only adds them."""

from __future__ import annotations

import json

import pygit2

from agentrun.store.log import event_commit
from agentrun.store.notes import NOTES_REF


def read_notes(repo: pygit2.Repository, commit: str) -> list[dict[str, object]]:
    ref = repo.references.get(NOTES_REF)
    if ref is None:
        return []
    event_commit(repo, NOTES_REF, ref.target)
    try:
        message = repo.lookup_note(commit, NOTES_REF).message
    except KeyError:
        return []
    return [json.loads(line) for line in message.splitlines() if line.strip()]
