"""A build's budgets (DESIGN §4): what it may still spend, and whether its next session fits.

Budgets are hard: ``decide`` stops before a session the remaining budget cannot cover,
and the runner caps each session at what is left. Each answer to a budget question
allows as much again.

A session is estimated at its role's average so far. A role's first session has no
average: once the runner has rendered its prompt, it asks here whether the prompt and
one response at the runtime's output cap fit (:class:`FirstSession`), and the same
question is raised if they do not (``kernel.decide.before_first_session``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agentrun.config import Config
from agentrun.kernel import ladder
from agentrun.kernel.state import BuildState
from agentrun.prices import price_of

BYTES_PER_TOKEN = 4  # an estimate, not a count: English text and code run 3 to 5


@dataclass(frozen=True)
class Limits:
    """The build's budgets with the grants its answers gave (None: no such budget)."""

    tokens: int | None
    usd: float | None
    minutes: float | None


def dollars(amount: float) -> str:
    """A budget in dollars as it was written: ``$5.00``, ``$0.005`` (never rounded to
    cents, which would make a small overspend read as under budget)."""
    return f"${amount:.2f}" if round(amount, 2) == amount else f"${amount:.4g}"


def how_to_price(config: Config, unpriced: list[str] | tuple[str, ...]) -> str:
    """What gives the ``unpriced`` models a price: ``[prices."M"]`` for a model; for a
    runtime with no model (its name stands in for one), a model to look prices up by."""
    bare = [n for n in unpriced if n in config.runtimes and config.runtimes[n].model is None]
    models = [n for n in unpriced if n not in bare]
    fixes = [f'add [prices."{m}"]' for m in models]
    fixes += [f'set [runtimes.{n}] model = "…" and price it' for n in bare]
    return "; ".join(fixes)


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


@dataclass(frozen=True)
class FirstSession:
    """What a role's first session needs at the least, measured by the runner before it
    starts: its rendered prompt, and one response at the runtime's output cap."""

    prompt_bytes: int
    output_cap: int
    model: str | None = None  # priced for max_cost_usd

    @property
    def prompt_tokens(self) -> int:
        return math.ceil(self.prompt_bytes / BYTES_PER_TOKEN)

    def estimate(self, s: BuildState) -> tuple[int, float]:
        """Tokens and dollars: the prompt read once, one response written (an unpriced
        model costs 0 here; ``over_budget`` asks for its price)."""
        price = price_of(self.model, s.config.prices)
        usd = 0.0
        if price is not None:
            usd = (self.prompt_tokens * price.input + self.output_cap * price.output) / 1e6
        return self.prompt_tokens + self.output_cap, usd

    def said(self) -> str:
        return f"its prompt (about {self.prompt_tokens:,}) and one response of {self.output_cap:,}"


def estimate(s: BuildState, role: str, first: FirstSession | None = None) -> tuple[int, float]:
    """What the next session of ``role`` is expected to spend: the role's average so far.

    A role's first session is estimated at ``first`` where the runner measured it. In a
    build with a task graph, a role's first sessions start side by side: each is
    estimated at the average of the build's sessions so far (or ``first``, if more).
    """
    own = s.role_usage.get(ladder.next_estimate_key(s, role))
    if own is not None and own.sessions:
        return own.estimate_tokens(), own.estimate_cost()
    least = first.estimate(s) if first is not None else (0, 0.0)
    if not s.tasks:
        return least
    every = [u for u in s.role_usage.values() if u.sessions]
    sessions = sum(u.sessions for u in every)
    priced = sum(u.priced for u in every)
    tokens = sum(u.tokens for u in every) // sessions if sessions else 0
    usd = sum(u.cost_usd for u in every) / priced if priced else 0.0
    return max(tokens, least[0]), max(usd, least[1])


def _first(s: BuildState, role: str | None, first: FirstSession | None) -> FirstSession | None:
    """``first`` where the next session of ``role`` is the role's first (None: it is not)."""
    own = s.role_usage.get(ladder.next_estimate_key(s, role)) if role else None
    return first if role and first is not None and not (own and own.sessions) else None


def over_budget(s: BuildState, role: str | None, first: FirstSession | None = None) -> str | None:
    """Why the next session of ``role`` may not start (None: it may; a ``role`` of None
    is a command, which spends no tokens). ``first``: what the role's first session
    needs, where the runner measured it."""
    limit = limits(s)
    first = _first(s, role, first)
    following, next_usd = estimate(s, role, first) if role else (0, 0.0)
    basis = f" ({first.said()})" if first is not None else ""
    spent, spent_usd = _committed(s)
    over = limit.tokens is not None and (
        spent >= limit.tokens or bool(role and spent + following > limit.tokens)
    )
    if over and limit.tokens is not None:
        held = f" (and tasks running beside it hold {s.reserved_tokens:,})"
        return (
            f"it has used {s.usage.tokens:,} tokens{held if s.reserved_tokens else ''} of its "
            f"max_tokens budget of {limit.tokens:,}"
            + (f"; the next {role} session is estimated at {following:,}{basis}" if role else "")
        )
    if limit.usd is not None and role:
        unknown = [m for m in s.unpriced_models if m not in s.accepted_unpriced]
        if unknown:
            return (
                f"the price of {', '.join(unknown)} is unknown, so max_cost_usd "
                f"({dollars(limit.usd)}) cannot be kept: {how_to_price(s.config, unknown)} "
                "in .agentrun.toml"
            )
        if spent_usd >= limit.usd or spent_usd + next_usd > limit.usd:
            return (
                f"it has spent ${s.usage.cost_usd or 0.0:.4f}"
                + (f" (and tasks beside it hold ${s.reserved_usd:.4f})" if s.reserved_usd else "")
                + " of its max_cost_usd budget of "
                f"{dollars(limit.usd)}; the next {role} session is estimated at "
                f"${next_usd:.4f}{basis}"
            )
    minutes = s.active_seconds / 60
    if limit.minutes is not None and minutes >= limit.minutes:
        return (
            f"it has worked {minutes:.2f} minutes of its max_wall_minutes budget of "
            f"{limit.minutes:g} minutes"
        )
    return None
