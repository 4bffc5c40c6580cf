"""The session outbox: reports queued by verbs that could not write the log (DESIGN §6).

Inside a sandbox that keeps git metadata read-only (Codex's ``workspace-write``), a
verb cannot append to the build's log. It validates the report as usual, then writes
the request to ``<worktree>/.agentrun/run/outbox/<n>.json`` and exits 0. After the
turn the runner calls :func:`drain`, which appends each request through the same
:func:`agentrun.agent.verbs.report`, validated exactly as if it had been live.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pygit2

from agentrun.errors import AgentrunError

OUTBOX = Path(".agentrun") / "run" / "outbox"
VERSION = 1


def queue(workdir: Path, request: Mapping[str, Any]) -> Path:
    """Write one request to the outbox of the worktree ``workdir``; returns its path."""
    folder = workdir / OUTBOX
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(len(list(folder.glob("*.json"))) + 1, 10_000):
        path = folder / f"{number:04d}.json"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"v": VERSION, **request}, fh)
        return path
    raise OSError(f"the outbox {folder} is full")


def drain(repo: pygit2.Repository, workdir: Path, session: str) -> list[str]:
    """Append the requests ``session`` queued in ``workdir``'s outbox, oldest first.

    Each is validated as if live (a verb that does not fit, or comes from another
    session, is refused and appends nothing). Every request file is removed; one
    line per request says what became of it, for the session's transcript.
    """
    from agentrun.agent.verbs import AgentEnv, Report, report

    folder = workdir / OUTBOX
    said: list[str] = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            env = AgentEnv(str(data["build"]), str(data["phase"]), int(data["round"]), session)
            rep = Report(
                verb=str(data["verb"]),
                text=str(data.get("text", "")),
                findings=tuple(str(f) for f in data.get("findings", ())),
            )
            claimed = str(data["session"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            said.append(f"outbox {path.name}: unreadable ({exc}); ignored")
            path.unlink(missing_ok=True)
            continue
        path.unlink(missing_ok=True)
        if claimed != session:
            said.append(f"outbox {path.name}: from session {claimed}, not {session}; refused")
            continue
        try:
            said.append(f"outbox {path.name}: {report(repo, env, rep, queue_if_read_only=False)}")
        except AgentrunError as exc:
            said.append(f"outbox {path.name}: `{rep.verb}` refused: {exc}")
    return said
