"""A build's proposal merged or closed on the forge: finished becomes closed (DESIGN §12),
and the build is archived, unless a runner is executing it now (the next sweep does it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrun.commands.pulls import finish_build
from agentrun.errors import ForgeError
from agentrun.kernel.state import BuildState

if TYPE_CHECKING:
    from agentrun.hosted.job import HostedJob


def finish(job: HostedJob, state: BuildState, number: int, merged: bool, login: str) -> bool:
    """Record the close and archive the build, unless a runner is executing it now."""
    holder = job.holder(state.slug, live=True)
    if holder is not None:
        job.say(
            f"build {state.slug}: {job.site.proposal(number)} was closed while {holder} runs "
            "it; the next sweep archives it"
        )
        return False
    finish_build(job.repo, state.slug, number, merged, login)
    job.push()
    word = "merged" if merged else "closed"
    job.result.slug, job.result.state = state.slug, word
    job.result.pr_url = state.proposal.url if state.proposal else ""
    job.say(f"build {state.slug}: {job.site.proposal(number)} was {word}; the build is archived")
    return True


def finish_closed(job: HostedJob) -> bool:
    """Archive the builds whose proposal was merged or closed since the last job."""
    archived_any = False
    for state in job.states():
        number = job.steering.proposal(state)
        if number is None or state.proposal is None or state.proposal.closed:
            continue
        try:
            info = job.forge.get(number)
        except ForgeError as exc:
            job.say(f"build {state.slug}: cannot read {job.site.proposal(number)}: {exc}")
            continue
        if info.state != "open":
            merged = info.state == "merged"
            archived_any = finish(job, state, number, merged, job.site.kind) or archived_any
    return archived_any
