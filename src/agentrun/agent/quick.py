"""The verbs' quick path: ``agent context`` and the plain verbs from the state cache.

Every agent runs ``git agentrun agent <verb>`` several times per session, and loading
the models, the git library and the CLI framework costs many times Python's own start.
The runner keeps ``.git/agentrun/cache/<slug>.json`` at the log's tip after each event
it appends (DESIGN §2), so inside a session the verb can read the state there, as JSON,
with the standard library alone: when the cache is at the tip of the build's log it
checks the report with the rules every path shares (:mod:`agentrun.kernel.rules`) and
queues it in the outbox as the full path does (:func:`agentrun.agent.outbox.enqueue`).

Anything this path cannot settle from the cache it leaves to the full path, untouched:
each function returns None before it writes anything. That is the case when
``AGENTRUN_GIT_DIR`` is not set (a verb run by hand), when the cache is missing, from
another release or behind the tip (someone else appended since the runner last wrote
it), for a task's session, in a sub-folder of the worktree, and for the verbs whose
check needs more of the state (``plan``, ``select``, ``escalate``, ``remember``,
``usage``). Refusals are the shared rules' and the outbox is the same: under isolation
this path, like the full one, only reads git metadata and writes the worktree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentrun import __version__
from agentrun.agent.context import render, write_rendered
from agentrun.agent.outbox import enqueue
from agentrun.kernel.rules import (
    GIT_DIR_VARIABLE,
    PLAIN_VERBS,
    Speaker,
    VerbReport,
    agent_env,
    check_fits,
    plain_said,
)

TYPE_CHECKING = False  # not typing itself: loading it costs the verbs' start
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, BinaryIO

BUILDS = "refs/agentrun/builds/"
# A conservative filter on the slug before it names files; anything else (a bad slug
# included) goes to the full path, which says what is wrong with it.
_SLUG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")
_HEX = frozenset("0123456789abcdef")


def quick_submit(rep: VerbReport, cwd: Path, environ: Mapping[str, str]) -> str | None:
    """Check and queue a plain verb's report; the verb's confirmation, or None: take the
    full path."""
    env = agent_env(environ)
    if rep.verb not in PLAIN_VERBS or env.task is not None:
        return None
    found = cached_state(env.build, environ)
    workdir = worktree(cwd)
    if found is None or workdir is None:
        return None
    try:
        speaker = Speaker.from_json(found[2]["session"])
    except (KeyError, TypeError, ValueError):
        return None  # not the shape this release writes: the full path replays the log
    check_fits(speaker, env, rep.verb)
    return enqueue(workdir, env, rep, plain_said(rep))


def quick_context(cwd: Path, environ: Mapping[str, str]) -> Path | None:
    """Write the session's context; its path, or None: take the full path."""
    env = agent_env(environ)
    if env.task is not None:
        return None
    found = cached_state(env.build, environ)
    workdir = worktree(cwd)
    if found is None or workdir is None:
        return None
    git_dir, tip, state = found
    try:
        name = state["plan"]
        plan = artifact_text(git_dir, tip, str(name), environ) if name else None
        text = render(state, env, plan)
    except (KeyError, TypeError, ValueError, AttributeError, OSError):
        return None  # not the shape this release writes, or no git: the full path
    return write_rendered(workdir, text)


def cached_state(slug: str, environ: Mapping[str, str]) -> tuple[Path, str, dict[str, Any]] | None:
    """The common git dir, the log's tip and the state at it (JSON), when the cache is
    at the tip of the build's log."""
    git_dir = environ.get(GIT_DIR_VARIABLE, "")
    if not git_dir or not slug or not set(slug) <= _SLUG_CHARS or ".." in slug:
        return None
    common = Path(git_dir)
    tip = ref_target(common, BUILDS + slug)
    if tip is None:
        return None
    try:
        raw = json.loads((common / "agentrun" / "cache" / f"{slug}.json").read_bytes())
        if raw["agentrun"] != __version__ or raw["tip"] != tip:
            return None  # another release's, or behind the tip
        state = raw["state"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (common, tip, state) if isinstance(state, dict) else None


def ref_target(common: Path, name: str) -> str | None:
    """The object id a plain ref points at, loose or packed; None for anything else (a
    symbolic ref, the reftable format, a damaged file)."""
    if (common / "reftable").exists():
        return None
    try:
        text: str | None = (common / name).read_text(encoding="ascii")
    except FileNotFoundError:
        text = None
    except (OSError, ValueError):
        return None
    if text is None:
        text = packed_ref(common, name)
    oid = (text or "").strip()
    return oid if len(oid) in (40, 64) and set(oid) <= _HEX else None


def packed_ref(common: Path, name: str) -> str | None:
    try:
        lines = (common / "packed-refs").read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        return None
    for line in lines:
        oid, _, ref = line.partition(" ")
        if ref == name:
            return oid
    return None


def worktree(cwd: Path) -> Path | None:
    """``cwd`` when it is the top of a worktree (where the runner starts agents); else
    None (the full path finds the worktree)."""
    return cwd if (cwd / ".git").exists() else None


def artifact_text(git_dir: Path, tip: str, name: str, environ: Mapping[str, str]) -> str | None:
    """The newest artifact called ``name`` in the chain ending at ``tip``, as text: what
    ``EventLog.text`` reads, through one ``git cat-file --batch`` (spawned without the
    subprocess module, which would cost this path more than the read)."""
    # Nothing that points git at another repository than the one named.
    env = {k: v for k, v in environ.items() if not k.startswith("GIT_")}
    to_git, ask = os.pipe()
    answer, from_git = os.pipe()
    pid = os.posix_spawnp(
        "git",
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
        env,
        file_actions=[
            (os.POSIX_SPAWN_DUP2, to_git, 0),
            (os.POSIX_SPAWN_DUP2, from_git, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ],
    )
    os.close(to_git)
    os.close(from_git)
    with os.fdopen(ask, "wb") as requests, os.fdopen(answer, "rb") as answers:
        try:
            oid: str | None = tip
            while oid is not None:
                data = _ask(requests, answers, f"{oid}:artifacts/{name}")
                if data is not None:
                    return data.decode("utf-8", "replace")
                commit = _ask(requests, answers, oid)
                if commit is None:
                    raise OSError(f"commit {oid} is missing")
                oid = _first_parent(commit)
            return None
        finally:
            requests.close()
            os.waitpid(pid, 0)


def _ask(requests: BinaryIO, answers: BinaryIO, what: str) -> bytes | None:
    requests.write(what.encode() + b"\n")
    requests.flush()
    header = answers.readline().split()
    if len(header) != 3:
        if not header:
            raise OSError("git cat-file ended")
        return None  # "<what> missing" (or ambiguous)
    return answers.read(int(header[2]) + 1)[:-1]


def _first_parent(commit: bytes) -> str | None:
    for line in commit.split(b"\n"):
        if not line:
            return None  # the headers end: a root commit
        if line.startswith(b"parent "):
            return line[len(b"parent ") :].decode("ascii")
    return None
