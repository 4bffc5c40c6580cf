"""One CI job's work on a forge's builds, whatever the forge.

- ``start``: an issue's build is created (one per issue: a second start, or a build
  another job already pushed, resumes it) and run.
- ``steer_issue`` / ``steer_proposal``: the comments and reviews since the build's
  ``forge.cursor`` are acted on (all of them, not only the one that started the job), and
  the build runs on.
- ``close``: a build's proposal was merged or closed: the build is archived (§12).
- ``pushed``: a branch was pushed: a build per ``Agentrun-Goal`` trailer of the commits
  it gained that has none yet (``hook.goals``), and those builds run.
- ``sweep``: the same for proposals closed meanwhile, every open build steered, then a
  sweep of the builds that have work.

The config is read from the base branch as fetched from the remote, never from the
working tree (which may be a proposal's). An adapter (``hosted/github_action.py`` for GitHub
Actions) turns its forge's event payload into these calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pygit2

from agentrun import secrets
from agentrun.commands.config_at import config_at
from agentrun.config import CONFIG_FILE, Config
from agentrun.errors import AgentrunError, ForgeError, LeaseHeldError
from agentrun.forge.base import HostedForge
from agentrun.hosted.closing import finish, finish_closed
from agentrun.hosted.result import JobResult
from agentrun.hosted.site import Site
from agentrun.hosted.steering import Steering
from agentrun.kernel.state import BuildState
from agentrun.runner.build import Observer
from agentrun.sanitize import sanitize
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

if TYPE_CHECKING:
    pass

TITLE_LIMIT = 300
PUSHES = 3  # tries to push what a job appended while others push too


class HostedJob:
    """The repository, the forge it works for, the base branch's config and the forge."""

    def __init__(
        self,
        repo: pygit2.Repository,
        site: Site,
        config_path: str = CONFIG_FILE,
        remote: str = "origin",
        stop_at: float | None = None,
        label: str | None = None,
        result: JobResult | None = None,
        fan_out: bool = False,
    ) -> None:
        """``stop_at``: a ``time.monotonic()`` deadline for the runner; ``label``: the
        trigger label when it is not the config's; ``result`` is filled in as the job goes
        (the caller keeps what it holds when the job raises); ``observer`` watches the
        builds the job runs. ``fan_out``: a build that reaches ready tasks stops there,
        and ``result.tasks`` lists them for CI jobs to run (``git agentrun task``)."""
        self.repo, self.site, self.remote, self.stop_at = repo, site, remote, stop_at
        self.config_path, self.label, self.fan_out = config_path, label, fan_out
        self._config: Config | None = None
        self.log, self.cache = EventLog(repo), StateCache(repo)
        self.result = result or JobResult()
        if fan_out:
            self.result.tasks = ()
        self.observer: Observer | None = None
        self.say = self.result.say
        self.steering = Steering(
            repo, site, self._open_forge, lambda: self.config.forge.allow_bots, self.say, remote
        )

    @property
    def forge(self) -> HostedForge:
        """The forge, opened once for the job (steering shares it)."""
        return self.steering.forge

    # --- what an event asks ---------------------------------------------------------------

    def start(self, number: int, title: str, body: str, login: str) -> JobResult:
        """Issue ``number`` was labeled: create its build, or resume the one it has."""
        self.pull()
        state = self.issue_build(number)
        if state is None:
            state = self._create(number, title, body, login)
            self.say(f"build {state.slug} created for issue #{number}")
        else:
            self.say(f"build {state.slug} already exists for issue #{number}: resuming it")
            if state.paused:
                from agentrun.commands.control import request
                from agentrun.kernel import requests

                request(self.repo, state.slug, requests.resume, login)
        return self.run(state.slug)

    def pushed(self, ref: str, before: str, after: str) -> JobResult:
        """``ref`` was pushed from ``before`` to ``after``: a build per ``Agentrun-Goal`` of
        the commits it gained, and each runs here (``hosted.goals``)."""
        from agentrun.hosted.goals import run_goals

        return run_goals(self, ref, before, after)

    def steer_issue(self, number: int, is_proposal: bool) -> JobResult:
        """A comment on issue or proposal ``number``: steer the build it belongs to."""
        self.pull()
        state = (
            self.proposal_build(number)
            if is_proposal
            else self.issue_build(number) or self.proposal_build(number)
        )
        if state is None:
            return self.say(f"no agentrun build belongs to #{number}; nothing to do")
        self._steer(state)
        return self.run(state.slug)

    def steer_proposal(self, number: int) -> JobResult:
        """A review of proposal ``number`` (on a build's branch): steer its build."""
        self.pull()
        state = self.proposal_build(number)
        if state is None:
            return self.say(
                f"{self.site.proposal(number)} is not an agentrun build's; nothing to do"
            )
        self._steer(state)
        return self.run(state.slug)

    def close(self, number: int, merged: bool, login: str) -> JobResult:
        """Proposal ``number`` was merged or closed: finished becomes closed (§12)."""
        self.pull()
        state = self.proposal_build(number)
        if state is None:
            return self.say(
                f"{self.site.proposal(number)} is not an agentrun build's; nothing to do"
            )
        finish(self, state, number, merged, login or self.site.kind)
        return self.result

    def sweep(self) -> JobResult:
        """Archive what closed meanwhile, steer every open build, then run what has work."""
        from agentrun.commands.sweep import sweep

        self.pull()
        moved = finish_closed(self)
        steerable = [s for s in self.states() if s.issue is not None and _open(s)]
        self.steering.prefetch(steerable)
        for state in steerable:
            moved = self.steering.steer(state) or moved
        if moved:
            self.push()
        swept = sweep(self.repo, self.remote, self.observer, stop_at=self.stop_at)
        self.result.lines.extend(item.line() for item in swept.builds)
        self.result.lines.extend(
            f"build {slug} cannot be read: {error}" for slug, error in swept.unreadable
        )
        if swept.builds or swept.unreadable:
            return self.result
        return self.say("no open builds to sweep")

    def checks_done(self, sha: str) -> JobResult:
        """CI finished on ``sha``: the builds whose head it is look at their checks again
        (a waiting build goes on: ready, or the next round with what failed)."""
        self.pull()
        heads = [s for s in self.states() if s.status == "running" and s.head == sha]
        if not heads:
            return self.say(f"no running build's head is {sha[:10]}; nothing to do")
        for state in heads:
            self.run(state.slug)
        return self.result

    def _steer(self, state: BuildState) -> None:
        """Steer one build; push what that appended, so it stays when the job runs nothing."""
        self.result.show(state)  # what the outputs say if steering raises
        if self.steering.steer(state):
            self.push()

    # --- builds ---------------------------------------------------------------------------

    def states(self) -> list[BuildState]:
        states = []
        for slug in self.log.slugs():
            try:
                states.append(load_state(self.log, self.cache, slug)[1])
            except AgentrunError as exc:
                self.say(f"build {slug} cannot be read: {exc}")
        return states

    def issue_build(self, number: int) -> BuildState | None:
        ref = self.site.issue_ref(number)
        return next((s for s in self.states() if s.issue == ref), None)

    def proposal_build(self, number: int) -> BuildState | None:
        return next((s for s in self.states() if self.steering.proposal(s) == number), None)

    def _create(self, number: int, title: str, body: str, login: str) -> BuildState:
        """Create the issue's build here and on the remote; the remote's wins a race."""
        from agentrun.commands.build import new_build, runnable, slugify
        from agentrun.store.log import build_ref
        from agentrun.store.transport import RefUpdate, Remote

        title = sanitize(title, TITLE_LIMIT)
        body = sanitize(body)
        goal = f"{title}\n\n{body}" if body else title
        if not goal:
            raise AgentrunError(f"issue #{number} has no title or text to build from")
        config, _ = runnable(self.config)
        stem = f"issue-{number}-{slugify(title)}"
        slug = new_build(
            self.repo,
            stem,
            login or self.site.kind,
            goal,
            self.base(),
            config,
            source="issue",
            issue=self.site.issue_ref(number),
            requested_by=login or None,
        )
        tip = self.log.tip_oid(slug)
        # The remote must not have the log yet: of two jobs creating it at once, one wins
        # and the other continues with the winner's log.
        done = Remote(self.repo, self.remote).push([RefUpdate(build_ref(slug), str(tip), None)])
        if done is None or done.returncode != 0:
            self.repo.references.delete(build_ref(slug))
            self.pull()
            state = self.issue_build(number)
            if state is None:
                why = (done.stderr.strip() if done else "") or "no answer"
                raise AgentrunError(f"could not create build {slug} on {self.remote}: {why}")
            return state
        return load_state(self.log, self.cache, slug)[1]

    def run(self, slug: str) -> JobResult:
        """Run the build when it has work; another job's live lease is not an error."""
        from agentrun.kernel.decide import Wait, decide
        from agentrun.runner.loop import Runner

        state = load_state(self.log, self.cache, slug)[1]
        self.result.show(state)  # what the outputs say if the run raises
        if isinstance(decide(state), Wait):
            return self.say(f"build {slug} is {self.result.state}; nothing to run")
        try:
            runner = Runner(
                self.repo,
                slug,
                self.observer,
                remote=self.remote,
                stop_at=self.stop_at,
                fan_out=self.fan_out,
            )
            outcome = runner.run()
        except LeaseHeldError as exc:
            holder = self.holder(slug)
            self.result.show(load_state(self.log, self.cache, slug)[1], holder or "elsewhere")
            return self.say(f"not run here: {exc}" + (f" (held by {holder})" if holder else ""))
        self.result.show(outcome.state)
        if outcome.said:
            self.result.state = "waiting"  # a gate before its first run (a push's base)
            return self.say(outcome.said)
        if outcome.waiting == "tasks":
            self.result.tasks = runner.ready
            return self.say(
                f"build {slug} is {self.result.state}: tasks {', '.join(runner.ready)} wait "
                f"for CI jobs (`git agentrun task {slug} ID --remote {self.remote}`), then "
                f"`git agentrun resume {slug} --remote {self.remote}` lands them"
            )
        why = f" (stopped: {outcome.waiting})" if outcome.waiting == "time-limit" else ""
        return self.say(f"build {slug} is {self.result.state}{why}")

    def holder(self, slug: str, live: bool = False) -> str | None:
        """Who holds the build's lease on the remote now, if anyone can be seen to
        (``live``: only a holder whose lease has not expired)."""
        from agentrun.gitrepo import now_utc
        from agentrun.store.remote_lease import remote_lease
        from agentrun.store.transport import Remote, SyncError

        try:
            seen = remote_lease(Remote(self.repo, self.remote), slug)
        except SyncError:
            return None
        if seen is None:
            return None
        info = seen[1]
        if live and info.expired(now_utc()):
            return None
        return f"{info.holder} on {info.host} (pid {info.pid})"

    # --- the remote, the base, the config, the forge -------------------------------------

    def pull(self) -> None:
        from agentrun.store.sync import pull

        pull(self.repo, self.remote)

    def push(self) -> None:
        """Push what steering appended, so a job that does not run the build keeps it."""
        from agentrun.store.sync import sync
        from agentrun.store.transport import SyncError

        for attempt in range(PUSHES):
            try:
                sync(self.repo, self.remote)
                return
            except SyncError:
                if attempt == PUSHES - 1:
                    raise

    def default_branch(self) -> str:
        """The site's, else the remote's HEAD as fetched, else ``main``."""
        if self.site.default_branch:
            return self.site.default_branch
        head = self.repo.references.get(f"refs/remotes/{self.remote}/HEAD")
        if head is not None and isinstance(head.target, str):
            return head.target.removeprefix(f"refs/remotes/{self.remote}/")
        return "main"

    def base(self) -> tuple[str, str]:
        """The default branch and its commit, as fetched from the remote."""
        branch = self.default_branch()
        for ref in (f"refs/remotes/{self.remote}/{branch}", f"refs/heads/{branch}"):
            found = self.repo.references.get(ref)
            if found is not None:
                return branch, str(found.resolve().target)
        raise AgentrunError(
            f"the base branch {branch} was not fetched: check out with `fetch-depth: 0`"
        )

    @property
    def config(self) -> Config:
        """``.agentrun.toml`` of the base branch's commit (never the working tree), with the
        forge set to the site's: a build started here publishes there."""
        if self._config is None:
            branch, sha = self.base()
            self._config = config_at(
                self.repo,
                sha,
                path=self.config_path,
                where=branch,
                forge=self.site.kind,
                label=self.label,
            )
            # Issue text, comments and reviews may quote a secret: scrubbed before written.
            secrets.remember_config(self._config, os.environ)
        return self._config

    def _open_forge(self) -> HostedForge:
        from agentrun.forge.base import open_forge

        found = open_forge(self.repo, self.site.kind, self.stop_at)
        if not isinstance(found, HostedForge):
            raise ForgeError(f"the {self.site.kind} forge cannot read issues and permissions")
        return found


def _open(state: BuildState) -> bool:
    """Still steerable: running, or complete with its proposal open (it takes reviews)."""
    if state.status == "running":
        return True
    proposal = state.proposal
    return state.status == "complete" and proposal is not None and not proposal.closed


# What a forge's adapter does with one kind of event: read its payload, call the job.
Handler = Callable[["HostedJob", dict[str, Any]], JobResult]


def pushed(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    """A push event (GitHub's webhook, GitLab's or its push pipeline's variables): the
    goals of the commits the branch gained, ``before``..``after``."""
    from agentrun.commands.goals import check_push

    return job.pushed(*check_push(payload.get("ref"), payload.get("before"), payload.get("after")))


def act(
    job: HostedJob, kind: str, payload: dict[str, Any], handlers: Mapping[str, Handler]
) -> JobResult:
    """Act on one event of ``kind`` with its adapter's handler; other kinds do nothing."""
    handler = handlers.get(kind)
    if handler is None:
        return job.say(f"agentrun does not act on {kind or 'unnamed'} events; nothing to do")
    return handler(job, payload)
