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

import os
from collections.abc import Mapping
from pathlib import Path

import pygit2

from agentrun import secrets
from agentrun.agent.outbox import enqueue, queue
from agentrun.errors import VerbError
from agentrun.gitrepo import open_repo
from agentrun.kernel.draft import Draft
from agentrun.kernel.rules import GIT_DIR_VARIABLE, agent_env, request
from agentrun.kernel.state import BuildState
from agentrun.kernel.verbs import (
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

__all__ = ["agent_env", "log_repository", "report", "submit", "submit_fact", "worktree_of"]


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
    return enqueue(worktree_of(cwd), env, rep, said)


def submit_fact(
    env: AgentEnv, text: str, paths: tuple[str, ...], cwd: Path, environ: Mapping[str, str]
) -> str:
    """``agent remember``: check the session and the fact (reading only), queue it."""
    from agentrun.kernel.memory import clean_paths
    from agentrun.store.facts import clean_text

    repo = log_repository(cwd, environ)
    _, state = load_state(EventLog(repo), ReadOnlyCache(repo), env.build)
    check_session(scoped(state, env), env)
    if not text.strip():
        raise VerbError("`remember` needs the fact: what later builds here should know")
    # Checked here as the runner will check it, so that a refused fact is said at once.
    rep = VerbReport("remember", clean_text(text), (), clean_paths(paths))
    workdir = worktree_of(cwd)
    path = queue(workdir, request(env, rep))
    return (
        f"fact queued in {path.relative_to(workdir)}; agentrun records it as proposed: "
        "no later prompt carries it until a person accepts it"
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
    from agentrun.events import AgentActor
    from agentrun.store.facts import add

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
