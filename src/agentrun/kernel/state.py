"""The reduced state of a build (DESIGN §3): what ``evolve`` folds the log into.

It is cached on disk as JSON (``.git/agentrun/cache``), so it stays small and plain.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agentrun import events as ev
from agentrun.config import Config

Stage = Literal[
    "plan",
    "plan-review",
    "plan-approval",  # the approved plan waits for a person ([policy] plan_approval)
    "tasks",
    "implement",
    "code-review",
    "reconcile",
    "verify",
    "finalize",
    "done",
]
# Where a task of the graph is: not started, its own phases, passed (its verify steps
# passed: waiting for the integration queue), landed (on the build branch).
TaskStage = Literal[
    "waiting", "implement", "code-review", "reconcile", "verify", "passed", "failed", "landed"
]
Status = Literal["running", "complete", "failed", "aborted"]
Report = (
    ev.PlanSubmitted
    | ev.PlanReviewVerdict
    | ev.CodeReviewVerdict
    | ev.AgentDone
    | ev.VerifyVerdict
    | ev.EscalationRaised
    | ev.CandidateSelected
)

FEEDBACK_TAIL = 2000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OpenSession(_Frozen):
    session: str
    phase: str
    round: int
    role: str
    runtime: str
    model: str | None = None
    rung: int | None = None
    report: Report | None = None


class RoleUsage(_Frozen):
    """What a role's sessions spent so far: the running estimate for its next session."""

    sessions: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    priced: int = 0  # sessions whose cost is known

    def estimate_tokens(self) -> int:
        return self.tokens // self.sessions if self.sessions else 0

    def estimate_cost(self) -> float:
        return self.cost_usd / self.priced if self.priced else 0.0


class ResumableSession(_Frozen):
    """A producer's last session, which its next round may continue (DESIGN §7)."""

    runtime: str
    id: str
    host: str


class InFlight(_Frozen):
    """A phase, check or finalize step that started and has not ended yet."""

    key: str
    phase: str
    round: int
    attempt: int
    started: datetime | None = None


class Escalation(ev.Question):
    answer: str | None = None
    by: str | None = None
    task: str | None = None  # the task it parks (None: the whole build)

    @property
    def is_open(self) -> bool:
        return self.answer is None


class StepResult(_Frozen):
    outcome: Literal["pass", "fail", "skipped"]
    attempt: int
    reason: str = ""
    report: str | None = None


class Proposal(_Frozen):
    forge: str
    number: int
    url: str
    ready: bool = False
    closed: bool = False
    merged: bool = False


class ChecksGate(_Frozen):
    """The forge's checks last seen on ``sha`` (``checks.seen``): when the wait on that
    head began (or an answer re-armed it), and when they were last seen changed."""

    sha: str
    since: datetime
    seen_at: datetime
    checks: tuple[ev.SeenCheck, ...] = ()


class TaskState(_Frozen):
    """One task of the plan's graph: its spec and the part of a build's state it has of
    its own (the fields named as in BuildState, which a task's view takes from here)."""

    id: str
    goal: str
    deps: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    stage: TaskStage = "waiting"
    base_sha: str = ""  # the build head the task started from (or last reconciled onto)
    head: str = ""
    impl_round: int = 1
    impl_round_limit: int = 0
    implemented: bool = False
    feedback: tuple[str, ...] = ()
    changed_paths: tuple[str, ...] = ()
    session: OpenSession | None = None
    in_flight: InFlight | None = None
    attempts: dict[str, int] = {}
    interruptions: dict[str, int] = {}
    asked: dict[str, int] = {}
    blocked: dict[str, str] = {}
    last_error: dict[str, str] = {}
    setup_failures: int = 0
    setup_permanent: bool = False
    verify_results: dict[str, StepResult] = {}
    resumable: dict[str, ResumableSession] = {}
    runner: str | None = None
    reconcile_base: str | None = None
    usage: ev.Usage = ev.Usage()  # what the task's own sessions spent (the build's has it too)
    sessions: int = 0
    runtime: str | None = None  # a candidate's: the runtime its implement runs on
    # A role's model ladder: the rung it is on, the failed rounds on that rung, and the
    # failures of the last implement rounds while they repeat (the stall detection's).
    rungs: dict[str, int] = {}
    rung_failures: dict[str, int] = {}
    stall: tuple[str, ...] = ()

    @property
    def failing(self) -> int:
        """How many of its verify steps failed."""
        return sum(1 for r in self.verify_results.values() if r.outcome == "fail")


class CandidateRecord(_Frozen):
    """A candidate of an earlier round, as ``show`` lists it."""

    round: int
    id: str
    runtime: str
    head: str
    passed: bool
    failing: int
    chosen: bool
    tokens: int


