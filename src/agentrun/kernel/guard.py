"""Whether work the pipeline wants may start: the budgets, the retry guard, and the
questions either asks a person (DESIGN §4). Pure, like ``decide``, which calls it."""

from __future__ import annotations

from agentrun.kernel import ladder
from agentrun.kernel.budget import FirstSession, over_budget
from agentrun.kernel.decisions import (
    Cause,
    Decision,
    RaiseEscalation,
    RunAgentVerify,
    RunCheck,
    RunFinalizeStep,
    RunPhase,
    Wait,
    Work,
)
from agentrun.kernel.state import BuildState, attempt_key


def interruption_limit(s: BuildState) -> int:
    """How often one phase may be cut short (Ctrl-C, a dead runner) before a human looks.

    Interruptions are not the phase's fault and do not use up its attempts, but a phase
    that keeps killing its runner must not loop for ever.
    """
    return s.config.policy.max_phase_attempts + 2


def work_phase(work: Work) -> str:
    if isinstance(work, RunPhase):
        return work.phase
    if isinstance(work, RunFinalizeStep):
        return f"finalize:{work.step}"
    return f"verify:{work.step}"


def role_of(work: Work) -> str | None:
    """The role whose session the work starts (None: a command, no tokens spent)."""
    if isinstance(work, RunPhase | RunAgentVerify):
        return work.role
    if isinstance(work, RunFinalizeStep) and work.command is None:
        return work.role or "finalize"
    return None


def before_first_session(
    s: BuildState, work: Work, first: FirstSession
) -> RaiseEscalation | Wait | None:
    """The runner rendered the prompt of ``work``'s session: whether it fits when it is its
    role's first, estimated from ``first`` (None: it may start; else what ``decide``
    would have returned, had it known the prompt)."""
    return budget_check(s, work, first)


def budget_check(
    s: BuildState, work: Work, first: FirstSession | None = None
) -> RaiseEscalation | Wait | None:
    """Budgets are hard: stop before a session the remaining budget cannot cover.

    A session that fits only once the sessions running in other tasks have ended waits
    for them; the question comes when it would not fit even then.
    """
    problem = over_budget(s, role_of(work), first)
    if problem is None:
        return None
    alone = s.model_copy(update={"reserved_tokens": 0, "reserved_usd": 0.0})
    if (s.reserved_tokens or s.reserved_usd) and over_budget(alone, role_of(work), first) is None:
        return Wait("budget")
    round_ = work.round if isinstance(work, RunPhase | RunCheck | RunAgentVerify) else s.impl_round
    return escalate(
        s,
        work_phase(work),
        round_,
        "budget",
        f"The build stopped at its budget: {problem}. Its work so far is on the build "
        "branch. Answer to allow as much again, or abort the build.",
    )


def guard(s: BuildState, work: Work) -> Decision:
    """The retry guard: a phase that keeps failing, or failed for good, asks a human."""
    over = budget_check(s, work)
    if over is not None:
        return over
    if isinstance(work, RunFinalizeStep):
        return work
    phase = work_phase(work)
    if isinstance(work, RunPhase) and attempt_key(phase, work.round) not in s.blocked:
        climb = ladder.climb(s, work.role, phase, work.round)
        if climb is not None:
            return climb
    stuck = _stuck(s, attempt_key(phase, work.round))
    return work if stuck is None else escalate(s, phase, work.round, *stuck)


def _stuck(s: BuildState, key: str) -> tuple[Cause, str] | None:
    """Why the phase ``key`` may not run again until a person answers (None: it may)."""
    if key in s.blocked:
        return "permanent-failure", (
            f"{key} failed with an error that retrying will not fix: {clip(s.blocked[key])}"
            " -- answer once it is fixed (or with guidance), or abort the build."
        )
    cut = s.interruptions.get(key, 0)
    if cut >= interruption_limit(s):
        return "interrupted", (
            f"{key} was cut short {cut} times (Ctrl-C or a runner that stopped); last: "
            f"{_last_error(s, key)} -- answer to try again, or abort."
        )
    failures = s.attempts.get(key, 0)
    if failures >= s.config.policy.max_phase_attempts:
        return "attempts", (
            f"{key} failed {failures} times; last error: {_last_error(s, key)} -- answer to"
            " try again (with any guidance), or abort the build."
        )
    return None


def _last_error(s: BuildState, key: str) -> str:
    return clip(s.last_error.get(key, "unknown"))


def next_escalation_id(s: BuildState) -> str:
    """The id the next escalation of the build gets (e1, e2, …), whoever raises it."""
    return f"e{s.escalation_count + 1}"


def escalate(
    s: BuildState, phase: str, round_: int, cause: Cause, question: str
) -> RaiseEscalation:
    """The policy asks a human: the build parks on ``question`` until it is answered."""
    return RaiseEscalation(
        id=next_escalation_id(s), phase=phase, round=round_, cause=cause, question=question
    )


def clip(text: str, limit: int = 400, head: int = 120) -> str:
    """``text`` on one line, at most ``limit`` characters: its start (what failed) and its
    end, where test runners print their summary (pytest's ``FAILED …`` lines)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return f"{text[:head]} ... {text[-(limit - head - 5) :]}"
