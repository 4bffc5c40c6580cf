"""The event catalog: a frozen pydantic model per event type, and the envelope around it.

An event is stored as one commit: ``"<type>: <summary>"``, a blank line, then the
envelope as JSON (DESIGN §2). Payloads form a discriminated union on ``type``; an
unknown type or a payload that does not validate is refused with a clear error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agentrun.errors import InvalidEventError, MalformedEventError
from agentrun.secrets import scrub

SCHEMA_VERSION = 2


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- actors -----------------------------------------------------------------


class KernelActor(Frozen):
    kind: Literal["kernel"] = "kernel"


class AgentActor(Frozen):
    kind: Literal["agent"] = "agent"
    role: str
    session: str


class HumanActor(Frozen):
    kind: Literal["human"] = "human"
    login: str


Actor = Annotated[KernelActor | AgentActor | HumanActor, Field(discriminator="kind")]


def describe_actor(actor: KernelActor | AgentActor | HumanActor) -> str:
    if isinstance(actor, AgentActor):
        return f"agent:{actor.role}"
    if isinstance(actor, HumanActor):
        return f"human:{actor.login}"
    return "kernel"


class Usage(Frozen):
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def describe(self) -> str:
        """``1,234 tokens (1,000 in, 234 out), $0.0123`` — or ``cost unknown``."""
        cost = f"${self.cost_usd:.4f}" if self.cost_usd is not None else "cost unknown"
        if not self.tokens and self.cost_usd is None:
            return "no tokens"
        return f"{self.tokens:,} tokens ({self.tokens_in:,} in, {self.tokens_out:,} out), {cost}"

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            cost_usd=cost,
        )


Verdict = Literal["approve", "revise"]
SessionOutcome = Literal["ok", "failed", "abandoned", "aborted", "interrupted", "timeout"]
VerifyOutcome = Literal["pass", "fail", "skipped"]


# --- payloads ---------------------------------------------------------------


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


class ProposalOpened(Frozen):
    type: Literal["proposal.opened"] = "proposal.opened"
    forge: str
    number: int
    url: str
    head: str

    def summary(self) -> str:
        return f"{self.forge} #{self.number} {self.url}"


class ProposalReady(Frozen):
    type: Literal["proposal.ready"] = "proposal.ready"
    number: int

    def summary(self) -> str:
        return f"#{self.number} ready for review"


class ProposalClosed(Frozen):
    type: Literal["proposal.closed"] = "proposal.closed"
    number: int
    merged: bool

    def summary(self) -> str:
        return f"#{self.number} {'merged' if self.merged else 'closed'}"


class PublicationPushed(Frozen):
    type: Literal["publication.pushed"] = "publication.pushed"
    branch: str
    sha: str

    def summary(self) -> str:
        return f"{self.branch} at {self.sha[:10]}"


class ObservationRecorded(Frozen):
    type: Literal["observation.recorded"] = "observation.recorded"
    phase: str
    text: str

    def summary(self) -> str:
        return f"{self.phase}: {self.text}"


class FeedbackReceived(Frozen):
    """Review feedback from a forge (changes requested): the next implement round's input."""

    type: Literal["feedback.received"] = "feedback.received"
    forge: str
    number: int
    review: int
    author: str
    text: str

    def summary(self) -> str:
        return f"review {self.review} on #{self.number} by {self.author}"


class ForgeCursor(Frozen):
    """The last forge comment (and review) this build has processed."""

    type: Literal["forge.cursor"] = "forge.cursor"
    forge: str
    comment: int = 0
    review: int = 0

    def summary(self) -> str:
        return f"{self.forge}: comments up to {self.comment}, reviews up to {self.review}"


class BaseMoved(Frozen):
    """The base branch moved and the build branch no longer merges cleanly into it."""

    type: Literal["base.moved"] = "base.moved"
    base_sha: str
    conflicts: tuple[str, ...] = ()

    def summary(self) -> str:
        return f"base at {self.base_sha[:10]}, {len(self.conflicts)} conflicting path(s)"


class ReconcileStarted(Frozen):
    type: Literal["reconcile.started"] = "reconcile.started"
    round: int
    base_sha: str

    def summary(self) -> str:
        return f"round {self.round}: merging {self.base_sha[:10]}"


class ReconcileCompleted(Frozen):
    type: Literal["reconcile.completed"] = "reconcile.completed"
    round: int
    base_sha: str
    head: str

    def summary(self) -> str:
        return f"round {self.round}: merged {self.base_sha[:10]} at {self.head[:10]}"


