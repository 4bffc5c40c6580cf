"""The forge's CI as a gate before ready (``[forge] require_checks``), pure like the fold.

A build whose pipeline is done waits for the required checks on its head before its
proposal is marked ready. The runner looks at the forge once per run and records
``checks.seen`` only when what it saw changed; this module reads those events:

- every required check passed: the gate opens (``decide`` marks the proposal ready);
- a required check failed: the next implement round starts with the check's name,
  conclusion, summary and log tail as its feedback (counted like a verify failure);
- a required check has not appeared ``checks_timeout_minutes`` after the wait began
  (measured between the events' own timestamps: the kernel has no clock): a question;
  its answer re-arms the wait;
- else the build is ``waiting``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from agentrun import events as ev
from agentrun.config import Config
from agentrun.kernel import ladder
from agentrun.kernel.session_end import Changes, next_impl_round
from agentrun.kernel.state import FEEDBACK_TAIL, BuildState, ChecksGate

ANY_CHECK = "(any check)"  # what "all" waits for while the head has none yet


@dataclass(frozen=True)
class Verdict:
    """The required checks on one head: which failed, which have not finished, which
    have not appeared yet."""

    failed: tuple[ev.SeenCheck, ...]
    pending: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not (self.failed or self.pending or self.missing)


def enabled(config: Config) -> bool:
    return config.forge.require_checks is not None


def judge(config: Config, checks: tuple[ev.SeenCheck, ...]) -> Verdict:
    """What the gate makes of ``checks``: exact names, or every check for ``"all"``."""
    wanted = config.forge.require_checks
    by_name = {c.name: c for c in checks}
    if wanted == "all" or wanted is None:
        names: tuple[str, ...] = tuple(by_name)
        missing: tuple[str, ...] = () if by_name else (ANY_CHECK,)
    else:
        names = wanted
        missing = tuple(n for n in names if n not in by_name)
    present = [by_name[n] for n in names if n in by_name]
    return Verdict(
        failed=tuple(c for c in present if c.state == "failure"),
        pending=tuple(c.name for c in present if c.state == "pending"),
        missing=missing,
    )


def current(s: BuildState) -> ChecksGate | None:
    """What was last seen of the checks on the build's head (None: not looked at yet)."""
    gate = s.checks_gate
    return gate if gate is not None and gate.sha == s.head else None


def timeout(config: Config) -> timedelta:
    return timedelta(minutes=config.forge.checks_timeout_minutes)


def deadline(s: BuildState) -> datetime | None:
    """When a check still missing from the head ends the wait with a question."""
    gate = current(s)
    return None if gate is None else gate.since + timeout(s.config)


def timed_out(s: BuildState, gate: ChecksGate, verdict: Verdict) -> bool:
    return bool(verdict.missing) and gate.seen_at - gate.since >= timeout(s.config)


def question(s: BuildState, verdict: Verdict) -> str:
    minutes = f"{s.config.forge.checks_timeout_minutes:g}"
    return (
        f"The required check(s) {', '.join(verdict.missing)} did not appear on "
        f"{s.head[:10]} within {minutes} minutes. Does your CI run on agentrun's "
        "pushes (a push with the workflow's own token starts no workflow: the README's "
        "GitHub App section), and are the names in [forge] require_checks exact? "
        "Answer to wait again, or abort the build."
    )


def waiting_for(s: BuildState) -> str:
    """One line: what a waiting build waits for."""
    gate = current(s)
    if gate is None:
        return f"the CI checks on {s.head[:10]}"
    verdict = judge(s.config, gate.checks)
    parts = [f"{n} (pending)" for n in verdict.pending]
    parts += [f"{n} (not there yet)" for n in verdict.missing]
    return f"CI on {s.head[:10]}: {', '.join(parts) or 'nothing'}"


def seen(s: BuildState, p: ev.ChecksSeen, at: datetime) -> Changes:
    """The fold of ``checks.seen``: a failed required check on the head starts the next
    implement round with its report as feedback."""
    gate = s.checks_gate
    if gate is None or gate.sha != p.sha:
        gate = ChecksGate(sha=p.sha, since=at, seen_at=at, checks=p.checks)
    else:
        gate = gate.model_copy(update={"seen_at": at, "checks": p.checks})
    changes: Changes = {"checks_gate": gate}
    if not enabled(s.config) or p.sha != s.head or s.stage != "done":
        return changes
    failed = judge(s.config, p.checks).failed
    if failed:
        feedback = tuple(failure_feedback(check, p.sha, s.impl_round) for check in failed)
        changes.update(next_impl_round(s, feedback))
        names = ", ".join(c.name for c in failed)
        changes.update(ladder.failed_round(s, "implement", f"checks: {names}"))
    return changes


def rearmed() -> Changes:
    """An answer to a timed-out wait: the wait begins again at the next look."""
    return {"checks_gate": None}


def failure_feedback(check: ev.SeenCheck, sha: str, round_: int) -> str:
    """What the next implement round reads of a failed check."""
    lines = [
        f"CI check `{check.name}` failed ({check.conclusion or 'failure'}) on {sha[:10]} "
        f"after round {round_}."
    ]
    if check.summary:
        lines.append(check.summary)
    if check.log_tail:
        lines.append(f"The end of its log:\n{check.log_tail}")
    if check.url:
        lines.append(f"Details: {check.url}")
    return "\n".join(lines)[-FEEDBACK_TAIL * 2 :]
