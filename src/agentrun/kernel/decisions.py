"""The decisions ``decide`` returns: what the runner does next (DESIGN §3).

Plain frozen dataclasses, one per kind of move; ``kernel.decide`` makes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal


@dataclass(frozen=True)
class Wait:
    reason: Literal[
        "complete",
        "failed",
        "aborted",
        "paused",
        "parked",
        "in-flight",
        "tasks",
        "budget",
        "checks",
    ]
    kind: Literal["wait"] = "wait"


@dataclass(frozen=True)
class Acknowledge:
    control: Literal["pause", "resume", "abort"]
    kind: Literal["acknowledge"] = "acknowledge"


Cause = Literal[
    "attempts",
    "permanent-failure",
    "round-limit",
    "interrupted",
    "budget",
    "empty",
    "stall",
    "plan-approval",
    "checks-timeout",
]
PhaseName = Literal["plan", "plan-review", "implement", "code-review", "reconcile", "select"]


@dataclass(frozen=True)
class RunPhase:
    phase: PhaseName
    round: int
    attempt: int
    role: str
    feedback: tuple[str, ...]
    merge: str | None = None  # reconcile: the moved base to merge
    offered: tuple[str, ...] = ()  # select: the passing candidates, numbered from 1
    rung: int | None = None  # the role's rung on its model ladder (None: no ladder)
    kind: Literal["run-phase"] = "run-phase"


@dataclass(frozen=True)
class RunCheck:
    step: str
    command: str
    round: int
    attempt: int
    task: str | None = None  # the task whose worktree it checks (its report says so)
    kind: Literal["run-check"] = "run-check"


@dataclass(frozen=True)
class RunAgentVerify:
    step: str
    role: str
    round: int
    attempt: int
    feedback: tuple[str, ...]
    kind: Literal["run-agent-verify"] = "run-agent-verify"


@dataclass(frozen=True)
class SkipVerify:
    step: str
    round: int
    reason: str
    kind: Literal["skip-verify"] = "skip-verify"


@dataclass(frozen=True)
class RunFinalizeStep:
    step: str
    command: str | None
    role: str | None
    attempt: int
    last: bool
    give_up: bool = False
    kind: Literal["run-finalize-step"] = "run-finalize-step"


@dataclass(frozen=True)
class Publish:
    operation: Literal["open-draft", "push", "mark-ready"]
    kind: Literal["publish"] = "publish"


@dataclass(frozen=True)
class AwaitChecks:
    """Look at the forge's checks on ``sha`` once (``kernel.gate``): the runner records
    ``checks.seen`` when they changed, or when ``deadline`` (when a missing check ends
    the wait) passed since it last recorded, then waits."""

    sha: str
    deadline: datetime | None
    kind: Literal["await-checks"] = "await-checks"


@dataclass(frozen=True)
class RaiseEscalation:
    id: str
    phase: str
    round: int
    cause: Cause
    question: str
    source: Literal["policy"] = "policy"
    kind: Literal["raise-escalation"] = "raise-escalation"


@dataclass(frozen=True)
class StartTask:
    """A task's first run: its branch starts at the build's head (``task.started``)."""

    task: str
    base_sha: str
    kind: Literal["start-task"] = "start-task"


@dataclass(frozen=True)
class RunTasks:
    """The ready frontier of the task graph: the tasks that may run now, side by side."""

    ready: tuple[str, ...]
    kind: Literal["run-tasks"] = "run-tasks"


@dataclass(frozen=True)
class Integrate:
    """The integration queue's next task: merge it onto the build head, gate, land."""

    task: str
    head: str
    changed_paths: tuple[str, ...]
    kind: Literal["integrate"] = "integrate"


@dataclass(frozen=True)
class StartCandidates:
    """An implement round runs as N candidates side by side (``candidates.started``)."""

    round: int
    base_sha: str
    runtimes: tuple[str, ...]
    kind: Literal["start-candidates"] = "start-candidates"


@dataclass(frozen=True)
class Choose:
    """Every candidate was judged: the runner picks the one that goes on (the select
    agent's answer; else the one passing candidate, or the smallest passing diff; if none
    passed, the fewest failing steps) and keeps the others."""

    round: int
    passing: tuple[str, ...]
    selected: str | None
    kind: Literal["choose"] = "choose"


@dataclass(frozen=True)
class Climb:
    """A role moves up its model ladder before its next session (``ladder.climbed``)."""

    role: str
    rung: int
    runtime: str
    reason: str
    kind: Literal["climb"] = "climb"


@dataclass(frozen=True)
class Complete:
    kind: Literal["complete"] = "complete"


@dataclass(frozen=True)
class Fail:
    reason: str
    kind: Literal["fail"] = "fail"


Decision = (
    Wait
    | Acknowledge
    | RunPhase
    | RunCheck
    | RunAgentVerify
    | SkipVerify
    | RunFinalizeStep
    | Publish
    | AwaitChecks
    | RaiseEscalation
    | Complete
    | Fail
    | StartTask
    | RunTasks
    | Integrate
    | StartCandidates
    | Choose
    | Climb
)
Work = RunPhase | RunCheck | RunAgentVerify | RunFinalizeStep
# Decisions that run nothing: the kernel makes their events (``runner.made``).
Recorded = (
    Acknowledge
    | SkipVerify
    | RaiseEscalation
    | Complete
    | Fail
    | StartTask
    | StartCandidates
    | Climb
)
