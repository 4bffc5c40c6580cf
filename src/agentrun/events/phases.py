"""Payloads of the phases: plan, reviews, implement, verify, finalize, and escalations."""

from __future__ import annotations

from typing import Literal

from agentrun.events.base import (
    Frozen,
    Verdict,
    VerifyOutcome,
)


class PlanStarted(Frozen):
    type: Literal["plan.started"] = "plan.started"
    round: int
    feedback: tuple[str, ...] = ()

    def summary(self) -> str:
        return f"round {self.round}"


class PlanSubmitted(Frozen):
    type: Literal["plan.submitted"] = "plan.submitted"
    session: str
    plan: str
    summary_text: str = ""

    def summary(self) -> str:
        return self.summary_text or self.plan


class _ReviewStarted(Frozen):
    round: int

    def summary(self) -> str:
        return f"round {self.round}"


class PlanReviewStarted(_ReviewStarted):
    type: Literal["plan-review.started"] = "plan-review.started"


class _Verdict(Frozen):
    session: str
    round: int
    verdict: Verdict
    findings: tuple[str, ...] = ()

    def summary(self) -> str:
        if self.verdict == "approve":
            return "approve"
        return f"revise ({len(self.findings)} finding{'s' if len(self.findings) != 1 else ''})"


class PlanReviewVerdict(_Verdict):
    type: Literal["plan-review.verdict"] = "plan-review.verdict"


class ImplementStarted(Frozen):
    type: Literal["implement.started"] = "implement.started"
    round: int
    feedback: tuple[str, ...] = ()

    def summary(self) -> str:
        return f"round {self.round}" + (f", {len(self.feedback)} feedback" if self.feedback else "")


class ImplementCompleted(Frozen):
    type: Literal["implement.completed"] = "implement.completed"
    round: int
    head: str
    changed_paths: tuple[str, ...] = ()
    summary_text: str = ""

    def summary(self) -> str:
        return f"head {self.head[:10]}, {len(self.changed_paths)} path(s) changed"


class CodeReviewStarted(_ReviewStarted):
    type: Literal["code-review.started"] = "code-review.started"


class CodeReviewVerdict(_Verdict):
    type: Literal["code-review.verdict"] = "code-review.verdict"


class AgentDone(Frozen):
    """An implement, reconcile or finalize agent says it is finished (``agent done``)."""

    type: Literal["agent.done"] = "agent.done"
    session: str
    summary_text: str = ""

    def summary(self) -> str:
        return self.summary_text or "done"


class VerifyStarted(Frozen):
    type: Literal["verify.started"] = "verify.started"
    step: str
    round: int
    attempt: int
    kind: Literal["check", "agent"] = "check"

    def summary(self) -> str:
        return f"{self.step} round {self.round} attempt {self.attempt}"


class VerifyVerdict(Frozen):
    """An agent verify step's verdict (``agent pass`` / ``agent fail``)."""

    type: Literal["verify.verdict"] = "verify.verdict"
    session: str
    verdict: Literal["pass", "fail"]
    reason: str = ""

    def summary(self) -> str:
        return self.verdict + (f": {self.reason}" if self.reason else "")


class VerifyCompleted(Frozen):
    type: Literal["verify.completed"] = "verify.completed"
    step: str
    round: int
    attempt: int
    outcome: VerifyOutcome
    exit_code: int | None = None
    report: str | None = None
    reason: str = ""
    head: str | None = None

    def summary(self) -> str:
        detail = f" (exit {self.exit_code})" if self.exit_code is not None else ""
        return f"{self.step} {self.outcome}{detail}" + (f": {self.reason}" if self.reason else "")


class FinalizeStarted(Frozen):
    type: Literal["finalize.started"] = "finalize.started"
    step: str
    attempt: int

    def summary(self) -> str:
        return f"{self.step} attempt {self.attempt}"


class FinalizeStepCompleted(Frozen):
    type: Literal["finalize.step-completed"] = "finalize.step-completed"
    step: str
    ok: bool
    note: str = ""
    head: str | None = None

    def summary(self) -> str:
        return f"{self.step} {'ok' if self.ok else 'failed'}" + (
            f": {self.note}" if self.note else ""
        )


class FinalizeCompleted(Frozen):
    type: Literal["finalize.completed"] = "finalize.completed"

    def summary(self) -> str:
        return "all steps done"


class PhaseFailed(Frozen):
    type: Literal["phase.failed"] = "phase.failed"
    phase: str
    round: int
    attempt: int
    error: str
    permanent: bool = False
    will_retry: bool = True
    session: str | None = None
    # Stopped from outside (Ctrl-C, a runner that died): not counted as an attempt.
    interrupted: bool = False
    # A guard refused the work (e.g. it changed .agentrun/): implement starts its next
    # round with the reason as feedback instead of retrying the same one.
    guard: bool = False

    def summary(self) -> str:
        return f"{self.phase}@{self.round} attempt {self.attempt}: {self.error}"


class EscalationRaised(Frozen):
    type: Literal["escalation.raised"] = "escalation.raised"
    id: str
    phase: str
    round: int
    source: Literal["agent", "policy"]
    cause: str
    question: str
    session: str | None = None

    def summary(self) -> str:
        why = self.source if self.cause == self.source else f"{self.source}, {self.cause}"
        return f"{self.id} ({why}): {self.question}"


class EscalationAnswered(Frozen):
    type: Literal["escalation.answered"] = "escalation.answered"
    id: str
    answer: str
    by: str

    def summary(self) -> str:
        return f"{self.id} by {self.by}: {self.answer}"