Payload = Annotated[
    BuildCreated
    | BuildCompleted
    | BuildFailed
    | BuildPauseRequested
    | BuildPaused
    | BuildResumeRequested
    | BuildResumed
    | BuildAbortRequested
    | BuildAborted
    | RunnerAttached
    | RunnerSetupFailed
    | SessionStarted
    | SessionEnded
    | PlanStarted
    | PlanSubmitted
    | PlanReviewStarted
    | PlanReviewVerdict
    | ImplementStarted
    | ImplementCompleted
    | CodeReviewStarted
    | CodeReviewVerdict
    | AgentDone
    | VerifyStarted
    | VerifyVerdict
    | VerifyCompleted
    | FinalizeStarted
    | FinalizeStepCompleted
    | FinalizeCompleted
    | PhaseFailed
    | EscalationRaised
    | EscalationAnswered
    | ProposalOpened
    | ProposalReady
    | ProposalClosed
    | PublicationPushed
    | ObservationRecorded
    | FeedbackReceived
    | ForgeCursor
    | BaseMoved
    | ReconcileStarted
    | ReconcileCompleted
    | BuildRetryRequested
    | BuildReconcileRequested,
    Field(discriminator="type"),
]


class Event(Frozen):
    """The envelope: one per commit in a build log."""

    v: int = SCHEMA_VERSION
    seq: int
    ts: datetime
    actor: Actor
    writer: str
    payload: Payload

    @property
    def type(self) -> str:
        return self.payload.type


_EVENT = TypeAdapter(Event)
_PAYLOAD: TypeAdapter[Any] = TypeAdapter(Payload)
EVENT_TYPES: frozenset[str] = frozenset(
    cls.model_fields["type"].default
    for cls in Payload.__origin__.__args__  # type: ignore[attr-defined]
)


def check_payload(payload: Any) -> None:
    """Refuse at append what replay could not read back."""
    kind = getattr(payload, "type", None)
    if not isinstance(payload, BaseModel) or kind not in EVENT_TYPES:
        raise InvalidEventError(f"unknown event type: {kind or payload!r}")
    try:
        _PAYLOAD.validate_python(payload.model_dump())
    except ValidationError as exc:
        raise InvalidEventError(f"invalid {kind} payload: {_first_error(exc)}") from None


def encode(event: Event) -> str:
    """The commit message that stores ``event``."""
    body = event.model_dump(mode="json", exclude={"payload": {"type"}})
    doc = {"v": body["v"], "seq": body["seq"], "type": event.type, **body}
    # Scrubbed before it is clipped: a token cut in half keeps no shape to be found by.
    summary = scrub(event.payload.summary()).replace("\n", " ")
    if len(summary) > 120:
        summary = summary[:117] + "..."
    return f"{event.type}: {summary}\n\n{json.dumps(doc, ensure_ascii=False, sort_keys=False)}\n"


def decode(message: str, where: str) -> Event:
    """Parse a commit message back into an event; ``where`` names the commit in errors."""
    _, sep, body = message.partition("\n\n")
    try:
        if not sep:
            raise ValueError("no JSON body")
        doc = json.loads(body)
        if not isinstance(doc, dict):
            raise ValueError("body is not an object")
    except ValueError as exc:
        raise MalformedEventError(f"commit {where} is not an agentrun event: {exc}") from None
    version = doc.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise MalformedEventError(f"commit {where} has no valid schema version (v)")
    if version > SCHEMA_VERSION:
        raise MalformedEventError(
            f"commit {where} holds an event of schema v{version}; this agentrun reads up to "
            f"v{SCHEMA_VERSION}: upgrade agentrun"
        )
    doc = upgrade(doc, version, where)
    kind = doc.pop("type", None)
    if kind not in EVENT_TYPES:
        raise MalformedEventError(f"commit {where} holds an unknown event type {kind!r}")
    payload = doc.get("payload")
    if isinstance(payload, dict):
        if "type" in payload:
            raise MalformedEventError(
                f"commit {where} holds a malformed {kind} event: payload.type: "
                "the payload may not name a type of its own"
            )
        doc["payload"] = {"type": kind, **payload}
    try:
        return _EVENT.validate_python(doc)
    except ValidationError as exc:
        raise MalformedEventError(
            f"commit {where} holds a malformed {kind} event: {_first_error(exc)}"
        ) from None


# Upgrades of an event document from schema v<n> to v<n+1>, applied in order by `decode`
# (envelope and payload alike). Every change that adds or changes an event's fields bumps
# SCHEMA_VERSION and adds its step here, so that an older release reading a newer log says
# "upgrade agentrun" rather than "malformed" (tests/upgrade keeps this honest).
def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """v2 added ``build.created.allow_empty`` and ``build.reconcile-requested``: a v1
    document reads unchanged (``allow_empty`` defaults to what v1 did, never asking)."""
    return doc


UPCASTERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def upgrade(doc: dict[str, Any], version: int, where: str) -> dict[str, Any]:
    """``doc`` (of schema ``version``) as the current schema reads it."""
    while version < SCHEMA_VERSION:
        step = UPCASTERS.get(version)
        if step is None:
            raise MalformedEventError(f"commit {where}: no upgrade from schema v{version}")
        doc = step(doc)
        version += 1
    return {**doc, "v": version}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}" if loc else err["msg"]
