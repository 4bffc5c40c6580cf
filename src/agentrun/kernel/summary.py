"""A build's summary: the row ``status`` shows and ``status --json`` prints, from its state.

Pure, so that it can be kept in the summary index (store/summary.py) keyed by the log's
tip. What depends on who runs the build now is left at its pure value: ``runner`` is
null and ``state`` is the state's own name; ``commands/status.py`` lays the leases over
it where status is read (``stopped``, DESIGN §13).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentrun.kernel import approval
from agentrun.kernel.ladder import rung_spend
from agentrun.kernel.state import BuildState, Escalation, TaskState
from agentrun.kernel.tasks import branch_of, task_phase, task_state_name


@dataclass(frozen=True)
class TaskRow:
    """One task of a build's graph as ``status`` and ``show`` list it."""

    task: TaskState
    state_name: str
    phase: str
    escalation: Escalation | None
    branch: str

    def as_json(self) -> dict[str, Any]:
        t = self.task
        return {
            "id": t.id,
            "state": self.state_name,
            "phase": self.phase,
            "round": t.impl_round,
            "escalation": None if self.escalation is None else self.escalation.id,
            "usage": t.usage.model_dump(mode="json"),
            "sessions": t.sessions,
            "deps": list(t.deps),
            "branch": self.branch,
            "runner": None,
        }


def task_rows(state: BuildState) -> list[TaskRow]:
    """The build's tasks in the plan's order, each in its own state."""
    found = []
    for t in state.tasks.values():
        asked = next((e for e in state.open_escalations if e.task == t.id), None)
        branch = branch_of(state.branch, t.id)
        found.append(TaskRow(t, task_state_name(state, t), task_phase(t), asked, branch))
    return found


def summarize(state: BuildState) -> dict[str, Any]:
    """``row``: the build as ``status --json`` prints it (``runner`` null, ``state`` and
    the tasks' states as the log has them); ``status``: the state's own status (task
    leases matter only while it is ``running``); ``approval``: a plan waits for a person;
    ``cells`` and ``tasks``: the table's cells but the state and the age (BUILD, PHASE,
    ROUND, ESCALATION, PROPOSAL, TOKENS, COST; a task's id and state first)."""
    s = state
    escalation = next(iter(s.open_escalations), None)
    unpriced = bool(s.unpriced_models)
    return {
        "row": row_json(s),
        "status": s.status,
        "approval": approval.waiting(s) is not None,
        "cells": [
            s.slug,
            s.phase_label,
            str(s.current_round),
            escalation.id if escalation else "-",
            proposal_cell(s),
            tokens_cell(s.usage.tokens, s.usage.reported),
            cost_cell(s.usage.cost_usd, s.usage.tokens, unpriced),
        ],
        "tasks": [
            [
                t.task.id,
                t.state_name,
                t.phase,
                str(t.task.impl_round),
                t.escalation.id if t.escalation else "-",
                tokens_cell(t.task.usage.tokens, t.task.usage.reported),
                cost_cell(t.task.usage.cost_usd, t.task.usage.tokens, unpriced),
            ]
            for t in task_rows(s)
        ],
    }


def tokens_cell(tokens: int, reported: bool) -> str:
    """A TOKENS cell: ``unreported`` for sessions whose agent reported nothing."""
    return "unreported" if not reported and not tokens else f"{tokens:,}"


def cost_cell(cost: float | None, tokens: int, unpriced: bool) -> str:
    """A COST cell; ``?`` marks a total that may leave out sessions of unknown price
    (``unpriced``: the build had some)."""
    if cost is None:
        return "unknown" if tokens else "-"
    return f"${cost:.4f}" + ("?" if unpriced else "")


def proposal_cell(s: BuildState) -> str:
    if s.proposal is None:
        return "-"
    p = s.proposal
    flag = "merged" if p.merged else "closed" if p.closed else ("ready" if p.ready else "draft")
    return f"#{p.number} {flag}"


def row_json(s: BuildState) -> dict[str, Any]:
    escalation = next(iter(s.open_escalations), None)
    return {
        "slug": s.slug,
        "state": s.state_name,
        "phase": s.phase_label,
        "round": s.current_round,
        "escalation": None
        if escalation is None
        else {"id": escalation.id, "question": escalation.question, "phase": escalation.phase},
        "proposal": None
        if s.proposal is None
        else {
            "forge": s.proposal.forge,
            "number": s.proposal.number,
            "url": s.proposal.url,
            "ready": s.proposal.ready,
            "closed": s.proposal.closed,
            "merged": s.proposal.merged,
        },
        "created_at": _iso(s.created_at),
        "updated_at": _iso(s.updated_at),
        "usage": {
            **s.usage.model_dump(mode="json"),
            # Models whose price is unknown: their sessions are not in cost_usd.
            "unpriced": list(s.unpriced_models),
        },
        "runner": None,
        "archived": False,
        "tasks": [t.as_json() for t in task_rows(s)],
        "candidates": candidates_json(s),
        "rungs": [
            {
                "role": r.role,
                "rung": r.rung,
                "runtime": r.runtime,
                "current": r.current,
                "usage": r.usage.model_dump(mode="json"),
            }
            for r in rung_spend(s)
        ],
    }


def candidates_json(s: BuildState) -> list[dict[str, Any]]:
    """Best of N: every round's candidates, and those of the round under way."""
    found: list[dict[str, Any]] = [
        {
            "round": c.round,
            "id": c.id,
            "runtime": c.runtime,
            "passed": c.passed,
            "failing": c.failing,
            "chosen": c.chosen,
            "head": c.head,
            "tokens": c.tokens,
        }
        for c in s.candidate_history
    ]
    found += [
        {
            "round": s.candidate_round,
            "id": c.id,
            "runtime": c.runtime,
            "passed": c.stage == "passed" if c.stage in ("passed", "failed") else None,
            "failing": c.failing,
            "chosen": None,
            "head": c.head,
            "tokens": c.usage.tokens,
        }
        for c in s.candidates.values()
    ]
    return found


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
