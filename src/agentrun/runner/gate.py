"""The runner's look at the forge's CI (``kernel.gate``): once per run, recorded on change.

A waiting build is continued by a sweep or a CI trigger, each of which looks once: the
log gets a ``checks.seen`` only when what the forge says changed (or when a missing
check's time ran out since the last one), so an hourly sweep adds nothing to a build
whose CI is still running.
"""

from __future__ import annotations

from agentrun import secrets
from agentrun.errors import ConfigError
from agentrun.events import ChecksSeen, SeenCheck
from agentrun.forge.base import Check, Forge, HostedForge
from agentrun.gitrepo import now_utc
from agentrun.kernel.decisions import AwaitChecks
from agentrun.kernel.draft import Draft
from agentrun.kernel.gate import current
from agentrun.runner.build import BuildHandle

SUMMARY_LIMIT = 1500  # characters of a failed check's summary kept for the feedback
LOG_LIMIT = 2000  # characters of the end of its log


def look(build: BuildHandle, forge: Forge, decision: AwaitChecks) -> bool:
    """Read the checks on the head and record them if they changed; whether it did."""
    if not isinstance(forge, HostedForge):
        raise ConfigError(f"[forge] require_checks: the {forge.name} forge has no checks")
    state = build.state
    wanted = state.config.forge.require_checks
    found = [c for c in forge.checks(decision.sha) if wanted == "all" or c.name in (wanted or ())]
    seen = tuple(_seen(c) for c in sorted(found, key=lambda c: c.name))
    last = current(state) if state.head == decision.sha else None
    changed = last is None or _words(last.checks) != _words(seen)
    late = (
        decision.deadline is not None
        and last is not None
        and last.seen_at < decision.deadline <= now_utc()
    )
    if not (changed or late):
        return False
    build.append([Draft(ChecksSeen(sha=decision.sha, checks=seen))], fact=False)
    return True


def _seen(check: Check) -> SeenCheck:
    """What the log keeps of a check: details of failures only, scrubbed and clipped."""
    failed = check.state == "failure"
    summary = secrets.scrub(check.summary.strip())[:SUMMARY_LIMIT] if failed else ""
    tail = secrets.scrub(check.log_tail.rstrip())[-LOG_LIMIT:] if failed else ""
    return SeenCheck(
        name=check.name,
        state=check.state,
        conclusion=check.conclusion,
        summary=summary,
        log_tail=tail,
        url=check.url,
    )


def _words(checks: tuple[SeenCheck, ...]) -> tuple[tuple[str, str, str], ...]:
    """What counts as a change: a check's name, state and conclusion (not its log)."""
    return tuple((c.name, c.state, c.conclusion) for c in checks)
