"""Plain tables, and ``status``'s own, drawn from the summary index's cells
(kernel/summary.py, commands/status.py).

Light on purpose: ``status`` imports this and no model; render.py draws the other tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from agentrun.commands.status import Row

HEADERS = ["BUILD", "STATE", "PHASE", "ROUND", "ESCALATION", "PROPOSAL", "TOKENS", "COST", "AGE"]


def age(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return "-"
    seconds = int(((now or datetime.now(UTC)) - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    widths = [
        max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)
    ]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip()] + [fmt.format(*r).rstrip() for r in body]


def status_table(found: list[Row]) -> None:
    if not found:
        click.echo('no builds yet: `git agentrun run "GOAL"` starts one')
        return
    body = []
    for row in found:
        slug, phase, round_, escalation, proposal, tokens, cost = row.entry["cells"]
        state = row.state + (" (archived)" if row.archived else "")
        if row.entry["approval"]:
            state += " (plan approval)"
        created = row.entry["created_at"]
        when = age(datetime.fromisoformat(created) if created else None)
        body.append([slug, state, phase, round_, escalation, proposal, tokens, cost, when])
        for (task, _, t_phase, t_round, t_esc, t_tokens, t_cost), (t_state, _) in zip(
            row.entry["tasks"], row.tasks, strict=True
        ):
            body.append(
                [f"  └ {task}", t_state, t_phase, t_round, t_esc, "-", t_tokens, t_cost, "-"]
            )
    for line in table(HEADERS, body):
        click.echo(line)


def unreadable_line(slug: str, error: str) -> str:
    return f"agentrun: build {slug} cannot be read: {error}"
