"""The session outbox: the reports agents' verbs queue for the runner (DESIGN §6).

A verb runs in the agent's environment, which holds none of the secret values, and
under a sandbox or isolation it may not write git metadata at all. So it validates
the report, writes the request to ``<worktree>/.agentrun/run/outbox/<n>.json`` and
exits 0. The runner, which knows the secret values, appends each request through
:func:`agentrun.agent.verbs.report`, validated exactly as if it had been live and
scrubbed like everything it writes: at every heartbeat while the agent runs
(:class:`Drainer`), and once more after the turn (:func:`drain`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentrun.agent.rules import ANY_PHASE_VERBS, AgentEnv, VerbReport, request
from agentrun.errors import AgentrunError, VerbError

# Neither typing, threading nor pygit2 is loaded here at import: the agent's verbs queue
# through this module, and their start must stay fast; the runner's side loads them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    import pygit2

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


def drain(repo: pygit2.Repository, workdir: Path, session: str) -> list[str]:
    """Append the requests ``session`` queued in ``workdir``'s outbox, oldest first.

    Each is validated as if live (a verb that does not fit, or comes from another
    session, is refused and appends nothing). Every request file is removed; one
    line per request says what became of it, for the session's transcript.
    """
    from agentrun.agent.verbs import report

    folder = workdir / OUTBOX
    said: list[str] = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = take(path)
            if data is None:
                continue  # another drainer took it
            task = data.get("task")
            env = AgentEnv(
                str(data["build"]),
                str(data["phase"]),
                int(data["round"]),
                session,
                str(task) if task is not None else None,
            )
            rep = VerbReport(
                verb=str(data["verb"]),
                text=str(data.get("text", "")),
                findings=tuple(str(f) for f in data.get("findings", ())),
                paths=tuple(str(p) for p in data.get("paths", ())),
            )
            claimed = str(data["session"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            said.append(f"outbox {path.name}: unreadable ({exc}); ignored")
            continue
        if claimed != session:
            said.append(f"outbox {path.name}: from session {claimed}, not {session}; refused")
            continue
        try:
            said.append(f"outbox {path.name}: {report(repo, env, rep)}")
        except AgentrunError as exc:
            said.append(f"outbox {path.name}: `{rep.verb}` refused: {exc}")
    return said


class Drainer:
    """Drains a session's outbox every ``interval`` seconds (the heartbeat) in a thread.

    So an escalation, or any report, takes effect while the agent still runs. The
    thread opens its own repository: pygit2 objects are not shared across threads.
    """

    def __init__(self, git_dir: str, workdir: Path, session: str, interval: float) -> None:
        self.git_dir = git_dir
        self.workdir = workdir
        self.session = session
        self.interval = interval
        self.said: list[str] = []
        self._error: BaseException | None = None
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="agentrun-outbox")
        self._thread.start()

    def _run(self) -> None:
        import pygit2

        try:
            repo = pygit2.Repository(self.git_dir)
            while not self._stop.wait(self.interval):
                self.said += drain(repo, self.workdir, self.session)
        except Exception as exc:  # raised again by stop(), in the runner's own thread
            self._error = exc

    def stop(self) -> list[str]:
        """Stop draining; what was drained, one line per request. A failure is raised here."""
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self.said
