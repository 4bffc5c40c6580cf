"""Best of N, the runner's side: choose the candidate that goes on, keep the others.

The choice is the select agent's when one was asked (``roles.select``); else the one
passing candidate; else, of several, the passing one with the smallest diff (lines added
and removed against the head they started from); if none passed, the one with the fewest
failing verify steps. Ties go to the lower number. Every candidate's head is kept under
``refs/agentrun/candidates/<slug>/<round>/<n>`` until ``gc`` removes the archived build's.
"""

from __future__ import annotations

import pygit2

from agentrun import events as ev
from agentrun.kernel.decide import Choose
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import TaskState
from agentrun.runner.build import BuildHandle

CANDIDATES = "refs/agentrun/candidates/"


def candidate_ref(slug: str, round_: int, candidate: str) -> str:
    """Where a candidate's head is kept: ``…/<slug>/<round>/<n>`` (``c2`` is ``2``)."""
    return f"{CANDIDATES}{slug}/{round_}/{candidate.removeprefix('c')}"


def choose(build: BuildHandle, work: Choose) -> None:
    state = build.state
    ranked = list(state.candidates.values())
    if work.selected is not None:
        winner, why = state.candidates[work.selected], "the select agent chose it"
    elif len(work.passing) == 1:
        winner, why = state.candidates[work.passing[0]], "the one that passed"
    elif work.passing:
        sizes = {c: _diff_lines(build.repo, state.head, state.candidates[c]) for c in work.passing}
        best = min(work.passing, key=lambda c: (sizes[c], _number(c)))
        winner, why = (
            state.candidates[best],
            f"the smallest passing diff ({sizes[best]} changed line(s))",
        )
    else:
        least = min(ranked, key=lambda c: (c.failing, _number(c.id)))
        winner, why = least, f"none passed; the fewest failing steps ({least.failing})"
    for candidate in ranked:
        if candidate.head:
            ref = candidate_ref(state.slug, work.round, candidate.id)
            build.repo.references.create(ref, pygit2.Oid(hex=candidate.head), force=True)
    # The build branch moves to the winner (a fast-forward: it started at the build head)
    # before the log says so; a runner killed in between is reset to the log's head.
    branch = f"refs/heads/{state.branch}"
    build.repo.references.create(branch, pygit2.Oid(hex=winner.head), force=True)
    chosen = ev.CandidateChosen(
        round=work.round,
        candidate=winner.id,
        passed=winner.stage == "passed",
        reason=f"{winner.runtime}: {why}",
        changed_paths=winner.changed_paths,
    )
    build.append([Draft(chosen)], fact=False)


def _number(candidate: str) -> int:
    return int(candidate.removeprefix("c"))


def _diff_lines(repo: pygit2.Repository, base: str, candidate: TaskState) -> int:
    stats = repo.diff(base, candidate.head).stats
    return int(stats.insertions + stats.deletions)
