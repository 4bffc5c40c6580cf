"""The session outbox: the reports agents' verbs queue for the runner (DESIGN §6).

A verb runs in the agent's environment, which holds none of the secret values, and
under a sandbox or isolation it may not write git metadata at all. So it validates
the report, writes the request to ``<worktree>/.agentrun/run/outbox/<n>.json`` and
exits 0. The runner, which knows the secret values, drains the outbox
(:mod:`agentrun.agent.drain`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentrun.errors import VerbError
from agentrun.kernel.rules import ANY_PHASE_VERBS, AgentEnv, VerbReport, request

# Neither typing, threading nor pygit2 is loaded here at import: the agent's verbs queue
# through this module, and their start must stay fast; the runner's side loads them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


OUTBOX = Path(".agentrun") / "run" / "outbox"
VERSION = 1
TAKEN = ".taken"  # a request one drainer claimed (renamed), so that no other takes it too


def queue(workdir: Path, request: Mapping[str, Any], under: Path = OUTBOX) -> Path:
    """Write one request to the outbox of the worktree ``workdir`` (or the folder ``under``
    it names); returns its path."""
    folder = workdir / under
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


def enqueue(workdir: Path, env: AgentEnv, rep: VerbReport, said: str) -> str:
    """Queue a checked report in ``workdir``'s outbox; returns the verb's confirmation."""
    check_not_queued(workdir, env)
    path = queue(workdir, request(env, rep))
    return (
        f"{rep.verb} queued in {path.relative_to(workdir)}; agentrun records it within a "
        f"heartbeat: {said}"
    )


def check_not_queued(workdir: Path, env: AgentEnv) -> None:
    """A session reports once: a second report while the first waits is refused here."""
    for path in sorted((workdir / OUTBOX).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            claimed, verb = data.get("session"), data.get("verb")
        except (OSError, ValueError, AttributeError):
            continue  # unreadable or just drained: the runner judges it
        if claimed == env.session and verb not in ANY_PHASE_VERBS:
            raise VerbError(
                f"session {env.session} already queued a report ({path.name}); nothing queued"
            )


def take(path: Path) -> dict[str, Any] | None:
    """Claim one queued request and read it; the file is gone afterwards. None: another
    drainer took it first. An unreadable request raises ``ValueError`` (or ``OSError``)."""
    taken = path.with_name(path.name + TAKEN)
    try:
        path.rename(taken)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(taken.read_text(encoding="utf-8"))
    finally:
        taken.unlink(missing_ok=True)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data
