"""Spending less on what fails: a role's model ladder and the stall detection (DESIGN §4).

A role with ``[ladder.ROLE]`` runs on its cheapest rung first. A failed round (a verify
failure, a review's ``revise``, a guard's refusal) counts against the rung; after
``climb_after`` of them, or when a phase runs out of attempts, the role climbs to the
next rung, in a fresh session. Only the top rung escalates as a build without a ladder
does. Climbing never steps down.

Whatever the ladder, the same failure ``[policy] stall_rounds`` rounds in a row parks
the build: more rounds of the same would spend and not help.

Pure, like the rest of the kernel: the failures compared are the ones the log records.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from agentrun import events as ev
from agentrun.kernel.decisions import Climb
from agentrun.kernel.state import BuildState, attempt_key

Changes = dict[str, object]

# Test ids as runners name the failing ones: pytest's summary, unittest's headers, go
# test's and jest's markers.
_TEST_IDS = (
    # pytest's summary: an id may hold spaces in its parameters (``test_x[a b]``).
    re.compile(r"^(?:FAILED|ERROR) (\S+::.+?)(?: - .*)?$", re.M),
    # unittest, with a subTest's parameters (``(x=1)``) when it names them
    re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)( \(.+\))?$", re.M),
    re.compile(r"^\s*--- FAIL: (\S+)", re.M),  # go test
    re.compile(r"^\s*● (.+?)\s*$", re.M),  # jest
)
# What changes between two runs of the same failure: numbers, times, addresses, paths.
_MASKS = (
    (re.compile(r"(?:/[\w.@+-]+)+/?"), "PATH"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "ADDR"),
    (re.compile(r"\b[0-9a-f]{7,40}\b"), "SHA"),
    (re.compile(r"\d+(?:\.\d+)?"), "N"),
)
_TAIL_LINES = 20


def fingerprint(step: str, output: str) -> str:
    """What failed in ``output`` of ``step``, the same for the same failure in any round:
    ``step: id, id`` for the failing tests a runner names, else ``step: output <hash>`` of
    its last lines with numbers, times, addresses and paths masked."""
    ids: set[str] = set()
    for pattern in _TEST_IDS:
        for found in pattern.finditer(output):
            ids.add(_test_id(*found.groups()))
    ids.discard("Console")  # jest's console block, not a test
    if ids:
        return f"{step}: {', '.join(sorted(ids))}"
    lines = [line.strip() for line in output.splitlines() if line.strip()][-_TAIL_LINES:]
    text = "\n".join(lines)
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return f"{step}: output {hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _test_id(name: str, where: str | None = None, sub: str | None = None) -> str:
    """One test's id; unittest names the method and its class (with the method again on
    Python 3.11 and later), and a subTest's parameters."""
    if where is None:
        return name
    test = where if where.endswith(f".{name}") else f"{where}.{name}"
    return test + (sub or "")


def failed_round(s: BuildState, role: str, failure: str | None) -> Changes:
    """A round of ``role``'s work failed: it counts against the role's rung, and its
    failure (None: one that names none, as a review's ``revise``) against a stall."""
    changes: Changes = {}
    if role in s.config.ladder:
        changes["rung_failures"] = {**s.rung_failures, role: s.rung_failures.get(role, 0) + 1}
    if role == "implement":
        repeats = failure is not None and bool(s.stall) and s.stall[-1] == failure
        changes["stall"] = (*s.stall, failure) if repeats else ((failure,) if failure else ())
    return changes


def climbed(s: BuildState, p: ev.LadderClimbed) -> Changes:
    """The role is on rung ``p.rung`` now: its failures and attempts start again there,
    and its next session is a fresh one (nothing of the rung below is resumed)."""
    return {
        "rungs": {**s.rungs, p.role: p.rung},
        "rung_failures": {**s.rung_failures, p.role: 0},
        "stall": (),
        "attempts": {k: v for k, v in s.attempts.items() if k.rpartition("@")[0] != p.role},
        "resumable": {k: v for k, v in s.resumable.items() if k != p.role},
    }


