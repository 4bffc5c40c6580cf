"""``decide``: the next move of a build, from its reduced state alone (DESIGN §3).

No I/O, no clock, no random ids: replaying a log reproduces every decision.
"""

from __future__ import annotations

from agentrun.config import FinalizeStep, VerifyStep
from agentrun.kernel import approval, gate, ladder, tasks
from agentrun.kernel.decisions import (
    Acknowledge,
    AwaitChecks,
    Cause,
    Choose,
    Climb,
    Complete,
    Decision,
    Fail,
    Integrate,
    PhaseName,
    Publish,
    RaiseEscalation,
    Recorded,
    RunAgentVerify,
    RunCheck,
    RunFinalizeStep,
    RunPhase,
    RunTasks,
    SkipVerify,
    StartCandidates,
    StartTask,
    Wait,
    Work,
)
from agentrun.kernel.guard import clip, escalate, guard, interruption_limit, next_escalation_id
from agentrun.kernel.paths import any_matches
from agentrun.kernel.state import BuildState, attempt_key

# The decisions are kernel.decisions'; they are named here too, with what makes them.
__all__ = [
    "Acknowledge",
    "AwaitChecks",
    "Cause",
    "Choose",
    "Climb",
    "Complete",
    "Decision",
    "Fail",
    "Integrate",
    "PhaseName",
    "Publish",
    "RaiseEscalation",
    "Recorded",
    "RunAgentVerify",
    "RunCheck",
    "RunFinalizeStep",
    "RunPhase",
    "RunTasks",
    "SkipVerify",
    "StartCandidates",
    "StartTask",
    "Wait",
    "Work",
    "decide",
    "decide_task",
]


def decide(s: BuildState) -> Decision:
    """The next move. Controls first, then parking, then publication, then the pipeline."""
    if s.status == "complete":
        return Wait("complete")
    if s.status in ("failed", "aborted"):
        return Wait("failed" if s.status == "failed" else "aborted")
    if s.abort_requested:
        return Acknowledge("abort")
    if s.paused:
        return Acknowledge("resume") if s.resume_requested else Wait("paused")
    if s.pause_requested:
        return Acknowledge("pause")
    if s.session is not None or s.in_flight is not None:
        # A runner closes what a dead runner left open before it decides.
        return Wait("in-flight")
    if s.parks:
        # Tasks or candidates in the middle of a phase finish it first: their runners
        # stop at the next boundary, and the build parks once none runs.
        running = tuple(p.id for p in tasks.parts(s) if p.in_flight or p.session)
        return RunTasks(running) if running and s.task is None else Wait("parked")
    if s.stage == "tasks" and s.task is None:
        return _task_graph(s)
    if s.setup_permanent or s.setup_failures >= s.config.policy.max_phase_attempts:
        return Fail(f"the runner could not set up the build: {s.reason}")
    if _empty(s):
        return escalate(
            s,
            "implement",
            s.impl_round,
            "empty",
            f"implement@{s.impl_round} ended with no change against the base "
            f"({s.base_ref} {s.base_sha[:10]}): there is nothing to review or verify. "
            "Answer to let the build go on without a change (as `run --allow-empty` "
            "would), or abort it.",
        )
    if s.task is None:  # only the build publishes; a task's work lands through the queue
        if s.implemented and s.proposal is None and s.stage not in ("plan", "plan-review"):
            return Publish("open-draft")
        if s.proposal is not None and not s.proposal.closed and s.published_head != s.head:
            return Publish("push")
    if s.stage == "implement":
        # Before the round limit: a stall says what keeps failing and what it cost.
        question = ladder.stalled(s)
        if question is not None:
            return escalate(s, "implement", s.impl_round, "stall", question)
    limit = _round_limit(s)
    if limit is not None:
        return limit
    work = _pipeline(s)
    if isinstance(work, Complete) and s.task is not None:
        return Wait("complete")  # a task is done when it passed; only the build completes
    if not isinstance(work, RunPhase | RunCheck | RunAgentVerify | RunFinalizeStep):
        return work
    return guard(s, work)


