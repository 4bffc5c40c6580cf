"""``git agentrun agent <verb>``: an agent's report, queued for the runner to append.

A verb runs in the agent's environment, where the secret variables were removed, so it
cannot scrub what it reports; the runner can (DESIGN §6, §11). The verb only reads: it
validates the report against the build's log and queues it in the worktree's outbox
(:mod:`agentrun.agent.outbox`), and the runner appends it, scrubbed, at its next
heartbeat or after the turn. A verb that does not fit the phase, or comes from a session
that is not the open one (including one the runner already closed as abandoned), is
refused and queues nothing. Runtimes that live inside the runner (the API runtimes'
tools, aider's block, the scripted agent) append through :func:`report` directly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import pygit2

from agentrun import secrets
from agentrun.agent.outbox import OUTBOX, queue
from agentrun.errors import ConcurrentUpdateError, VerbError
from agentrun.events import (
    AgentActor,
    AgentDone,
    CodeReviewVerdict,
    EscalationRaised,
    PlanReviewVerdict,
    PlanSubmitted,
    VerifyVerdict,
)
from agentrun.gitrepo import open_repo
from agentrun.kernel.decide import next_escalation_id
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog, Tip

PHASE_VERBS: dict[str, tuple[str, ...]] = {
    "plan": ("plan", "escalate"),
    "plan-review": ("approve", "revise", "escalate"),
    "code-review": ("approve", "revise", "escalate"),
    "implement": ("done", "escalate"),
    "reconcile": ("done", "escalate"),
    "finalize": ("done", "escalate"),
    "verify": ("pass", "fail", "escalate"),
}
RETRIES = 50
# The main repository's common git dir, set by the runner: under isolation the worktree
# may have a private git dir of its own, which does not hold the build logs.
GIT_DIR_VARIABLE = "AGENTRUN_GIT_DIR"


@dataclass(frozen=True)
class AgentEnv:
    """Who is speaking: from AGENTRUN_BUILD, AGENTRUN_PHASE (``implement@2``), AGENTRUN_SESSION."""

    build: str
    phase: str
    round: int
    session: str

    @property
    def family(self) -> str:
        return self.phase.split(":", 1)[0]


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
    return AgentEnv(build, phase, int(round_text), session)


@dataclass(frozen=True)
class Report:
    verb: str
    text: str = ""
    findings: tuple[str, ...] = ()


class ReadOnlyCache(StateCache):
    """The state cache, read but never written: a verb leaves the repository as it found it."""

    def put(self, slug: str, tip: str, state: BuildState) -> None:
        return


def log_repository(cwd: Path, environ: Mapping[str, str]) -> pygit2.Repository:
    """The repository holding the build logs: ``AGENTRUN_GIT_DIR``, else found from ``cwd``."""
    git_dir = environ.get(GIT_DIR_VARIABLE, "")
    if not git_dir:
        return open_repo(cwd)
    try:
        return pygit2.Repository(git_dir)
    except pygit2.GitError:
        raise VerbError(f"{GIT_DIR_VARIABLE}={git_dir!r} is not a git repository") from None


def worktree_of(cwd: Path) -> Path:
    """The build worktree ``cwd`` is in, whose outbox the runner drains."""
    workdir = open_repo(cwd).workdir
    if not workdir:
        raise VerbError(f"{cwd} is not inside a build's worktree: run the verb in the worktree")
    return Path(workdir)


def submit(env: AgentEnv, rep: Report, cwd: Path, environ: Mapping[str, str]) -> str:
    """Validate the report (reading only) and queue it; returns a one-line confirmation."""
    repo = log_repository(cwd, environ)
    _, state = load_state(EventLog(repo), ReadOnlyCache(repo), env.build)
    check_fits(state, env, rep.verb)
    _, said = _draft(state, env, rep)
    workdir = worktree_of(cwd)
    check_not_queued(workdir, env)
    request = {"build": env.build, "phase": env.phase, "round": env.round}
    request |= {"session": env.session, **asdict(rep), "findings": list(rep.findings)}
    path = queue(workdir, request)
    return (
        f"{rep.verb} queued in {path.relative_to(workdir)}; agentrun records it within a "
        f"heartbeat: {said}"
    )


def check_not_queued(workdir: Path, env: AgentEnv) -> None:
    """A session reports once: a second report while the first waits is refused here."""
    for path in sorted((workdir / OUTBOX).glob("*.json")):
        try:
            claimed = json.loads(path.read_text(encoding="utf-8")).get("session")
        except (OSError, ValueError, AttributeError):
            continue  # unreadable or just drained: the runner judges it
        if claimed == env.session:
            raise VerbError(
                f"session {env.session} already queued a report ({path.name}); nothing queued"
            )


def report(repo: pygit2.Repository, env: AgentEnv, rep: Report) -> str:
    """Append the agent's report to the log; returns a one-line confirmation.

    Called by the runner's process (the outbox's drain, runtimes that run inside it),
    which knows the secret values: what the report carries is scrubbed when appended.
    """
    log = EventLog(repo)
    cache = StateCache(repo)
    for _ in range(RETRIES):
        tip, state = load_state(log, cache, env.build)
        # An agent's process may hold its own key: what it reports is scrubbed of it too.
        secrets.remember_config(state.config, os.environ)
        check_fits(state, env, rep.verb)
        draft, said = _draft(state, env, rep)
        try:
            log.append(env.build, [draft], Tip(tip, state.seq))
        except ConcurrentUpdateError:
            continue  # the runner or a human appended meanwhile: re-read and re-check
        return said
    raise ConcurrentUpdateError(f"the log of {env.build} kept moving; try the verb again")


def check_fits(state: BuildState, env: AgentEnv, verb: str) -> None:
    allowed = PHASE_VERBS.get(env.family, ())
    if verb not in allowed:
        raise VerbError(
            f"`{verb}` does not fit phase {env.phase}; use one of: {', '.join(allowed) or 'none'}"
        )
    session = state.session
    if session is None or session.session != env.session:
        raise VerbError(
            f"session {env.session} is not the open session of build {env.build} "
            "(it ended or was abandoned); nothing recorded"
        )
    if session.phase != env.phase or session.round != env.round:
        raise VerbError(
            f"session {env.session} runs {session.phase}@{session.round}, "
            f"not {env.phase}@{env.round}; nothing recorded"
        )
    if session.report is not None:
        raise VerbError(
            f"session {env.session} already reported ({session.report.type}); nothing recorded"
        )


def _draft(state: BuildState, env: AgentEnv, rep: Report) -> tuple[Draft, str]:
    role = state.session.role if state.session else env.family
    actor = AgentActor(role=role, session=env.session)
    verb = rep.verb
    if verb == "plan":
        if not rep.text.strip():
            raise VerbError("the plan is empty: write the plan to a file and pass its path")
        name = f"plan-r{env.round}.md"
        first = secrets.scrub(rep.text.strip().splitlines()[0])[:100]
        payload: object = PlanSubmitted(session=env.session, plan=name, summary_text=first)
        return Draft(payload, actor, {name: rep.text.encode()}), f"plan submitted ({name})"
    if verb in ("approve", "revise"):
        if verb == "revise" and not rep.findings:
            raise VerbError("`revise` needs at least one --finding saying what to change")
        model = PlanReviewVerdict if env.family == "plan-review" else CodeReviewVerdict
        payload = model(
            session=env.session,
            round=env.round,
            verdict="approve" if verb == "approve" else "revise",
            findings=rep.findings,
        )
        return Draft(payload, actor), f"verdict recorded: {verb}"
    if verb == "done":
        return Draft(AgentDone(session=env.session, summary_text=rep.text), actor), "done recorded"
    if verb in ("pass", "fail"):
        if verb == "fail" and not rep.text.strip():
            raise VerbError("`fail` needs --reason saying what is wrong")
        payload = VerifyVerdict(
            session=env.session, verdict="pass" if verb == "pass" else "fail", reason=rep.text
        )
        return Draft(payload, actor), f"verify verdict recorded: {verb}"
    if not rep.text.strip():
        raise VerbError("`escalate` needs the question to ask")
    esc_id = next_escalation_id(state)
    payload = EscalationRaised(
        id=esc_id,
        phase=env.phase,
        round=env.round,
        source="agent",
        cause="agent",
        question=rep.text.strip(),
        session=env.session,
    )
    return Draft(
        payload, actor
    ), f"escalation {esc_id} raised; the build parks until it is answered"
