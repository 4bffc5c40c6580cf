"""Notes on build-branch commits in ``refs/notes/agentrun``, one JSON line per fact.

Every writer (each build's runner, on any machine that syncs) touches this one ref, so a
note is appended the way an event is (DESIGN §2): the notes commit is built from the tip
that was read, and the ref is moved only if it still points there. A lost race re-reads
and tries again (``store.cas``); no note is dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pygit2

from agentrun.gitrepo import commit_at, signature
from agentrun.store.cas import retry
from agentrun.store.log import event_commit, move_ref

NOTES_REF = "refs/notes/agentrun"


def add_note(repo: pygit2.Repository, commit: str, fact: Mapping[str, object]) -> None:
    """Append a fact to the note on ``commit`` (notes are a milestone record, not the log)."""
    line = json.dumps(dict(fact), sort_keys=True)
    retry(lambda: _append(repo, commit, line), f"the note on {commit[:10]}")


def _append(repo: pygit2.Repository, commit: str, line: str) -> None:
    ref = repo.references.get(NOTES_REF)
    old = event_commit(repo, NOTES_REF, ref.target) if ref is not None else None
    tree = commit_at(repo, old).tree if old is not None else None
    path = _note_path(tree, commit)
    existing = ""
    if tree is not None and path is not None:
        existing = repo[tree[path].id].peel(pygit2.Blob).data.decode("utf-8", "replace")
    if line in existing.splitlines():
        return
    body = (existing.rstrip("\n") + "\n" + line).lstrip("\n") + "\n"
    blob = repo.create_blob(body.encode())
    new_tree = _with_entry(repo, tree, (path or commit).split("/"), blob)
    sig = signature()
    parents = [pygit2.Oid(hex=old)] if old is not None else []
    message = f"Notes added by agentrun on {commit[:10]}\n"
    new = repo.create_commit(None, sig, sig, message, new_tree, parents)
    move_ref(repo, NOTES_REF, str(new), old)


def _note_path(tree: pygit2.Tree | None, commit: str) -> str | None:
    """Where ``commit``'s note sits: flat, or under git's fan-out folders (``ab/cdef…``)."""
    if tree is None:
        return None
    for path in (commit, f"{commit[:2]}/{commit[2:]}", f"{commit[:2]}/{commit[2:4]}/{commit[4:]}"):
        try:
            tree[path]
        except KeyError:
            continue
        return path
    return None


def _with_entry(
    repo: pygit2.Repository, tree: pygit2.Tree | None, parts: list[str], blob: pygit2.Oid
) -> pygit2.Oid:
    """``tree`` with the blob at ``parts`` (folders made or kept as needed)."""
    builder = repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder()
    name, rest = parts[0], parts[1:]
    if not rest:
        builder.insert(name, blob, pygit2.GIT_FILEMODE_BLOB)
        return builder.write()
    sub = None
    if tree is not None and name in tree:
        sub = repo[tree[name].id].peel(pygit2.Tree)
    builder.insert(name, _with_entry(repo, sub, rest, blob), pygit2.GIT_FILEMODE_TREE)
    return builder.write()
