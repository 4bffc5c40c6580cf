"""Phase prompts: templates shipped with the package, overridable per repository.

A repository overrides a phase's prompt with ``.agentrun/prompts/<phase>.md``, read
from the build's base commit (never from the build branch an agent can change).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources

import pygit2

from agentrun.errors import MalformedEventError
from agentrun.gitrepo import blob_data, tree_at
from agentrun.kernel.state import BuildState

_FIELD = re.compile(r"\{([a-z]+)\}")
FAMILIES = (
    "plan", "plan-review", "implement", "code-review", "verify", "finalize", "reconcile", "select"
)  # fmt: skip
CANDIDATE_DIFF_LIMIT = 12_000  # characters of each candidate's diff the select agent sees


INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
INSTRUCTIONS_LIMIT = 20_000


def _base_file(repo: pygit2.Repository, base_sha: str, path: str) -> str | None:
    """A file of the build's base commit: what the maintainers committed, not the agent."""
    try:
        entry = tree_at(repo, base_sha)[path]
        return blob_data(repo, entry.id).decode("utf-8", "replace")
    except (KeyError, ValueError):
        return None


def template(repo: pygit2.Repository, base_sha: str, family: str) -> str:
    found = _base_file(repo, base_sha, f".agentrun/prompts/{family}.md")
    if found is not None:
        return found
    return resources.files("agentrun").joinpath(f"prompts/{family}.md").read_text("utf-8")


def instructions(repo: pygit2.Repository, base_sha: str) -> str:
    """The repository's own instructions for agents, when it has them."""
    for name in INSTRUCTION_FILES:
        text = _base_file(repo, base_sha, name)
        if text and text.strip():
            clipped = text[:INSTRUCTIONS_LIMIT]
            return f"\n\nThe repository's instructions for agents ({name}):\n\n{clipped}\n"
    return ""


def render_prompt(
    repo: pygit2.Repository,
    state: BuildState,
    phase: str,
    round_: int,
    feedback: tuple[str, ...],
    plan: str | None,
    warn: Callable[[str], object],
    mcp: bool = False,
) -> str:
    """The phase's prompt; ``warn`` is told what the person must see (a damaged memory).
    ``mcp``: the agent has agentrun's MCP tools (``mcp.md``, also overridable), and is
    told to report through them."""
    family, _, step = phase.partition(":")
    if family not in FAMILIES:
        family = "implement"
    text = ""
    if feedback:
        text = "\nFeedback to address in this round:\n\n" + "\n".join(f"- {f}" for f in feedback)
        text += "\n"
    values = dict(
        goal=state.goal,
        build=state.slug,
        phase=phase,
        round=str(round_),
        step=step,
        base=state.base_sha,
        plan=plan or "(no plan was recorded)",
        feedback=text,
        candidates=_offered(repo, state) if family == "select" else "",
    )
    # Only known {names} are filled: an override may hold any other braces verbatim.
    text = _FIELD.sub(lambda m: values.get(m[1], m[0]), template(repo, state.base_sha, family))
    if mcp:
        from agentrun.kernel.verbs import PHASE_VERBS

        verbs = ", ".join(f"`{v}`" for v in PHASE_VERBS.get(family, ()))
        tools = template(repo, state.base_sha, "mcp")
        text = (
            text.rstrip("\n") + "\n" + _FIELD.sub(lambda m: {"verbs": verbs}.get(m[1], m[0]), tools)
        )
    return text + instructions(repo, state.base_sha) + memory_block(repo, state, warn)


def memory_block(repo: pygit2.Repository, state: BuildState, warn: Callable[[str], object]) -> str:
    """The accepted facts of ``refs/agentrun/memory`` this build's prompts carry: those
    about its planned or changed paths first, then the newest ("" when there are none)."""
    from agentrun.kernel.memory import block
    from agentrun.store.memory import read

    try:
        facts = read(repo).facts
    except MalformedEventError as exc:
        # Facts are context, not the build: a damaged memory leaves the prompt without them.
        warn(f"{exc}; this prompt carries no facts")
        return ""
    if not facts:
        return ""
    paths = [*state.changed_paths, *(p for task in state.tasks.values() for p in task.paths)]
    return block(facts, paths, state.config.memory.max_chars, state.slug)


def _offered(repo: pygit2.Repository, state: BuildState) -> str:
    """The passing candidates the select agent compares, numbered from 1: each one's diff
    against the build head they started from, and its verify steps' outcomes."""
    parts = []
    for n, name in enumerate(state.offered, 1):
        c = state.candidates[name]
        diff = repo.diff(state.head, c.head).patch or "(no change)"
        if len(diff) > CANDIDATE_DIFF_LIMIT:
            diff = diff[:CANDIDATE_DIFF_LIMIT] + "\n[... diff cut ...]\n"
        verdicts = ", ".join(f"{step} {r.outcome}" for step, r in c.verify_results.items())
        parts.append(
            f"## Candidate {n} ({c.runtime})\n\nVerify: {verdicts or 'no steps'}\n\n"
            f"```diff\n{diff}```"
        )
    return "\n\n".join(parts)
