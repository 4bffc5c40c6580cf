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
from agentrun.kernel.verbs import AgentEnv, VerbReport, check_fits, verb_draft
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


def report(repo: pygit2.Repository, env: AgentEnv, rep: VerbReport) -> str:
    """Append the agent's report to the log; returns a one-line confirmation.

    Called by the runner's process (the outbox's drain, runtimes that run inside it),
    which knows the secret values: what the report carries is scrubbed when appended.
    """
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
