"""A build's life in the fold (``evolve``): its creation and end, people's controls,
runners attaching, retries and reconcile requests. Pure.
"""

from __future__ import annotations

from typing import assert_never

from agentrun import events as ev
from agentrun.kernel import tasks
from agentrun.kernel.session_end import (
    Changes,
)
from agentrun.kernel.state import (
    BuildState,
)
from agentrun.snapshot import read as read_snapshot

# The event payloads, in the groups the fold handles apart (each type in one group).
LifePayload = (
    ev.BuildCreated
    | ev.BuildCompleted
    | ev.BuildFailed
    | ev.BuildPauseRequested
    | ev.BuildPaused
    | ev.BuildResumeRequested
    | ev.BuildResumed
    | ev.BuildAbortRequested
    | ev.BuildAborted
    | ev.RunnerAttached
    | ev.RunnerSetupFailed
    | ev.BuildRetryRequested
    | ev.BuildReconcileRequested
)


def life(s: BuildState, event: ev.Event, p: LifePayload) -> Changes:
    """A build's life: its creation and end, people's controls, runners attaching."""
    match p:
        case ev.BuildCreated():
            config = read_snapshot(p.config)
            return {
                "created_at": event.ts,
                "goal": p.goal,
                "base_ref": p.base_ref,
                "base_sha": p.base_sha,
                "branch": p.branch,
                "source": p.source,
                "issue": p.issue,
                "requested_by": p.requested_by,
                "config": config,
                "allow_empty": p.allow_empty,
                "head": p.base_sha,
                "plan_round_limit": config.policy.max_review_rounds,
                "impl_round_limit": config.policy.max_review_rounds,
            }
        case ev.BuildCompleted():
            return {"status": "complete", "stage": "done"}
        case ev.BuildFailed():
            return {"status": "failed", "reason": p.reason}
        case ev.BuildPauseRequested():
            return {"pause_requested": True}
        case ev.BuildPaused():
            return {"paused": True, "pause_requested": False, "resume_requested": False}
        case ev.BuildResumeRequested():
            return {"resume_requested": True, "pause_requested": False}
        case ev.BuildResumed():
            return {"paused": False, "resume_requested": False}
        case ev.BuildAbortRequested():
            return {"abort_requested": True}
        case ev.BuildAborted():
            return {"status": "aborted", "reason": p.reason, "session": None, "in_flight": None}
        case ev.RunnerAttached():
            return _attached(s, p)
        case ev.RunnerSetupFailed():
            return {
                "setup_failures": s.setup_failures + 1,
                "setup_permanent": s.setup_permanent or p.permanent,
                "reason": p.error,
            }
        case ev.BuildRetryRequested():
            return {**_retry(s, event), **tasks.retried(s)}
        case ev.BuildReconcileRequested():
            return _reconcile_requested(s, p)
        case _:
            assert_never(p)


def _retry(s: BuildState, event: ev.Event) -> Changes:
    """Try again: a failed build re-opens, spent attempts re-arm, open questions close."""
    by = event.actor.login if isinstance(event.actor, ev.HumanActor) else "retry"
    changes: Changes = {
        "attempts": {},
        "interruptions": {},
        "blocked": {},
        "setup_failures": 0,
        "setup_permanent": False,
        "escalations": tuple(
            e.model_copy(update={"answer": "retry", "by": by}) if e.is_open else e
            for e in s.escalations
        ),
    }
    if s.status == "failed":
        changes.update(status="running", reason="")
    return changes


def _reconcile_requested(s: BuildState, p: ev.BuildReconcileRequested) -> Changes:
    """A complete build with an open proposal runs again: reconcile, verify, ready.

    The proposal goes back to draft until verification passes again (DESIGN §5).
    """
    proposal = s.proposal
    if s.status != "complete" or proposal is None or proposal.closed or not s.implemented:
        return {}  # the command refuses this; a hand-written log cannot force it
    return {
        "status": "running",
        "stage": "reconcile",
        "reconcile_base": p.base_sha,
        "proposal": proposal.model_copy(update={"ready": False}),
        "verify_results": {},
        "finalize_results": {},
    }


def _attached(s: BuildState, p: ev.RunnerAttached) -> Changes:
    changes: Changes = {"runner": f"{p.instance}@{p.host}"}
    flight = s.in_flight
    if flight is not None and flight.started and s.updated_at:
        # The dead runner's work ended with its last event; the downtime until this
        # runner came is not work time.
        spent = max((s.updated_at - flight.started).total_seconds(), 0.0)
        changes["active_seconds"] = s.active_seconds + spent
        changes["in_flight"] = flight.model_copy(update={"started": None})
    return changes