class BuildState(_Frozen):
    slug: str
    seq: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    goal: str = ""
    base_ref: str = ""
    base_sha: str = ""
    branch: str = ""
    source: str = "cli"
    issue: str | None = None
    requested_by: str | None = None
    config: Config = Config()
    allow_empty: bool = False  # may end with no change against the base (or was let)
    status: Status = "running"
    reason: str = ""
    paused: bool = False
    pause_requested: bool = False
    resume_requested: bool = False
    abort_requested: bool = False
    stage: Stage = "plan"
    plan_round: int = 1
    plan_round_limit: int = 0
    impl_round: int = 1
    impl_round_limit: int = 0
    implemented: bool = False
    feedback: tuple[str, ...] = ()
    plan: str | None = None
    head: str = ""
    changed_paths: tuple[str, ...] = ()
    session: OpenSession | None = None
    in_flight: InFlight | None = None
    attempts: dict[str, int] = {}
    interruptions: dict[str, int] = {}
    asked: dict[str, int] = {}  # runs of a phase that ended asking a human

    def runs(self, key: str) -> int:
        """How often the phase ``key`` (``implement@2``) ran and did not complete."""
        return self.attempts.get(key, 0) + self.interruptions.get(key, 0) + self.asked.get(key, 0)

    blocked: dict[str, str] = {}
    last_error: dict[str, str] = {}
    setup_failures: int = 0
    setup_permanent: bool = False
    escalation_count: int = 0
    escalations: tuple[Escalation, ...] = ()
    verify_results: dict[str, StepResult] = {}
    finalize_results: dict[str, bool] = {}
    observations: tuple[str, ...] = ()
    proposal: Proposal | None = None
    published_head: str | None = None
    usage: ev.Usage = ev.Usage()
    phase_usage: dict[str, ev.Usage] = {}
    role_usage: dict[str, RoleUsage] = {}
    rung_usage: dict[str, ev.Usage] = {}  # "ROLE:RUNG": what a ladder's rung spent
    # A role's model ladder: the rung it is on, the failed rounds on that rung, and the
    # failures of the last implement rounds while they repeat (the stall detection's).
    rungs: dict[str, int] = {}
    rung_failures: dict[str, int] = {}
    stall: tuple[str, ...] = ()
    unpriced_models: tuple[str, ...] = ()
    active_seconds: float = 0.0
    budget_grants: int = 0
    accepted_unpriced: tuple[str, ...] = ()  # unknown prices a person let the build go on with
    resumable: dict[str, ResumableSession] = {}
    runner: str | None = None
    sessions: int = 0
    pending_feedback: tuple[str, ...] = ()  # forge reviews waiting for the phase in flight
    reconcile_base: str | None = None  # the moved base a reconcile phase merges
    forge_comment: int = 0  # the last forge comment id processed (forge.cursor)
    forge_review: int = 0  # the last forge review id processed
    graph: tuple[ev.TaskSpec, ...] = ()  # the submitted plan's task graph, until it runs
    tasks: dict[str, TaskState] = {}  # the task graph being run, in the plan's order
    candidates: dict[str, TaskState] = {}  # the implement round's candidates (c1, …)
    candidate_round: int = 0  # the implement round they run for
    offered: tuple[str, ...] = ()  # the passing candidates the select agent compares
    selected: int | None = None  # its answer: a number into ``offered``
    candidate_history: tuple[CandidateRecord, ...] = ()
    task: str | None = None  # set only in a task's (or a candidate's) view (kernel.tasks.view)
    reserved_tokens: int = 0  # a task's view: what other tasks' running sessions may spend
    reserved_usd: float = 0.0
    checks_gate: ChecksGate | None = None  # the forge's CI on the head (kernel.gate)

    @property
    def open_escalations(self) -> tuple[Escalation, ...]:
        return tuple(e for e in self.escalations if e.is_open)

    @property
    def parks(self) -> bool:
        """An open question stops this state's work: the build's own questions (and a
        budget question, raised by any task) stop everything; a task's, only that task."""
        return any(
            e.task is None or e.task == self.task or e.cause == "budget"
            for e in self.open_escalations
        )

    @property
    def issue_number(self) -> int | None:
        """The forge issue that started the build ("owner/name#42" -> 42)."""
        _, sep, number = (self.issue or "").rpartition("#")
        return int(number) if sep and number.isdigit() else None

    @property
    def current_round(self) -> int:
        planning = self.stage in ("plan", "plan-review", "plan-approval")
        return self.plan_round if planning else self.impl_round

    @property
    def state_name(self) -> str:
        """What `status` shows: running, parked, waiting, paused, complete, failed or aborted."""
        if self.status != "running":
            return self.status
        if self.paused:
            return "paused"
        if self.parks:
            return "parked"
        if self.stage == "tasks" and self.tasks:
            pending = [t for t in self.tasks.values() if t.stage not in ("passed", "landed")]
            asked = {e.task for e in self.open_escalations}
            if pending and all(t.id in asked for t in pending):
                return "parked"
        if self.waits_for_checks:
            return "waiting"
        return "running"

    @property
    def waits_for_checks(self) -> bool:
        """Done but for the forge's CI, seen on the head and not yet passed (kernel.gate)."""
        gate = self.checks_gate
        proposal = self.proposal
        return (
            self.stage == "done"
            and gate is not None
            and gate.sha == self.head
            and proposal is not None
            and not proposal.ready
            and not proposal.closed
        )

    @property
    def phase_label(self) -> str:
        if self.in_flight is not None:
            return f"{self.in_flight.phase}@{self.in_flight.round}"
        if self.stage == "done":
            return "done"
        return f"{self.stage}@{self.current_round}"


def initial_state(slug: str) -> BuildState:
    return BuildState(slug=slug)


def attempt_key(phase: str, round_: int) -> str:
    return f"{phase}@{round_}"
