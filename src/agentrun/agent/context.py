"""``git agentrun agent context``: what an agent needs, written to the scratch folder."""

from __future__ import annotations

from pathlib import Path

import pygit2

from agentrun.agent.verbs import ReadOnlyCache
from agentrun.kernel import approval
from agentrun.kernel.state import BuildState
from agentrun.kernel.verbs import PHASE_VERBS, AgentEnv, scoped
from agentrun.store.cache import load_state
from agentrun.store.log import EventLog

SCRATCH = Path(".agentrun") / "run"


def ensure_scratch(worktree: Path) -> Path:
    """The scratch folder, ignoring itself so that nothing in it is ever committed."""
    scratch = worktree / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    ignore = scratch / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return scratch


def write_context(repo: pygit2.Repository, env: AgentEnv, worktree: Path) -> Path:
    log = EventLog(repo)
    # An agent's verb: it reads the log and writes only its own scratch folder.
    tip, state = load_state(log, ReadOnlyCache(repo), env.build)
    state = scoped(state, env)
    plan = log.text(tip, state.plan)
    path = ensure_scratch(worktree) / "context.md"
    path.write_text(render_context(state, env, plan), encoding="utf-8")
    return path


def render_context(state: BuildState, env: AgentEnv, plan: str | None) -> str:
    parts = [
        f"# Build {state.slug}: {env.phase} round {env.round}",
        "",
        "## Goal",
        "",
        state.goal,
        "",
        f"Base: {state.base_ref} at {state.base_sha[:12]}; build branch `{state.branch}`.",
    ]
    if plan:
        planning = state.stage in ("plan", "plan-review")
        parts += ["", "## Plan" if planning else "## Approved plan", "", plan]
    if state.feedback:
        parts += ["", "## Feedback for this round", ""]
        parts += [f"- {item}" for item in state.feedback]
    # The plan's question holds the plan, and what a person asked to change is the plan
    # round's feedback: neither is repeated in every later prompt.
    answered = [e for e in state.escalations if not e.is_open and e.cause != approval.CAUSE]
    if answered:
        parts += ["", "## Answers from people", ""]
        parts += [f"- {e.id}: {e.question}\n  Answer ({e.by}): {e.answer}" for e in answered]
    verbs = ", ".join(PHASE_VERBS.get(env.family, ()))
    parts += ["", "## How to finish", "", f"Run `git agentrun agent <verb>`, one of: {verbs}."]
    if reports_usage(state):
        parts += [
            "",
            "Report what you spend with `git agentrun agent usage --tokens-in N --tokens-out M` "
            "(each call adds; `--cost USD` or `--model NAME` prices it): otherwise this "
            "session's usage is unreported and the build's budget cannot hold it.",
        ]
    return "\n".join([*parts, ""])


def reports_usage(state: BuildState) -> bool:
    """Whether the open session's runtime counts on its agent to report usage."""
    from agentrun.agent.usage import reported_by_agent

    session = state.session
    config = state.config.runtime(session.runtime) if session else None
    return config is not None and reported_by_agent(config.kind)
