"""The envelope around a payload, and its encoding as a commit message (DESIGN §2).

An event is stored as one commit: ``"<type>: <summary>"``, a blank line, then the
envelope as JSON. Payloads form a discriminated union on ``type``; an unknown type or a
payload that does not validate is refused with a clear error. Older schema versions are
upcast on read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from agentrun.errors import InvalidEventError, MalformedEventError
from agentrun.events import build, checks, forge, memory, phases, tasks
from agentrun.events.base import Actor, Frozen, check_version
from agentrun.secrets import scrub

SCHEMA_VERSION = 5


Payload = Annotated[
    build.BuildCreated
    | build.BuildCompleted
    | build.BuildFailed
    | build.BuildPauseRequested
    | build.BuildPaused
    | build.BuildResumeRequested
    | build.BuildResumed
    | build.BuildAbortRequested
    | build.BuildAborted
    | build.RunnerAttached
    | build.RunnerSetupFailed
    | build.SessionStarted
    | build.LadderClimbed
    | build.SessionEnded
    | phases.PlanStarted
    | phases.PlanSubmitted
    | phases.PlanReviewStarted
    | phases.PlanReviewVerdict
    | phases.PlanApproved
    | phases.ImplementStarted
    | phases.ImplementCompleted
    | phases.CodeReviewStarted
    | phases.CodeReviewVerdict
    | phases.AgentDone
    | phases.VerifyStarted
    | phases.VerifyVerdict
    | phases.VerifyCompleted
    | phases.FinalizeStarted
    | phases.FinalizeStepCompleted
    | phases.FinalizeCompleted
    | phases.PhaseFailed
    | phases.EscalationRaised
    | phases.EscalationAnswered
    | forge.ProposalOpened
    | forge.ProposalReady
    | forge.ProposalClosed
    | forge.PublicationPushed
    | forge.ObservationRecorded
    | forge.FeedbackReceived
    | forge.ForgeCursor
    | forge.BaseMoved
    | forge.ReconcileStarted
    | forge.ReconcileCompleted
    | build.BuildRetryRequested
    | build.BuildReconcileRequested
    | tasks.TaskStarted
    | tasks.TaskIntegrated
    | tasks.TaskReturned
    | tasks.CandidatesStarted
    | tasks.SelectStarted
    | tasks.CandidateSelected
    | tasks.CandidateChosen
    | memory.MemoryAdded
    | memory.MemoryAccepted
    | memory.MemoryForgotten
    | checks.ChecksSeen,
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
    task: str | None = None  # the task of the build's task graph the event belongs to

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
    if body["task"] is None:
        del body["task"]  # a build without tasks reads as it did before tasks existed
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
    version = check_version(doc.get("v"), SCHEMA_VERSION, f"commit {where}", "schema")
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


def _v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    """v3 added the envelope's ``task``, ``plan.submitted.tasks`` and ``tasks_error``, the
    ``task.*`` events and the candidates' (``candidates.started``, ``select.started``,
    ``candidate.selected``, ``candidate.chosen``): a v2 document reads unchanged."""
    return doc


def _v3_to_v4(doc: dict[str, Any]) -> dict[str, Any]:
    """v4 added ``Usage.cache_read``, ``cache_write`` and ``reported``,
    ``session.started.rung``, ``verify.completed.failure`` and ``ladder.climbed``: a v3
    document reads unchanged (its usage was reported, with no cache)."""
    return doc


def _v4_to_v5(doc: dict[str, Any]) -> dict[str, Any]:
    """v5 added the gates' events (the plan's approval, the forge's checks), the facts of
    ``refs/agentrun/memory`` and builds started by a pushed ``Agentrun-Goal`` trailer: a v4
    document reads unchanged."""
    return doc


UPCASTERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
}


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
