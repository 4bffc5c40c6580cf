"""``git agentrun agent context``: what an agent needs, written to the scratch folder.

The context is rendered from the state's JSON form (the state cache's), so that the
verb's quick path (:mod:`agentrun.agent.quick`), which reads that cache without the
models, and the full path render with the one function here.
"""

from __future__ import annotations

from pathlib import Path

from agentrun.kernel.rules import PHASE_VERBS, REPORTED_BY_AGENT, AgentEnv

TYPE_CHECKING = False  # not typing itself: loading it costs the verbs' start
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    import pygit2

    from agentrun.kernel.state import BuildState

SCRATCH = Path(".agentrun") / "run"
CONTEXT = "context.md"
# kernel.approval.CAUSE (a test pins it): the plan's own question, which is not repeated.
PLAN_APPROVAL = "plan-approval"


def ensure_scratch(worktree: Path) -> Path:
    """The scratch folder, ignoring itself so that nothing in it is ever committed."""
    scratch = worktree / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    ignore = scratch / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return scratch


def write_context(repo: pygit2.Repository, env: AgentEnv, worktree: Path) -> Path:
    from agentrun.agent.verbs import ReadOnlyCache
    from agentrun.kernel.verbs import scoped
    from agentrun.store.cache import load_state
    from agentrun.store.log import EventLog

    log = EventLog(repo)
    # An agent's verb: it reads the log and writes only its own scratch folder.
    tip, state = load_state(log, ReadOnlyCache(repo), env.build)
    state = scoped(state, env)
    return write_rendered(worktree, render_context(state, env, log.text(tip, state.plan)))


def write_rendered(worktree: Path, text: str) -> Path:
    path = ensure_scratch(worktree) / CONTEXT
    path.write_text(text, encoding="utf-8")
    return path


def render_context(state: BuildState, env: AgentEnv, plan: str | None) -> str:
    return render(state.model_dump(mode="json"), env, plan)


def render(state: Mapping[str, Any], env: AgentEnv, plan: str | None) -> str:
    """The context of ``state`` (a ``BuildState`` in its JSON form) for ``env``'s session."""
    parts = [
        f"# Build {state['slug']}: {env.phase} round {env.round}",
        "",
        "## Goal",
        "",
        state["goal"],
        "",
        f"Base: {state['base_ref']} at {state['base_sha'][:12]}; build branch `{state['branch']}`.",
    ]
    if plan:
        planning = state["stage"] in ("plan", "plan-review")
        parts += ["", "## Plan" if planning else "## Approved plan", "", plan]
    if state["feedback"]:
        parts += ["", "## Feedback for this round", ""]
        parts += [f"- {item}" for item in state["feedback"]]
    # The plan's question holds the plan, and what a person asked to change is the plan
    # round's feedback: neither is repeated in every later prompt.
    answered = [
        e for e in state["escalations"] if e["answer"] is not None and e["cause"] != PLAN_APPROVAL
    ]
    if answered:
        parts += ["", "## Answers from people", ""]
        parts += [
            f"- {e['id']}: {e['question']}\n  Answer ({e['by']}): {e['answer']}" for e in answered
        ]
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


def reports_usage(state: Mapping[str, Any]) -> bool:
    """Whether the open session's runtime counts on its agent to report usage.

    As ``Config.runtime`` resolves a ``roles`` entry (``NAME`` or ``NAME:MODEL``): only a
    configured ``[runtimes.NAME]`` can be of such a kind (the built-in kinds are not).
    """
    session = state["session"]
    if session is None:
        return False
    table = state["config"]["runtimes"].get(str(session["runtime"]).partition(":")[0])
    return table is not None and table["kind"] in REPORTED_BY_AGENT
