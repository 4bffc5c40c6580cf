"""Payloads of the phases: plan, reviews, implement, verify, finalize, and escalations."""

from __future__ import annotations

from typing import Literal

from agentrun.events.base import Frozen, PayloadModel, Verdict, VerifyOutcome


class PlanStarted(PayloadModel, summary="round {round}"):
    type: Literal["plan.started"] = "plan.started"
    round: int
    feedback: tuple[str, ...] = ()


class TaskSpec(Frozen):
    """One task of a plan's task graph (the plan's ``agentrun-tasks`` block)."""

    id: str
    goal: str
    deps: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()


class PlanSubmitted(PayloadModel):
    type: Literal["plan.submitted"] = "plan.submitted"
    session: str
    plan: str
    summary_text: str = ""
    tasks: tuple[TaskSpec, ...] = ()  # the plan's task graph (none: one implement, as before)
    tasks_error: str = ""  # why the plan's task graph was refused (it goes back to its author)

    def summary(self) -> str:
        text = self.summary_text or self.plan
        if self.tasks_error:
            return f"its task graph is refused: {self.tasks_error} ({text})"
        if self.tasks:
            return f"{text} ({len(self.tasks)} tasks: {', '.join(t.id for t in self.tasks)})"
        return text


class _ReviewStarted(PayloadModel, summary="round {round}"):
    round: int


class PlanReviewStarted(_ReviewStarted):
    type: Literal["plan-review.started"] = "plan-review.started"


class _Verdict(PayloadModel):
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


class PlanApproved(PayloadModel, summary="{id} by {by}"):
    """A person let the plan go on to implement (``[policy] plan_approval = "human"``).

    Its own event, not an answer: an answer with text sends the plan back to be revised,
    an approval carries no text, and the log says which of the two a person did.
    """

    type: Literal["plan.approved"] = "plan.approved"
    id: str  # the plan-approval escalation it closes
    by: str


class ImplementStarted(PayloadModel):
    type: Literal["implement.started"] = "implement.started"
    round: int
    feedback: tuple[str, ...] = ()

    def summary(self) -> str:
        return f"round {self.round}" + (f", {len(self.feedback)} feedback" if self.feedback else "")


class ImplementCompleted(PayloadModel):
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


class AgentDone(PayloadModel):
    """An implement, reconcile or finalize agent says it is finished (``agent done``)."""

    type: Literal["agent.done"] = "agent.done"
    session: str
    summary_text: str = ""

    def summary(self) -> str:
        return self.summary_text or "done"


class VerifyStarted(PayloadModel, summary="{step} round {round} attempt {attempt}"):
    type: Literal["verify.started"] = "verify.started"
    step: str
    round: int
    attempt: int
    kind: Literal["check", "agent"] = "check"


class VerifyVerdict(PayloadModel):
    """An agent verify step's verdict (``agent pass`` / ``agent fail``)."""

    type: Literal["verify.verdict"] = "verify.verdict"
    session: str
    verdict: Literal["pass", "fail"]
    reason: str = ""

    def summary(self) -> str:
        return self.verdict + (f": {self.reason}" if self.reason else "")


class VerifyCompleted(PayloadModel):
    type: Literal["verify.completed"] = "verify.completed"
    step: str
    round: int
    attempt: int
    outcome: VerifyOutcome
    exit_code: int | None = None
    report: str | None = None
    reason: str = ""
    head: str | None = None
    # What failed, as the stall detection compares it (kernel/stall.py): the failing test
    # ids where the output names them, else the output's last lines with numbers masked.
    failure: str | None = None

    def summary(self) -> str:
        detail = f" (exit {self.exit_code})" if self.exit_code is not None else ""
        return f"{self.step} {self.outcome}{detail}" + (f": {self.reason}" if self.reason else "")


class FinalizeStarted(PayloadModel, summary="{step} attempt {attempt}"):
    type: Literal["finalize.started"] = "finalize.started"
    step: str
    attempt: int


class FinalizeStepCompleted(PayloadModel):
    type: Literal["finalize.step-completed"] = "finalize.step-completed"
    step: str
    ok: bool
    note: str = ""
    head: str | None = None

    def summary(self) -> str:
        return f"{self.step} {'ok' if self.ok else 'failed'}" + (
            f": {self.note}" if self.note else ""
        )


class FinalizeCompleted(PayloadModel, summary="all steps done"):
    type: Literal["finalize.completed"] = "finalize.completed"


class PhaseFailed(PayloadModel, summary="{phase}@{round} attempt {attempt}: {error}"):
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


class Question(Frozen):
    """What an escalation asks of a person: the event raises it, the state keeps it open."""

    id: str
    phase: str
    round: int
    source: Literal["agent", "policy"]
    cause: str
    question: str


class EscalationRaised(Question, PayloadModel):
    type: Literal["escalation.raised"] = "escalation.raised"
    session: str | None = None

    def summary(self) -> str:
        why = self.source if self.cause == self.source else f"{self.source}, {self.cause}"
        return f"{self.id} ({why}): {self.question}"


class EscalationAnswered(PayloadModel, summary="{id} by {by}: {answer}"):
    type: Literal["escalation.answered"] = "escalation.answered"
    id: str
    answer: str
    by: str
