"""What a runner records of itself: attaching, acknowledging, publishing, and what a
decision makes that needs nothing run.

A runner that attaches takes over from whoever ran the build before: the session a dead
runner left open is closed as ``abandoned`` (so its late verbs are refused) and a phase
it left in flight fails as interrupted, so it runs again from its start (DESIGN §4, §11).
"""

from __future__ import annotations

from typing import Literal, assert_never

from agentrun import events as ev
from agentrun.kernel import checks
from agentrun.kernel.decide import (
    Acknowledge,
    Climb,
    Complete,
    Fail,
    Publish,
    RaiseEscalation,
    Recorded,
    SkipVerify,
    StartCandidates,
    StartTask,
)
from agentrun.kernel.draft import Draft
from agentrun.kernel.guard import next_escalation_id
from agentrun.kernel.state import BuildState

_ACKS = {"pause": ev.BuildPaused, "resume": ev.BuildResumed, "abort": ev.BuildAborted}


def attached(state: BuildState, instance: str, host: str, pid: int) -> list[Draft]:
    """The runner ``instance`` (on ``host``, process ``pid``) attaches to the build."""
    drafts = [
        Draft(ev.RunnerAttached(instance=instance, host=host, pid=pid, resumed_from_seq=state.seq))
    ]
    previous = state.runner or "a runner"
    session = state.session.session if state.session is not None else None
    if session is not None:
        error = f"{previous} stopped during the session"
        drafts.append(Draft(ev.SessionEnded(session=session, outcome="abandoned", error=error)))
    if state.in_flight is not None and state.status == "running":
        flight = state.in_flight
        failed = ev.PhaseFailed(
            phase=flight.phase,
            round=flight.round,
            attempt=flight.attempt,
            error=f"interrupted: {previous} stopped before {flight.key} finished",
            session=session,
            interrupted=True,
        )
        drafts.append(Draft(failed))
    return drafts


def acknowledged(control: Literal["pause", "resume", "abort"], instance: str) -> Draft:
    """The kernel's acknowledgement of a person's request, at a safe boundary."""
    return Draft(_ACKS[control](reason=f"acknowledged by {instance}"))


def made(state: BuildState, decision: Recorded, instance: str) -> list[Draft]:
    """The events of a decision that runs nothing."""
    match decision:
        case Acknowledge():
            return [acknowledged(decision.control, instance)]
        case SkipVerify():
            return [checks.skipped(decision)]
        case RaiseEscalation():
            raised = ev.EscalationRaised(
                id=decision.id,
                phase=decision.phase,
                round=decision.round,
                source="policy",
                cause=decision.cause,
                question=decision.question,
            )
            return [Draft(raised)]
        case Complete():
            return [Draft(ev.BuildCompleted(summary_text=state.goal))]
        case Fail():
            return [Draft(ev.BuildFailed(reason=decision.reason))]
        case StartCandidates():
            round_ = ev.CandidatesStarted(
                round=decision.round, base_sha=decision.base_sha, runtimes=decision.runtimes
            )
            return [Draft(round_)]
        case StartTask():
            started = ev.TaskStarted(task=decision.task, base_sha=decision.base_sha)
            return [Draft(started, task=decision.task)]
        case Climb():
            climbed = ev.LadderClimbed(
                role=decision.role,
                rung=decision.rung,
                runtime=decision.runtime,
                reason=decision.reason,
            )
            return [Draft(climbed)]
        case _:
            assert_never(decision)


def published(
    state: BuildState, operation: Publish | str, forge: str = "", number: int = 0, url: str = ""
) -> Draft:
    """The forge took the build's work: ``open-draft`` opened (or found) proposal
    ``number`` at ``url`` on ``forge``; ``push`` pushed the head; ``mark-ready``."""
    what = operation.operation if isinstance(operation, Publish) else operation
    if what == "open-draft":
        return Draft(ev.ProposalOpened(forge=forge, number=number, url=url, head=state.head))
    if what == "push":
        return Draft(ev.PublicationPushed(branch=state.branch, sha=state.head))
    assert state.proposal is not None, "mark-ready is decided only once a proposal is open"
    return Draft(ev.ProposalReady(number=state.proposal.number))


def setup_failed(error: str) -> Draft:
    """The runner could not prepare what the work needs (its worktree, the forge)."""
    return Draft(ev.RunnerSetupFailed(error=error))


SETUP = "setup"  # the phase name setup's records carry


def setup_ran(
    state: BuildState,
    said: str,
    artifact: str,
    report: bytes,
    problem: str | None = None,
    tail: str = "",
) -> list[Draft]:
    """``[setup]`` ran: its output is kept; a ``problem`` parks the build on a question
    that quotes the output's ``tail`` (an answer lets it try again)."""
    drafts = [Draft(ev.ObservationRecorded(phase=SETUP, text=said), artifacts={artifact: report})]
    if problem is None:
        return drafts
    question = (
        f"The setup command failed: {problem}. The end of its output:\n{tail.strip()}\n"
        "-- answer to run it again from a clean worktree (fix what it needs first: the "
        "command is the one [setup] held when the build started; to change it, abort and "
        "run the build again), or abort the build."
    )
    raised = ev.EscalationRaised(
        id=next_escalation_id(state),
        phase=SETUP,
        round=state.impl_round,
        source="policy",
        cause="setup",
        question=question,
    )
    return [*drafts, Draft(raised)]