def decide_task(s: BuildState, task: str) -> Decision:
    """The next move of one task of the build's graph, from the build's state.

    The build's runner acknowledges controls and runs the queue; a task's runner runs
    the task's phases (``decide`` on the task's view) and stops when the build stops.
    """
    t = tasks.part(s, task)
    if s.status != "running":
        return Wait("complete" if s.status == "complete" else "aborted")
    if s.abort_requested:
        return Wait("aborted")
    if s.paused or s.pause_requested:
        return Wait("paused")
    if t.stage in ("passed", "failed", "landed"):
        return Wait("complete")
    if not tasks.deps_landed(s, t):
        return Wait("tasks")
    seen = tasks.view(s, task)
    if t.stage == "waiting":
        return Wait("parked") if seen.parks else StartTask(task=task, base_sha=s.head)
    return decide(seen)


def _task_graph(s: BuildState) -> Decision:
    """The queue lands passing tasks in the graph's order; else the ready frontier runs.

    A task whose runner is in the middle of a phase is in the frontier too: if that
    runner died, the next one takes the task over.
    """
    for t in s.tasks.values():
        if t.stage == "passed" and tasks.deps_landed(s, t):
            return Integrate(task=t.id, head=t.head, changed_paths=t.changed_paths)
    return _frontier(s, tuple(s.tasks))


def _frontier(s: BuildState, parts: tuple[str, ...]) -> RunTasks | Wait:
    """The tasks (or candidates) that may run now; one whose runner is in the middle of a
    phase is in it too, so that a runner takes over if that one died."""
    ready = []
    for part in parts:
        move = decide_task(s, part)
        if not isinstance(move, Wait) or move.reason == "in-flight":
            ready.append(part)
    return RunTasks(tuple(ready)) if ready else Wait("parked")


def _candidates(s: BuildState, runtimes: tuple[str, ...]) -> Decision:
    """Best of N: start the round's candidates, run them side by side, then choose."""
    if s.candidate_round != s.impl_round or not s.candidates:
        return StartCandidates(round=s.impl_round, base_sha=s.head, runtimes=runtimes)
    if not tasks.done_candidates(s):
        return _frontier(s, tuple(s.candidates))
    passing = tasks.passing(s)
    if len(passing) > 1 and "select" in s.config.roles:
        if s.selected is None:
            offered = "\n".join(f"{n}. candidate {c}" for n, c in enumerate(passing, 1))
            return RunPhase(
                phase="select",
                round=s.impl_round,
                attempt=_attempt(s, "select", s.impl_round),
                role="select",
                feedback=(f"The passing candidates, numbered:\n{offered}",),
                offered=passing,
            )
        if 1 <= s.selected <= len(s.offered):
            return Choose(s.impl_round, passing, s.offered[s.selected - 1])
    return Choose(s.impl_round, passing, None)


def _empty(s: BuildState) -> bool:
    """Implement ended and the build's whole diff against its base is empty."""
    if s.allow_empty or not s.implemented or s.changed_paths:
        return False
    return s.stage not in ("plan", "plan-review", "implement")


def _round_limit(s: BuildState) -> RaiseEscalation | None:
    if s.stage in ("plan", "plan-review") and s.plan_round > s.plan_round_limit:
        phase, round_, limit = "plan", s.plan_round, s.plan_round_limit
    elif s.stage == "implement" and s.impl_round > s.impl_round_limit:
        phase, round_, limit = "implement", s.impl_round, s.impl_round_limit
    else:
        return None
    last = s.feedback[-1] if s.feedback else "(no feedback)"
    return escalate(
        s,
        phase,
        round_,
        "round-limit",
        f"{phase} reached its limit of {limit} rounds without approval. Latest feedback: "
        f"{clip(last)} -- answer to allow more rounds, with any guidance, or abort the build.",
    )


