"""What a person's request adds to a build's log: one meaning each, from any channel.

The CLI (``git agentrun pause|resume|abort|retry|answer|approve``) and a forge's ``/agentrun``
comments call the same functions; each returns the event to append, or None when the
state already says what was asked (asking twice records nothing), and refuses in one
line what cannot be asked of the build as it is.

``resume`` asks a paused build to go on, and withdraws a pause that was requested but
not yet acknowledged (DESIGN §4: the kernel acknowledges requests at a safe boundary, so
a later request overrides an earlier one the runner has not reached).
"""

from __future__ import annotations

from agentrun import events as ev
from agentrun.errors import AgentrunError, EscalationError
from agentrun.kernel import approval
from agentrun.kernel.state import BuildState, Escalation

NAME_IT = "pass --escalation ID"  # how the CLI names one of several open escalations


class NotRunningError(AgentrunError):
    """The build is finished (complete, failed or aborted): there is nothing to steer."""


def _running(state: BuildState, verb: str) -> None:
    if state.status != "running":
        raise NotRunningError(f"build {state.slug} is {state.status}; there is nothing to {verb}")


def pause(state: BuildState) -> ev.BuildPauseRequested | None:
    _running(state, "pause")
    return None if state.paused or state.pause_requested else ev.BuildPauseRequested()


def resume(state: BuildState) -> ev.BuildResumeRequested | None:
    _running(state, "resume")
    if state.resume_requested or not (state.paused or state.pause_requested):
        return None
    return ev.BuildResumeRequested()


def abort(state: BuildState) -> ev.BuildAbortRequested | None:
    _running(state, "abort")
    return None if state.abort_requested else ev.BuildAbortRequested()


def retry(state: BuildState) -> ev.BuildRetryRequested:
    """A failed build, or a phase out of attempts, tries again (open questions close)."""
    if state.status in ("complete", "aborted"):
        raise NotRunningError(f"build {state.slug} is {state.status}; there is nothing to retry")
    return ev.BuildRetryRequested()


def answer(
    state: BuildState,
    text: str,
    escalation: str | None,
    by: str,
    name_it: str = NAME_IT,
) -> ev.EscalationAnswered:
    """The answer to the open escalation, or to the one named.

    ``name_it`` says, in the asker's channel, how to name one of several open ones.
    """
    if not text.strip():
        raise EscalationError("the answer is empty: say what the agent should do")
    target = _open_one(state, name_it) if escalation is None else _named(state, escalation)
    return ev.EscalationAnswered(id=target.id, answer=text.strip(), by=by)


def approve(state: BuildState, by: str) -> ev.PlanApproved:
    """The approval of the plan that waits for a person; refused when none waits (a build
    parked on another question is answered, not approved)."""
    _running(state, "approve")
    asked = approval.waiting(state)
    if asked is None:
        others = ", ".join(e.id for e in state.open_escalations)
        why = f": it waits on {others}, which `answer` replies to" if others else ""
        raise EscalationError(f"build {state.slug} has no plan waiting for approval{why}")
    return ev.PlanApproved(id=asked.id, by=by)


def _open_one(state: BuildState, name_it: str) -> Escalation:
    open_ = state.open_escalations
    if not open_:
        raise EscalationError(f"build {state.slug} has no open escalation to answer")
    if len(open_) > 1:
        ids = ", ".join(e.id for e in open_)
        raise EscalationError(f"build {state.slug} has several open escalations ({ids}): {name_it}")
    return open_[0]


def _named(state: BuildState, escalation: str) -> Escalation:
    found = [e for e in state.escalations if e.id == escalation]
    if not found:
        known = ", ".join(e.id for e in state.escalations) or "none"
        raise EscalationError(
            f"build {state.slug} has no escalation {escalation!r} (escalations: {known})"
        )
    target = found[0]
    if not target.is_open:
        raise EscalationError(
            f"escalation {target.id} of {state.slug} was already answered by {target.by}: "
            f"{target.answer!r}"
        )
    return target
