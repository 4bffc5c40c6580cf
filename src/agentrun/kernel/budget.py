"""A build's budgets (DESIGN §4): what it may still spend, and whether its next session fits.

Budgets are hard: ``decide`` stops before a session the remaining budget cannot cover,
and the runner caps each session at what is left. Each answer to a budget question
allows as much again.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrun.kernel.state import BuildState


@dataclass(frozen=True)
class Limits:
    """The build's budgets with the grants its answers gave (None: no such budget)."""

    tokens: int | None
    usd: float | None
    minutes: float | None


def limits(s: BuildState) -> Limits:
    budget, scale = s.config.budget, 1 + s.budget_grants
    return Limits(
        tokens=None if budget.max_tokens is None else budget.max_tokens * scale,
        usd=None if budget.max_cost_usd is None else budget.max_cost_usd * scale,
        minutes=None if budget.max_wall_minutes is None else budget.max_wall_minutes * scale,
    )


def remaining_wall_seconds(s: BuildState) -> float | None:
    """Work time left under ``max_wall_minutes`` (None: no such budget)."""
    minutes = limits(s).minutes
    return None if minutes is None else max(minutes * 60 - s.active_seconds, 0.0)


def remaining_budget(s: BuildState) -> tuple[int | None, float | None]:
    """Tokens and dollars left under ``max_tokens`` and ``max_cost_usd`` (None: no such
    budget), less what other tasks' running sessions hold reserved."""
    limit = limits(s)
    spent, spent_usd = _committed(s)
    tokens = None if limit.tokens is None else max(limit.tokens - spent, 0)
    dollars = None if limit.usd is None else max(limit.usd - spent_usd, 0.0)
    return tokens, dollars


def _committed(s: BuildState) -> tuple[int, float]:
    """What the build spent, and what sessions running beside this one may still spend."""
    return s.usage.tokens + s.reserved_tokens, (s.usage.cost_usd or 0.0) + s.reserved_usd


def estimate(s: BuildState, role: str) -> tuple[int, float]:
    """What the next session of ``role`` is expected to spend: the role's average so far.

    In a build with a task graph, a role's first sessions start side by side: each is
    estimated at the average of the build's sessions so far, not at nothing.
    """
    own = s.role_usage.get(role)
    if own is not None and own.sessions:
        return own.estimate_tokens(), own.estimate_cost()
    if not s.tasks:
        return 0, 0.0
    every = [u for u in s.role_usage.values() if u.sessions]
    sessions = sum(u.sessions for u in every)
    priced = sum(u.priced for u in every)
    tokens = sum(u.tokens for u in every) // sessions if sessions else 0
    return tokens, (sum(u.cost_usd for u in every) / priced if priced else 0.0)


def over_budget(s: BuildState, role: str | None) -> str | None:
    """Why the next session of ``role`` may not start (None: it may; a ``role`` of None
    is a command, which spends no tokens)."""
    limit = limits(s)
    following, next_usd = estimate(s, role) if role else (0, 0.0)
    spent, spent_usd = _committed(s)
    over = limit.tokens is not None and (
        spent >= limit.tokens or bool(role and spent + following > limit.tokens)
    )
    if over and limit.tokens is not None:
        held = f" (and tasks running beside it hold {s.reserved_tokens:,})"
        return (
            f"it has used {s.usage.tokens:,} tokens{held if s.reserved_tokens else ''} of its "
            f"max_tokens budget of {limit.tokens:,}"
            + (f"; the next {role} session is estimated at {following:,}" if role else "")
        )
    if limit.usd is not None and role:
        unknown = [m for m in s.unpriced_models if m not in s.accepted_unpriced]
        if unknown:
            return (
                f"the price of {', '.join(unknown)} is unknown, so max_cost_usd "
                f"(${limit.usd:.2f}) cannot be kept: add [prices.MODEL] to .agentrun.toml"
            )
        if spent_usd >= limit.usd or spent_usd + next_usd > limit.usd:
            return (
                f"it has spent ${s.usage.cost_usd or 0.0:.4f}"
                + (f" (and tasks beside it hold ${s.reserved_usd:.4f})" if s.reserved_usd else "")
                + " of its max_cost_usd budget of "
                f"${limit.usd:.2f}; the next {role} session is estimated at ${next_usd:.4f}"
            )
    minutes = s.active_seconds / 60
    if limit.minutes is not None and minutes >= limit.minutes:
        return (
            f"it has worked {minutes:.2f} minutes of its max_wall_minutes budget of "
            f"{limit.minutes:g} minutes"
        )
    return None