def _pipeline(s: BuildState) -> Decision:
    stage = s.stage
    if stage == "plan":
        return _run_phase(s, "plan", s.plan_round)
    if stage == "plan-review":
        return _run_phase(s, "plan-review", s.plan_round)
    if stage == "plan-approval":
        return approval.ask(s, next_escalation_id(s))
    if stage == "implement":
        runtimes = s.config.candidate_runtimes()
        if runtimes and s.task is None and not s.tasks:
            return _candidates(s, runtimes)
        return _run_phase(s, "implement", s.impl_round)
    if stage == "code-review":
        return _run_phase(s, "code-review", s.impl_round)
    if stage == "reconcile" and s.reconcile_base:
        return _run_phase(s, "reconcile", s.impl_round, merge=s.reconcile_base)
    if stage == "verify":
        for step in s.config.verify:
            if step.name not in s.verify_results:
                return _verify_step(s, step)
        stage = "finalize"
    if stage == "finalize":
        pending = [f for f in s.config.finalize if f.name not in s.finalize_results]
        if pending:
            return _finalize_step(s, pending[0], last=len(pending) == 1)
    if s.proposal is not None and not s.proposal.ready and not s.proposal.closed:
        return _checks(s) or Publish("mark-ready")
    return Complete()


def _checks(s: BuildState) -> AwaitChecks | RaiseEscalation | None:
    """The forge's CI gate before ready (``kernel.gate``); None: off, or passed."""
    if not gate.enabled(s.config):
        return None
    seen = gate.current(s)
    if seen is None:
        return AwaitChecks(sha=s.head, deadline=None)
    verdict = gate.judge(s.config, seen.checks)
    if verdict.passed:
        return None
    if gate.timed_out(s, seen, verdict):
        return escalate(s, "checks", s.impl_round, "checks-timeout", gate.question(s, verdict))
    # A failed check started the next round in the fold; here only the wait remains.
    return AwaitChecks(sha=s.head, deadline=gate.deadline(s) if verdict.missing else None)


def _attempt(s: BuildState, phase: str, round_: int) -> int:
    """Which run of the phase in this round this is: failures and interruptions so far, + 1."""
    key = attempt_key(phase, round_)
    return s.runs(key) + 1


def _run_phase(s: BuildState, phase: PhaseName, round_: int, merge: str | None = None) -> RunPhase:
    return RunPhase(
        phase=phase,
        round=round_,
        attempt=_attempt(s, phase, round_),
        role=phase,
        feedback=s.feedback,
        merge=merge,
        rung=ladder.rung_of(s, phase),
    )


def _verify_step(s: BuildState, step: VerifyStep) -> Decision:
    if step.paths and not any_matches(step.paths, s.changed_paths):
        return SkipVerify(
            step=step.name, round=s.impl_round, reason="no changed path matches its `paths`"
        )
    attempt = _attempt(s, f"verify:{step.name}", s.impl_round)
    if step.command is not None:
        return RunCheck(
            step=step.name, command=step.command, round=s.impl_round, attempt=attempt, task=s.task
        )
    return RunAgentVerify(
        step=step.name,
        role=step.agent or "verify",
        round=s.impl_round,
        attempt=attempt,
        feedback=s.feedback,
    )


def _finalize_step(s: BuildState, step: FinalizeStep, last: bool) -> RunFinalizeStep:
    phase = f"finalize:{step.name}"
    cut = s.interruptions.get(attempt_key(phase, s.impl_round), 0)
    return RunFinalizeStep(
        step=step.name,
        command=step.command,
        role=step.agent,
        attempt=_attempt(s, phase, s.impl_round),
        last=last,
        # Finalize never parks a build: a step that keeps being cut short is recorded failed.
        give_up=cut >= interruption_limit(s),
    )
