"""The runner's side of the session outbox (``agent.outbox``): each queued request is
appended through :func:`agentrun.agent.verbs.report`, validated exactly as if it had been
live and scrubbed like everything the runner writes: at every heartbeat while the agent
runs (:class:`Drainer`), and once more after the turn (:func:`drain`).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pygit2

from agentrun.agent.outbox import OUTBOX, take
from agentrun.agent.verbs import report
from agentrun.errors import AgentrunError
from agentrun.kernel.rules import AgentEnv, VerbReport


def drain(repo: pygit2.Repository, workdir: Path, session: str) -> list[str]:
    """Append the requests ``session`` queued in ``workdir``'s outbox, oldest first.

    Each is validated as if live (a verb that does not fit, or comes from another
    session, is refused and appends nothing). Every request file is removed; one
    line per request says what became of it, for the session's transcript.
    """
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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="agentrun-outbox")
        self._thread.start()

    def _run(self) -> None:
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
