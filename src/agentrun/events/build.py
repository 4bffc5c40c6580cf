"""Payloads of a build's life: creation, the end, human controls, the runner and its sessions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrun.events.base import PayloadModel, SessionOutcome, Usage


class BuildCreated(PayloadModel, summary="{goal} (base {base_ref} {base_sha:.10})"):
    type: Literal["build.created"] = "build.created"
    goal: str
    base_ref: str
    base_sha: str
    branch: str
    source: Literal["cli", "issue", "hook"] = "cli"
    issue: str | None = None  # "owner/name#42" for a build started from a forge issue
    requested_by: str | None = None  # the forge login that started it (asked to review)
    config: dict[str, Any] = Field(default_factory=dict)
    # A build may end with no change against its base (`run --allow-empty`); otherwise
    # such a build parks with a question.
    allow_empty: bool = False


class BuildCompleted(PayloadModel, summary="{outcome}"):
    type: Literal["build.completed"] = "build.completed"
    outcome: Literal["success"] = "success"
    summary_text: str = ""


class BuildFailed(PayloadModel, summary="{reason}"):
    type: Literal["build.failed"] = "build.failed"
    reason: str


class _Control(PayloadModel):
    """A person's request (pause, resume, abort, retry) or the kernel's acknowledgement."""

    reason: str = ""

    def summary(self) -> str:
        return self.reason or "-"


class BuildPauseRequested(_Control):
    type: Literal["build.pause-requested"] = "build.pause-requested"


class BuildPaused(_Control):
    type: Literal["build.paused"] = "build.paused"


class BuildResumeRequested(_Control):
    type: Literal["build.resume-requested"] = "build.resume-requested"


class BuildResumed(_Control):
    type: Literal["build.resumed"] = "build.resumed"


class BuildAbortRequested(_Control):
    type: Literal["build.abort-requested"] = "build.abort-requested"


class BuildAborted(_Control):
    type: Literal["build.aborted"] = "build.aborted"


class BuildRetryRequested(_Control):
    """A person asks a failed build (or a phase out of attempts) to try again."""

    type: Literal["build.retry-requested"] = "build.retry-requested"


class BuildReconcileRequested(PayloadModel, summary="merge the base at {base_sha:.10}"):
    """A person asks a complete build whose proposal is open to merge its moved base.

    ``base_sha`` is the base's tip the request was made at (the kernel reads no refs).
    """

    type: Literal["build.reconcile-requested"] = "build.reconcile-requested"
    base_sha: str


class RunnerAttached(PayloadModel, summary="{instance} on {host} from seq {resumed_from_seq}"):
    type: Literal["runner.attached"] = "runner.attached"
    instance: str
    host: str
    pid: int
    resumed_from_seq: int


class RunnerSetupFailed(PayloadModel, summary="{error}"):
    type: Literal["runner.setup-failed"] = "runner.setup-failed"
    error: str
    permanent: bool = False


class SessionStarted(PayloadModel, summary="{session} {phase}@{round} on {runtime}"):
    type: Literal["session.started"] = "session.started"
    session: str
    role: str
    runtime: str
    model: str | None = None
    phase: str
    round: int
    substitution: str | None = None
    # The session's rung on its role's model ladder (its index in `rungs`; None: no ladder).
    rung: int | None = None


class LadderClimbed(PayloadModel, summary="{role} to rung {rung} ({runtime}): {reason}"):
    """A role's producer moves up its model ladder (``[ladder.ROLE]``): its next session
    runs on rung ``rung`` (an index in ``rungs``), fresh, rehydrated from the log."""

    type: Literal["ladder.climbed"] = "ladder.climbed"
    role: str
    rung: int
    runtime: str
    reason: str


class SessionEnded(PayloadModel):
    type: Literal["session.ended"] = "session.ended"
    session: str
    outcome: SessionOutcome
    transcript: str | None = None
    usage: Usage = Usage()
    runtime_session_id: str | None = None
    head: str | None = None
    error: str | None = None

    def summary(self) -> str:
        text = f"{self.session} {self.outcome}" + (f": {self.error}" if self.error else "")
        return text if not self.usage.tokens else f"{text} · {self.usage.describe()}"
