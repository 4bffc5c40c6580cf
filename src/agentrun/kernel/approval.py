"""The human plan gate (``[policy] plan_approval = "human"``): once the plan is approved
by its review (or submitted, without plan review), a person approves it too.

The build parks on a question of its own cause, ``plan-approval``, whose text holds the
plan and the two replies: ``approve`` (``plan.approved``: on to implement, or to the
plan's task graph) or an answer with what to change (the next plan round, with that text
as its feedback, counted toward the plan's round limit like any round).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Final

from agentrun.kernel.decisions import RaiseEscalation
from agentrun.kernel.state import BuildState, Escalation

CAUSE: Final = "plan-approval"
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
PLAN_LIMIT = 6000  # characters of the plan the question quotes; the rest is in its artifact
FEEDBACK = "A person read plan round {round} and asked for changes:\n{text}"


def gated(s: BuildState) -> bool:
    """Whether an approved plan waits for a person before the work starts."""
    return s.config.policy.plan_approval == "human"


def waiting(s: BuildState) -> Escalation | None:
    """The open plan-approval question of the build (None: no plan waits)."""
    return next((e for e in s.open_escalations if e.cause == CAUSE), None)


def ask(s: BuildState, escalation_id: str) -> RaiseEscalation:
    """The question the build parks on; the runner puts the plan's text in (``quoting``)."""
    return RaiseEscalation(
        id=escalation_id,
        phase="plan",
        round=s.plan_round,
        cause=CAUSE,
        question=question(s.slug, s.plan_round, s.plan, None),
    )


def quoting(
    decision: RaiseEscalation, slug: str, name: str | None, plan: str | None
) -> RaiseEscalation:
    """``decision`` with the text of the plan ``name`` in its question: the runner reads
    the artifact, as the kernel reads none."""
    if decision.cause != CAUSE or plan is None:
        return decision
    return replace(decision, question=question(slug, decision.round, name, plan))


def question(slug: str, round_: int, name: str | None, plan: str | None) -> str:
    """The plan and the two replies, worded so that neither can be mistaken."""
    where = (
        f"`git agentrun show {slug} --artifact {name}`" if name else f"`git agentrun show {slug}`"
    )
    if plan is None:
        body = f"The plan is in {where}."
    else:
        body = plan.strip()
        if len(body) > PLAN_LIMIT:
            body = f"{_closed(body[:PLAN_LIMIT])}\n\n… (the whole plan: {where})"
        body = _closed(body)
    return (
        f"Plan round {round_} waits for a person's approval before any code is written.\n\n"
        f"---\n\n{body}\n\n---\n\n"
        "Reply `/agentrun approve` to go on, or `/agentrun answer <what to change>` to send "
        f"the plan back for another round (locally: `git agentrun approve {slug}` or "
        f'`git agentrun answer {slug} "…"`).'
    )


def _closed(text: str) -> str:
    """``text`` with a code fence it leaves open closed: else the replies after the plan
    would render as code."""
    fence: str | None = None
    for line in text.splitlines():
        found = _FENCE.match(line)
        if found is None:
            continue
        mark = found.group(1)
        if fence is None:
            fence = mark
        elif mark[0] == fence[0] and len(mark) >= len(fence):
            fence = None
    return text if fence is None else f"{text}\n{fence}"


def sent_back(s: BuildState, asked: Escalation, text: str) -> dict[str, object]:
    """An answer to the plan's question: what to change goes back to the plan, as its next
    round (counted toward the plan's round limit like a review's revise)."""
    feedback = FEEDBACK.format(round=asked.round, text=text)
    return {"stage": "plan", "plan_round": s.plan_round + 1, "feedback": (feedback,)}
