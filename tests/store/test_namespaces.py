"""A remote that refuses agentrun's ref namespaces is named in one line before any push.

Bare ``file://`` remotes: one whose ``pre-receive`` hook refuses ``refs/agentrun/*``, one
that refuses ``refs/notes/*``, one that takes both; each logs the refs it took (its
``reference-transaction`` hook), so the tests count the selftest pushes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo
from runner.helpers import run_cli

from agentrun.events import BuildCreated
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog
from agentrun.store.notes import add_note
from agentrun.store.remote_lease import claim_remote
from agentrun.store.transport import RefusedNamespaceError

SLUG = "b-1"
ADVICE = (
    "allow pushes to refs/agentrun/* and refs/notes/* there (a pre-receive hook or push "
    "rules reject them); agentrun keeps its build logs, leases and notes there. No build "
    "log, lease or note was pushed"
)
REFUSED_BY_HOOK = "[remote rejected] (pre-receive hook declined)"


def refusing(prefix: str) -> str:
    return f"#!/bin/sh\nif grep -q ' {prefix}'; then echo 'not here' >&2; exit 1; fi\n"


# Every ref the remote took, one line each ("<new oid> <ref>"), in the order it took them.
LOGGING = (
    '#!/bin/sh\n[ "$1" = committed ] || { cat >/dev/null; exit 0; }\n'
    'while read old new ref; do echo "$new $ref" >> "$GIT_DIR/taken.log"; done\n'
)


def remote_with(tmp_path: Path, pre_receive: str | None) -> tuple[Path, Path]:
    """A bare remote (its hooks installed) and a clone of it holding one build."""
    seed = make_repo(tmp_path / "seed")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    hooks = {"reference-transaction": LOGGING}
    if pre_receive is not None:
        hooks["pre-receive"] = pre_receive
    for name, text in hooks.items():
        (bare / "hooks" / name).write_text(text)
        (bare / "hooks" / name).chmod(0o755)
    git(tmp_path, "clone", "-q", bare.as_uri(), "a")
    clone = tmp_path / "a"
    repo = pygit2.Repository(str(clone))
    created = BuildCreated(
        goal="g", base_ref="main", base_sha=str(repo.head.target), branch=f"agentrun/{SLUG}"
    )
    EventLog(repo).append(SLUG, [Draft(created)], None)
    add_note(repo, str(repo.head.target), {"milestone": "test"})
    return bare, clone


def refs(path: Path) -> str:
    return git(path, "for-each-ref", "--format=%(objectname) %(refname)")


def taken(bare: Path, below: str) -> list[str]:
    """What the remote took of the refs below ``below`` (a check's own selftest refs)."""
    log = bare / "taken.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.split()[1].startswith(f"{below}/")]


def remembered(clone: Path) -> list[str]:
    """The push URLs the clone remembers as taking agentrun's refs, with the namespaces."""
    where = clone / ".git" / "agentrun" / "remotes-accepting"
    found = sorted(where.iterdir()) if where.is_dir() else []
    return [path.read_text().replace("\n", " ").strip() for path in found]


@pytest.mark.parametrize(
    ("prefix", "namespace", "selftest"),
    [
        ("refs/agentrun/", "refs/agentrun/*", "refs/agentrun/selftest"),
        ("refs/notes/", "refs/notes/*", "refs/notes/selftest"),
    ],
)
def test_a_remote_refusing_a_namespace_fails_sync_in_one_line(
    tmp_path: Path, prefix: str, namespace: str, selftest: str
) -> None:
    bare, clone = remote_with(tmp_path, refusing(prefix))
    before_here, before_there = refs(clone), refs(bare)

    done = run_cli(clone, "sync", "origin")

    assert done.returncode == 1, done.stderr
    expected = (
        f"agentrun: the remote origin refuses {re.escape(namespace)} "
        f"\\(push of {selftest}/[0-9a-f]{{12}}: "
        f"{re.escape(REFUSED_BY_HOOK)}\\): {re.escape(ADVICE)}\n"
    )
    assert re.fullmatch(expected, done.stderr), done.stderr
    assert done.stdout == ""
    assert (refs(clone), refs(bare)) == (before_here, before_there)
    assert remembered(clone) == []
    # Refused again on the next try: a refusal is never remembered as a pass.
    assert re.fullmatch(expected, run_cli(clone, "sync", "origin").stderr)


def test_an_accepting_remote_is_checked_once_and_keeps_no_selftest_ref(tmp_path: Path) -> None:
    bare, clone = remote_with(tmp_path, None)
    config = (clone / ".git" / "config").read_bytes()

    first = run_cli(clone, "sync", "origin")
    second = run_cli(clone, "sync", "origin")

    assert (first.returncode, first.stderr) == (0, ""), first.stderr
    assert f"build {SLUG}: pushed 1 event" in first.stdout
    assert (second.returncode, second.stdout) == (0, f"build {SLUG}: up to date\n")
    zero = "0" * 40
    for ref in ("refs/agentrun/selftest", "refs/notes/selftest"):
        created, deleted = taken(bare, ref)  # once each, across both syncs
        assert created.split()[0] != zero and deleted == f"{zero} {created.split()[1]}"
    assert "selftest" not in refs(bare)
    assert f"refs/agentrun/builds/{SLUG}" in refs(bare)
    assert "refs/notes/agentrun" in refs(bare)
    assert remembered(clone) == [f"{bare.as_uri()} refs/agentrun/* refs/notes/*"]
    assert (clone / ".git" / "config").read_bytes() == config  # the user's, left alone


def test_a_new_push_url_is_checked_again(tmp_path: Path) -> None:
    bare, clone = remote_with(tmp_path, None)
    assert run_cli(clone, "sync", "origin").returncode == 0
    other = tmp_path / "other.git"
    git(tmp_path, "clone", "-q", "--bare", str(bare), str(other))
    (other / "hooks" / "pre-receive").write_text(refusing("refs/agentrun/"))
    (other / "hooks" / "pre-receive").chmod(0o755)
    git(clone, "remote", "set-url", "--push", "origin", other.as_uri())

    done = run_cli(clone, "sync", "origin")

    assert done.returncode == 1
    assert done.stderr.startswith("agentrun: the remote origin refuses refs/agentrun/* ")


def test_an_unreachable_remote_keeps_its_own_error(tmp_path: Path) -> None:
    _, clone = remote_with(tmp_path, None)
    git(clone, "remote", "set-url", "origin", (tmp_path / "gone.git").as_uri())

    done = run_cli(clone, "sync", "origin")

    assert done.returncode == 1
    assert done.stderr.startswith("agentrun: `git ls-remote` with origin failed ("), done.stderr
    assert "refuses" not in done.stderr
    assert remembered(clone) == []


def test_a_runner_claim_on_a_refusing_remote_names_it_and_pushes_no_lease(
    tmp_path: Path,
) -> None:
    bare, clone = remote_with(tmp_path, refusing("refs/agentrun/"))

    with pytest.raises(RefusedNamespaceError, match=r"^the remote origin refuses refs/agentrun/"):
        claim_remote(pygit2.Repository(str(clone)), "origin", SLUG, "runner-1")

    assert "refs/agentrun/" not in refs(bare)
    assert taken(bare, f"refs/agentrun/leases/{SLUG}") == []


def test_credentials_in_the_push_url_stay_out_of_the_key(tmp_path: Path) -> None:
    bare, clone = remote_with(tmp_path, None)
    served = bare.as_uri().replace("file://", "file://user:s3cret@", 1)
    git(clone, "remote", "set-url", "--push", "origin", served)

    claim_remote(pygit2.Repository(str(clone)), "origin", SLUG, "runner-1")

    assert remembered(clone) == [f"{bare.as_uri()} refs/agentrun/* refs/notes/*"]


def test_a_check_under_way_in_another_clone_is_left_alone(tmp_path: Path) -> None:
    """Two CI jobs, each a fresh clone, check one remote at once: neither pushes nor
    deletes the other's selftest refs, so neither takes the other for a refusal."""
    bare, clone = remote_with(tmp_path, None)
    theirs = "refs/agentrun/selftest/0123456789ab"  # another clone's, mid-check
    git(bare, "update-ref", theirs, git(bare, "rev-parse", "HEAD"))

    done = run_cli(clone, "sync", "origin")

    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert git(bare, "for-each-ref", "--format=%(refname)", "refs/agentrun/selftest") == theirs
