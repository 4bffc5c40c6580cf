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