def rung_of(s: BuildState, role: str) -> int | None:
    """The rung ``role``'s next session runs on (None: the role has no ladder)."""
    return s.rungs.get(role, 0) if role in s.config.ladder else None


def climb(s: BuildState, role: str, phase: str, round_: int) -> Climb | None:
    """Whether ``role`` climbs before its next session of ``phase``@``round_``: after
    ``climb_after`` failed rounds on its rung, or when the phase ran out of attempts
    there. None on the top rung, where the usual escalation applies."""
    ladder = s.config.ladder.get(role)
    if ladder is None:
        return None
    rung = s.rungs.get(role, 0)
    if rung + 1 >= len(ladder.rungs):
        return None
    failed = s.rung_failures.get(role, 0)
    attempts = s.attempts.get(attempt_key(phase, round_), 0)
    if failed >= ladder.climb_after:
        rounds = "round" if failed == 1 else "rounds"
        reason = f"{failed} failed {rounds} on {ladder.rungs[rung]}"
    elif role == "implement" and len(s.stall) >= s.config.policy.stall_rounds:
        reason = f"the same failure {len(s.stall)} rounds in a row on {ladder.rungs[rung]}"
    elif attempts >= s.config.policy.max_phase_attempts:
        reason = f"{phase}@{round_} failed {attempts} times on {ladder.rungs[rung]}"
    else:
        return None
    return Climb(role=role, rung=rung + 1, runtime=ladder.rungs[rung + 1], reason=reason)


def stalled(s: BuildState) -> str | None:
    """The question a stalled build asks (None: it is not stalled): the same failure
    ``stall_rounds`` implement rounds in a row, and no rung above to climb to."""
    if len(s.stall) < s.config.policy.stall_rounds:
        return None
    if climb(s, "implement", "implement", s.impl_round) is not None:
        return None
    return (
        f"The same failure came back {len(s.stall)} rounds in a row ({s.stall[-1]}), so the "
        f"build stopped instead of using its remaining rounds; it has spent "
        f"{s.usage.describe()}. Its work so far is on the build branch. Answer with guidance "
        "to try again, or abort the build."
    )


def rung_key(role: str, rung: int) -> str:
    """The key of ``rung_usage``: ``ROLE:RUNG``."""
    return f"{role}:{rung}"


def estimate_key(role: str, rung: int | None) -> str:
    """Whose sessions estimate the next one of ``role`` (``role_usage``'s key): on a
    ladder, the sessions of its rung, so that a stronger rung's first session is not
    estimated at the cheaper one's spend."""
    return role if rung is None else rung_key(role, rung)


def next_estimate_key(s: BuildState, role: str) -> str:
    """``estimate_key`` of the next session of ``role``: on the rung the role is on."""
    return estimate_key(role, rung_of(s, role))


@dataclass(frozen=True)
class RungSpend:
    """What one rung of a role's ladder spent, and whether the role is on it now."""

    role: str
    rung: int
    runtime: str
    usage: ev.Usage
    current: bool


def rung_spend(s: BuildState) -> list[RungSpend]:
    """Every rung of every ladder that ran a session or is where its role is now, in
    ladder order: what ``status --json``, ``show`` and the proposal list."""
    found = []
    for role, ladder in s.config.ladder.items():
        on = s.rungs.get(role, 0)
        for rung, runtime in enumerate(ladder.rungs):
            used = s.rung_usage.get(rung_key(role, rung))
            if used is not None or (rung == on and estimate_key(role, rung) in s.role_usage):
                found.append(RungSpend(role, rung, runtime, used or ev.Usage(), rung == on))
    return found


def rung_lines(s: BuildState) -> list[str]:
    """``| implement | 0 · cheap | 1,234 tokens … |`` rows, the current rung marked."""
    return [
        f"| {r.role} | {r.rung} · {r.runtime}{' (now)' if r.current else ''} | "
        f"{r.usage.describe()} |"
        for r in rung_spend(s)
    ]
