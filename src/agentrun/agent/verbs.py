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
from dataclasses import asdict
from pathlib import Path

import pygit2

from agentrun import secrets
from agentrun.agent.outbox import OUTBOX, queue
from agentrun.errors import VerbError
from agentrun.gitrepo import open_repo
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.kernel.verbs import (
    ANY_PHASE_VERBS,
    AgentEnv,
    VerbReport,
    check_fits,
    check_session,
    scoped,
    verb_draft,
)
from agentrun.store.append import append_decided
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

# The main repository's common git dir, set by the runner: under isolation the worktree
# may have a private git dir of its own, which does not hold the build logs.
GIT_DIR_VARIABLE = "AGENTRUN_GIT_DIR"


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


def submit(env: AgentEnv, rep: VerbReport, cwd: Path, environ: Mapping[str, str]) -> str:
    """Validate the report (reading only) and queue it; returns a one-line confirmation."""
    repo = log_repository(cwd, environ)
    _, state = load_state(EventLog(repo), ReadOnlyCache(repo), env.build)
    check_fits(state, env, rep.verb)
    _, said = verb_draft(state, env, rep, secrets.scrub)
    workdir = worktree_of(cwd)
    check_not_queued(workdir, env)
    request = {"build": env.build, "phase": env.phase, "round": env.round, "task": env.task}
    request |= {"session": env.session, **asdict(rep), "findings": list(rep.findings)}
    path = queue(workdir, request)
    return (
        f"{rep.verb} queued in {path.relative_to(workdir)}; agentrun records it within a "
        f"heartbeat: {said}"
    )


def submit_fact(
    env: AgentEnv, text: str, paths: tuple[str, ...], cwd: Path, environ: Mapping[str, str]
) -> str:
    """``agent remember``: check the session and the fact (reading only), queue it."""
    from agentrun.commands.memory import clean_paths, clean_text

    repo = log_repository(cwd, environ)
    _, state = load_state(EventLog(repo), ReadOnlyCache(repo), env.build)
    check_session(scoped(state, env), env)
    if not text.strip():
        raise VerbError("`remember` needs the fact: what later builds here should know")
    # Checked here as the runner will check it, so that a refused fact is said at once.
    rep = VerbReport("remember", clean_text(text), (), clean_paths(paths))
    workdir = worktree_of(cwd)
    request = {"build": env.build, "phase": env.phase, "round": env.round, "task": env.task}
    request |= {"session": env.session, **asdict(rep), "findings": [], "paths": list(rep.paths)}
    path = queue(workdir, request)
    return (
        f"fact queued in {path.relative_to(workdir)}; agentrun records it as proposed: "
        "no later prompt carries it until a person accepts it"
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


def report(repo: pygit2.Repository, env: AgentEnv, rep: VerbReport) -> str:
    """Append the agent's report to the log; returns a one-line confirmation.

    Called by the runner's process (the outbox's drain, runtimes that run inside it),
    which knows the secret values: what the report carries is scrubbed when appended.
    """
    if rep.verb == "remember":
        return remembered(repo, env, rep)
    said: list[str] = []

    def decide(state: BuildState) -> list[Draft]:
        # An agent's process may hold its own key: what it reports is scrubbed of it too.
        secrets.remember_config(state.config, os.environ)
        check_fits(state, env, rep.verb)  # re-checked on every fresh read
        draft, text = verb_draft(state, env, rep, secrets.scrub)
        said[:] = [text]
        return [draft]

    append_decided(EventLog(repo), env.build, decide, what=f"the {rep.verb} of {env.session}")
    return said[0]


def remembered(repo: pygit2.Repository, env: AgentEnv, rep: VerbReport) -> str:
    """Add an agent's fact to the memory, proposed (agents read untrusted issue text);
    returns a line saying so. Scrubbed of the build's secrets like the rest."""
    from agentrun.commands.memory import add
    from agentrun.events import AgentActor

    _, state = load_state(EventLog(repo), StateCache(repo), env.build)
    secrets.remember_config(state.config, os.environ)
    view = scoped(state, env)
    check_session(view, env)
    assert view.session is not None
    actor = AgentActor(role=view.session.role, session=env.session)
    phase = f"{env.phase}@{env.round}"
    added = add(
        repo,
        rep.text,
        "agent",
        accepted=False,
        actor=actor,
        build=env.build,
        phase=phase,
        paths=rep.paths,
    )
    if not added.new:
        return f"fact {added.fact.id} already says this ({added.fact.state}); nothing added"
    return (
        f"fact {added.fact.id} proposed; a person accepts it with "
        f"`git agentrun memory accept {added.fact.id}`"
    )
