"""Payloads of a build's life: creation, the end, human controls, the runner and its sessions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrun.events.base import (
    Frozen,
    SessionOutcome,
    Usage,
)


class BuildCreated(Frozen):
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

    def summary(self) -> str:
        return f"{self.goal} (base {self.base_ref} {self.base_sha[:10]})"


class BuildCompleted(Frozen):
    type: Literal["build.completed"] = "build.completed"
    outcome: Literal["success"] = "success"
    summary_text: str = ""

    def summary(self) -> str:
        return self.outcome


class BuildFailed(Frozen):
    type: Literal["build.failed"] = "build.failed"
    reason: str

    def summary(self) -> str:
        return self.reason


class _Control(Frozen):
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


class BuildReconcileRequested(Frozen):
    """A person asks a complete build whose proposal is open to merge its moved base.

    ``base_sha`` is the base's tip the request was made at (the kernel reads no refs).
    """

    type: Literal["build.reconcile-requested"] = "build.reconcile-requested"
    base_sha: str

    def summary(self) -> str:
        return f"merge the base at {self.base_sha[:10]}"


class RunnerAttached(Frozen):
    type: Literal["runner.attached"] = "runner.attached"
    instance: str
    host: str
    pid: int
    resumed_from_seq: int

    def summary(self) -> str:
        return f"{self.instance} on {self.host} from seq {self.resumed_from_seq}"


class RunnerSetupFailed(Frozen):
    type: Literal["runner.setup-failed"] = "runner.setup-failed"
    error: str
    permanent: bool = False

    def summary(self) -> str:
        return self.error


class SessionStarted(Frozen):
    type: Literal["session.started"] = "session.started"
    session: str
    role: str
    runtime: str
    model: str | None = None
    phase: str
    round: int
    substitution: str | None = None

    def summary(self) -> str:
        return f"{self.session} {self.phase}@{self.round} on {self.runtime}"


class SessionEnded(Frozen):
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
