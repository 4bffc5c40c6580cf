"""Phase prompts: templates shipped with the package, overridable per repository.

A repository overrides a phase's prompt with ``.agentrun/prompts/<phase>.md``, read
from the build's base commit (never from the build branch an agent can change).
"""

from __future__ import annotations

import re
from importlib import resources

import pygit2

from agentrun.gitrepo import blob_data, tree_at
from agentrun.kernel.state import BuildState

_FIELD = re.compile(r"\{([a-z]+)\}")
FAMILIES = ("plan", "plan-review", "implement", "code-review", "verify", "finalize")


def template(repo: pygit2.Repository, base_sha: str, family: str) -> str:
    try:
        entry = tree_at(repo, base_sha)[f".agentrun/prompts/{family}.md"]
        return blob_data(repo, entry.id).decode("utf-8")
    except (KeyError, ValueError):
        return resources.files("agentrun").joinpath(f"prompts/{family}.md").read_text("utf-8")


def render_prompt(
    repo: pygit2.Repository,
    state: BuildState,
    phase: str,
    round_: int,
    feedback: tuple[str, ...],
    plan: str | None,
) -> str:
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
    )
    # Only known {names} are filled: an override may hold any other braces verbatim.
    return _FIELD.sub(lambda m: values.get(m[1], m[0]), template(repo, state.base_sha, family))
