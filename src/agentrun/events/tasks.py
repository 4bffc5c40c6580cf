"""Payloads of a build's task graph: a task starts, the integration queue lands it or
sends it back (DESIGN §3; the task's own phases are the usual events with ``task`` set
on their envelope)."""

from __future__ import annotations

from typing import Literal

from agentrun.events.base import PayloadModel


class TaskStarted(PayloadModel, summary="{task} from {base_sha:.10}"):
    """A task's first run: its branch starts at the build's head of that moment."""

    type: Literal["task.started"] = "task.started"
    task: str
    base_sha: str


class TaskIntegrated(PayloadModel, summary="{task} landed at {head:.10}"):
    """The queue merged a passing task onto the build head, its gate passed, and the
    build branch moved there (``changed_paths``: the whole build's, against its base)."""

    type: Literal["task.integrated"] = "task.integrated"
    task: str
    head: str
    changed_paths: tuple[str, ...] = ()


class TaskReturned(PayloadModel, summary="{task} sent back ({why})"):
    """The queue could not land a task: a conflict with the build head (the task
    reconciles onto ``base_sha``) or a failing gate (the task implements again)."""

    type: Literal["task.returned"] = "task.returned"
    task: str
    why: Literal["conflict", "gate"]
    base_sha: str
    reason: str


class CandidatesStarted(PayloadModel):
    """An implement round runs as candidates side by side (``[candidates]``): one per
    runtime, ``c1``…, each from the build head ``base_sha``."""

    type: Literal["candidates.started"] = "candidates.started"
    round: int
    base_sha: str
    runtimes: tuple[str, ...]

    def summary(self) -> str:
        return f"round {self.round}: {', '.join(self.runtimes)}"


class SelectStarted(PayloadModel):
    """The select agent compares the passing candidates ``offered`` (numbered from 1)."""

    type: Literal["select.started"] = "select.started"
    round: int
    offered: tuple[str, ...]

    def summary(self) -> str:
        return f"round {self.round}: {', '.join(self.offered)}"


class CandidateSelected(PayloadModel, summary="candidate {number}"):
    """The select agent's answer (``git agentrun agent select N``)."""

    type: Literal["candidate.selected"] = "candidate.selected"
    session: str
    number: int


class CandidateChosen(PayloadModel, summary="round {round}: {candidate} ({reason})"):
    """One candidate of the round goes on: its work becomes the build's. ``passed``: its
    verify steps passed (else the build implements again from it, its failures as the
    feedback). The others are kept under ``refs/agentrun/candidates/<slug>/<round>/<n>``."""

    type: Literal["candidate.chosen"] = "candidate.chosen"
    round: int
    candidate: str
    passed: bool
    reason: str
    changed_paths: tuple[str, ...] = ()
