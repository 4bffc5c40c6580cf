"""What a verb may say, and who may say it: the rules every path to the log shares.

An agent runs ``git agentrun agent <verb>`` several times per session, so the verb's own
process must start fast (:mod:`agentrun.agent.quick`). Everything here is therefore
plain Python, with no model, no git library and no CLI framework: the full path
(:mod:`agentrun.kernel.verbs`, over a :class:`~agentrun.kernel.state.BuildState`), the
quick one (over the state cache's JSON) and the runner's drain all check a report here,
so a refusal says the same thing whichever path met it.
"""

from __future__ import annotations

from agentrun.errors import VerbError

TYPE_CHECKING = False  # typing itself is not loaded: it costs the verb's start
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

PHASE_VERBS: dict[str, tuple[str, ...]] = {
    "plan": ("plan", "escalate"),
    "plan-review": ("approve", "revise", "escalate"),
    "code-review": ("approve", "revise", "escalate"),
    "implement": ("done", "escalate"),
    "reconcile": ("done", "escalate"),
    "finalize": ("done", "escalate"),
    "verify": ("pass", "fail", "escalate"),
    "select": ("select", "escalate"),
}

# Verbs any phase takes, beside its own; they end nothing (the session reports after them).
ANY_PHASE_VERBS = ("remember",)

# The verbs whose event needs nothing of the state but the open session: the quick path
# checks and queues them from the state cache alone.
PLAIN_VERBS = ("approve", "revise", "done", "pass", "fail")

# The main repository's common git dir, set by the runner: under isolation the worktree
# may have a private git dir of its own, which does not hold the build logs.
GIT_DIR_VARIABLE = "AGENTRUN_GIT_DIR"

# Runtime kinds whose sessions report usage only through ``agent usage``.
REPORTED_BY_AGENT = ("command",)


class _Record:
    """A small immutable record: equal, hashed and shown by its fields (``__slots__``).

    Not a dataclass nor a NamedTuple: their modules cost the verb's start more than the
    rest of this one.
    """

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def _set(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)


class AgentEnv(_Record):
    """Who is speaking: from AGENTRUN_BUILD, AGENTRUN_PHASE (``implement@2``), AGENTRUN_SESSION.

    ``task``: AGENTRUN_TASK, the task of the build's graph it works on.
    """

    __slots__ = ("build", "phase", "round", "session", "task")
    build: str
    phase: str
    round: int
    session: str
    task: str | None

    def __init__(
        self, build: str, phase: str, round: int, session: str, task: str | None = None
    ) -> None:
        self._set(build=build, phase=phase, round=round, session=session, task=task)

    @property
    def family(self) -> str:
        return self.phase.split(":", 1)[0]


class VerbReport(_Record):
    """What an agent said with a verb: the verb, its text, its findings; ``paths``: the
    globs a fact of ``remember --path`` concerns."""

    __slots__ = ("findings", "paths", "text", "verb")
    verb: str
    text: str
    findings: tuple[str, ...]
    paths: tuple[str, ...]

    def __init__(
        self, verb: str, text: str = "", findings: tuple[str, ...] = (), paths: tuple[str, ...] = ()
    ) -> None:
        self._set(verb=verb, text=text, findings=findings, paths=paths)


class Speaker(_Record):
    """What the checks need of a build's open session (``OpenSession`` or its JSON);
    ``reported``: the type of the event it already reported with, if any."""

    __slots__ = ("phase", "reported", "round", "session")
    session: str
    phase: str
    round: int
    reported: str | None

    def __init__(self, session: str, phase: str, round: int, reported: str | None) -> None:
        self._set(session=session, phase=phase, round=round, reported=reported)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Speaker | None:
        """From the state cache's ``session`` (``OpenSession.model_dump(mode="json")``)."""
        if data is None:
            return None
        report = data["report"]
        reported = None if report is None else str(report["type"])
        return cls(str(data["session"]), str(data["phase"]), int(data["round"]), reported)


def agent_env(environ: Mapping[str, str]) -> AgentEnv:
    build = environ.get("AGENTRUN_BUILD", "")
    phase_at = environ.get("AGENTRUN_PHASE", "")
    session = environ.get("AGENTRUN_SESSION", "")
    if not (build and phase_at and session):
        raise VerbError(
            "agent verbs run inside an agentrun session: AGENTRUN_BUILD, AGENTRUN_PHASE and "
            "AGENTRUN_SESSION must be set (the runner sets them for the agent)"
        )
    phase, _, round_text = phase_at.rpartition("@")
    if not phase or not round_text.isdigit():
        raise VerbError(f"AGENTRUN_PHASE={phase_at!r} is not of the form <phase>@<round>")
    return AgentEnv(build, phase, int(round_text), session, environ.get("AGENTRUN_TASK") or None)


def check_fits(open_session: Speaker | None, env: AgentEnv, verb: str) -> None:
    """``verb`` fits ``env``'s phase, ``env`` speaks for the open session, which has not
    reported yet."""
    allowed = PHASE_VERBS.get(env.family, ())
    if verb not in allowed:
        raise VerbError(
            f"`{verb}` does not fit phase {env.phase}; use one of: {', '.join(allowed) or 'none'}"
        )
    check_speaker(open_session, env)
    assert open_session is not None
    if open_session.reported is not None:
        raise VerbError(
            f"session {env.session} already reported ({open_session.reported}); nothing recorded"
        )


def check_speaker(open_session: Speaker | None, env: AgentEnv) -> None:
    """``env`` speaks for the open session of its build, in its phase and round (what
    ``remember``, which any phase takes and which ends nothing, needs)."""
    if open_session is None or open_session.session != env.session:
        raise VerbError(
            f"session {env.session} is not the open session of build {env.build} "
            "(it ended or was abandoned); nothing recorded"
        )
    if open_session.phase != env.phase or open_session.round != env.round:
        raise VerbError(
            f"session {env.session} runs {open_session.phase}@{open_session.round}, "
            f"not {env.phase}@{env.round}; nothing recorded"
        )


def plain_said(rep: VerbReport) -> str:
    """The confirmation of a plain verb's report (:data:`PLAIN_VERBS`), or its refusal."""
    verb = rep.verb
    if verb == "revise" and not rep.findings:
        raise VerbError("`revise` needs at least one --finding saying what to change")
    if verb == "fail" and not rep.text.strip():
        raise VerbError("`fail` needs --reason saying what is wrong")
    if verb in ("approve", "revise"):
        return f"verdict recorded: {verb}"
    if verb in ("pass", "fail"):
        return f"verify verdict recorded: {verb}"
    if verb == "done":
        return "done recorded"
    raise ValueError(f"{verb!r} is not a plain verb")


def request(env: AgentEnv, rep: VerbReport) -> dict[str, Any]:
    """The outbox request a report is queued as (what :func:`agentrun.agent.drain.drain`
    reads back)."""
    return {
        "build": env.build,
        "phase": env.phase,
        "round": env.round,
        "task": env.task,
        "session": env.session,
        "verb": rep.verb,
        "text": rep.text,
        "findings": list(rep.findings),
        "paths": list(rep.paths),
    }
