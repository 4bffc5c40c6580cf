"""A branch pushed to the forge: a build per ``Agentrun-Goal`` trailer of the commits it
gained that has none yet (the pre-push hook's, or another job's, counts), and those builds
run in this job (``commands.goals`` reads the trailers and creates the builds)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from agentrun import secrets
from agentrun.commands.config_at import config_at
from agentrun.commands.goals import TRAILER, Goal, create, goals_in, taken
from agentrun.errors import AgentrunError
from agentrun.hosted.result import JobResult
from agentrun.refs import carries_goals
from agentrun.store.log import build_ref
from agentrun.store.transport import RefUpdate, Remote

if TYPE_CHECKING:
    from agentrun.hosted.job import HostedJob


def run_goals(job: HostedJob, ref: str, before: str, after: str) -> JobResult:
    """``ref`` was pushed from ``before`` to ``after``: a build per ``Agentrun-Goal`` of
    the commits it gained (once per commit and goal: the hook's, or another job's,
    counts), then every one of them runs here."""
    branch = ref.removeprefix("refs/heads/")
    if not carries_goals(ref):
        return job.say(f"ignored: a push to {ref} starts no build (only branches do)")
    if set(after) == {"0"}:
        return job.say(f"ignored: {branch} was deleted")
    if after not in job.repo:
        raise AgentrunError(
            f"commit {after[:10]} of the push is not in this checkout: check out the "
            "pushed commit with its history (`fetch-depth: 0`)"
        )
    job.pull()
    hide = _pushed_before(job, branch, before)
    goals = goals_in(Path(job.repo.path), branch, [after], hide)
    if not goals:
        return job.say(f"no {TRAILER} trailer in the commits pushed to {branch}")
    slugs = [_goal_build(job, goal) for goal in goals]
    for slug in dict.fromkeys(slugs):
        if slug in job.log.slugs():
            job.run(slug)
    return job.result


def _pushed_before(job: HostedJob, branch: str, before: str) -> list[str]:
    """What the remote had before the push: ``before``, or for a new branch (or one
    whose old tip is gone) every other branch of the remote, fetched now."""
    if set(before) != {"0"} and before in job.repo:
        return [before]
    heads = f"refs/remotes/{job.remote}/"
    Remote(job.repo, job.remote).git(
        "fetch", "--no-tags", "--quiet", job.remote, f"+refs/heads/*:{heads}*"
    )
    # --exclude's pattern is relative to what --remotes lists (refs/remotes/).
    return [f"--exclude={job.remote}/{branch}", f"--remotes={job.remote}"]


def _goal_build(job: HostedJob, goal: Goal) -> str:
    """The goal's build: created here and on the remote unless it exists (the remote's
    wins a race); its slug."""
    slug = goal.slug
    if slug in taken(job.repo):
        job.say(f"build {slug} exists for the goal of commit {goal.commit[:10]}")
        return slug
    config = config_at(job.repo, goal.commit, forge=job.site.kind)
    secrets.remember_config(config, os.environ)
    if not create(job.repo, goal, config, job.site.kind):
        return slug
    tip = job.log.tip_oid(slug)
    done = Remote(job.repo, job.remote).push([RefUpdate(build_ref(slug), str(tip), None)])
    if done is None or done.returncode != 0:
        job.repo.references.delete(build_ref(slug))
        job.pull()
        if slug not in job.log.slugs():
            why = (done.stderr.strip() if done else "") or "no answer"
            raise AgentrunError(f"could not create build {slug} on {job.remote}: {why}")
        return slug
    job.say(goal.line("running it here").removeprefix("agentrun: "))
    return slug
