"""People and the forge in the fold (``evolve``): questions and answers, the plan's
approval, proposals, reviews, the base and its CI, observations. Pure.
"""

from __future__ import annotations

from typing import assert_never

from agentrun import events as ev
from agentrun.kernel import approval, gate
from agentrun.kernel.session_end import (
    Changes,
    escalation,
    report,
    work_starts,
)
from agentrun.kernel.state import (
    FEEDBACK_TAIL,
    BuildState,
    Proposal,
    attempt_key,
)

PeoplePayload = (
    ev.EscalationRaised
    | ev.EscalationAnswered
    | ev.PlanApproved
    | ev.ProposalOpened
    | ev.PublicationPushed
    | ev.ProposalReady
    | ev.ProposalClosed
    | ev.ObservationRecorded
    | ev.FeedbackReceived
    | ev.ForgeCursor
    | ev.BaseMoved
    | ev.MemoryAdded
    | ev.MemoryAccepted
    | ev.MemoryForgotten
    | ev.ChecksSeen
)


def people(s: BuildState, event: ev.Event, p: PeoplePayload) -> Changes:
    """Questions and answers, the forge (proposals, reviews, the base, its CI), notes."""
    match p:
        case ev.EscalationRaised():
            if p.source == "agent":
                # Opened only when the session ends well (see session_end.session_ended).
                return {"escalation_count": s.escalation_count + 1, **report(s, p)}
            return {
                "escalation_count": s.escalation_count + 1,
                "escalations": (*s.escalations, escalation(p)),
            }
        case ev.EscalationAnswered():
            return _answered(s, p)
        case ev.PlanApproved():
            return _plan_approved(s, p)
        case ev.ProposalOpened():
            proposal = Proposal(forge=p.forge, number=p.number, url=p.url)
            return {"proposal": proposal, "published_head": p.head}
        case ev.PublicationPushed():
            return {"published_head": p.sha}
        case ev.ProposalReady():
            return {
                "proposal": s.proposal.model_copy(update={"ready": True}) if s.proposal else None
            }
        case ev.ProposalClosed():
            if s.proposal is None:
                return {}
            return {"proposal": s.proposal.model_copy(update={"closed": True, "merged": p.merged})}
        case ev.ObservationRecorded():
            where = f"{p.phase} ({s.task})" if s.task else p.phase
            return {"observations": (*s.observations, f"{where}: {p.text}")}
        case ev.FeedbackReceived():
            text = f"Review {p.review} by {p.author} on #{p.number}:\n{p.text[-FEEDBACK_TAIL:]}"
            return {
                "pending_feedback": (*s.pending_feedback, text),
                "forge_review": max(s.forge_review, p.review),
            }
        case ev.ForgeCursor():
            return {
                "forge_comment": max(s.forge_comment, p.comment),
                "forge_review": max(s.forge_review, p.review),
            }
        case ev.BaseMoved():
            if s.status != "running" or not s.implemented:
                return {}
            return {"stage": "reconcile", "reconcile_base": p.base_sha}
        case ev.MemoryAdded() | ev.MemoryAccepted() | ev.MemoryForgotten():
            return {}  # facts live in refs/agentrun/memory, folded by kernel.memory
        case ev.ChecksSeen():
            return gate.seen(s, p, event.ts)
        case _:
            assert_never(p)


def _answered(s: BuildState, p: ev.EscalationAnswered) -> Changes:
    escalations = []
    changes: Changes = {}
    for esc in s.escalations:
        if esc.id == p.id and esc.is_open:
            esc = esc.model_copy(update={"answer": p.answer, "by": p.by})
            key = attempt_key(esc.phase, esc.round)
            # An answer re-arms whatever budget raised the question.
            if esc.cause == "budget":
                changes["budget_grants"] = s.budget_grants + 1
                changes["accepted_unpriced"] = s.unpriced_models
            if esc.cause == "empty":
                changes["allow_empty"] = True
            if esc.cause == "stall":
                changes["stall"] = ()
            if esc.cause == "checks-timeout":
                changes.update(gate.rearmed())
            if esc.cause == "round-limit":
                step = s.config.policy.max_review_rounds
                if esc.phase == "plan":
                    changes["plan_round_limit"] = s.plan_round_limit + step
                else:
                    changes["impl_round_limit"] = s.impl_round_limit + step
            changes["attempts"] = {k: v for k, v in s.attempts.items() if k != key}
            changes["interruptions"] = {k: v for k, v in s.interruptions.items() if k != key}
            changes["blocked"] = {k: v for k, v in s.blocked.items() if k != key}
            changes["feedback"] = (*s.feedback, f"Answer to {esc.id} ({esc.question}): {p.answer}")
            if esc.cause == approval.CAUSE:
                changes.update(approval.sent_back(s, esc, p.answer))
        escalations.append(esc)
    changes["escalations"] = tuple(escalations)
    return changes


def _plan_approved(s: BuildState, p: ev.PlanApproved) -> Changes:
    """A person approved the plan that waited: the work starts (implement@1, or the graph)."""
    asked = approval.waiting(s)
    if asked is None or asked.id != p.id or s.stage != "plan-approval":
        return {}  # `approve` refuses this; a hand-written log cannot force it
    closed = asked.model_copy(update={"answer": "approved", "by": p.by})
    escalations = tuple(closed if e.id == p.id else e for e in s.escalations)
    return {"escalations": escalations, **work_starts(s, s.graph)}
