"""Payloads of the forge's CI as a gate (``[forge] require_checks``): what a runner saw."""

from __future__ import annotations

from typing import Literal

from agentrun.events.base import Frozen, PayloadModel


class SeenCheck(Frozen):
    """One check or status on the head, as the forge reported it (``forge.base.Check``).

    ``summary`` and ``log_tail`` are kept for failures only, scrubbed and clipped.
    """

    name: str
    state: Literal["pending", "success", "failure"]
    conclusion: str = ""
    summary: str = ""
    log_tail: str = ""
    url: str = ""


class ChecksSeen(PayloadModel):
    """The checks on ``sha`` changed since the runner last looked (or the wait for a
    missing one ran past its time): recorded only then, so a waiting build's log grows
    with what its CI did, not with how often it was looked at."""

    type: Literal["checks.seen"] = "checks.seen"
    sha: str
    checks: tuple[SeenCheck, ...] = ()

    def summary(self) -> str:
        count = {state: 0 for state in ("success", "pending", "failure")}
        for check in self.checks:
            count[check.state] += 1
        said = ", ".join(f"{n} {state}" for state, n in count.items() if n)
        return f"{self.sha[:10]}: {said or 'no checks'}"
