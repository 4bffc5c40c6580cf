"""``git agentrun action``: one GitHub Actions job, driven by the event that started it.

- ``issues.labeled`` with the trigger label creates the issue's build (one per issue:
  a second label event, or a build another job already pushed, resumes it).
- ``issue_comment.created`` and ``pull_request_review.submitted`` steer the build of
  that issue or pull request (a review only on a build's ``agentrun/*`` branch). Every
  job reads *all* comments and reviews since the build's ``forge.cursor``, not only the
  one that triggered it: GitHub keeps only the newest pending job of a concurrency group
  and cancels the others.
- ``pull_request.closed`` on a build's pull request (merged or not) archives the build;
  ``schedule`` / ``workflow_dispatch`` do the same for pull requests closed meanwhile,
  steer every open build, then sweep.

The config is read from the base branch as fetched from the remote, never from the
working tree (which may be a pull request's). Commands are accepted only from people
with write permission or above, asked of the API; bots only when the config lists them.
``$GITHUB_OUTPUT`` gets ``slug``, ``pr-url`` and ``state`` however the job ends
(``outputs_written``), so a workflow can report a failed job's build.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from agentrun import secrets
from agentrun.commands.steer import FORGE, Steering, proposal_number
from agentrun.config import CONFIG_FILE, Config, config_from_data, parse_config
from agentrun.errors import AgentrunError, ConfigError, ForgeError, LeaseHeldError
from agentrun.events import BuildCreated, BuildResumeRequested, HumanActor
from agentrun.forge.base import HostedForge
from agentrun.kernel.state import BuildState
from agentrun.runner.build import Observer
from agentrun.sanitize import sanitize
from agentrun.snapshot import snapshot
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import Draft, EventLog, build_ref

TITLE_LIMIT = 300


@dataclass(frozen=True)
class GitHubEvent:
    """What the Actions runner tells a step: the event and its payload."""

    name: str
    payload: dict[str, Any]
    repository: str  # owner/name
    ref_name: str = ""  # GITHUB_REF_NAME: the default branch for ``schedule``

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GitHubEvent:
        name = environ.get("GITHUB_EVENT_NAME", "")
        if not name:
            raise AgentrunError(
                "GITHUB_EVENT_NAME is not set: `git agentrun action` runs inside a GitHub "
                "Actions job (see examples/github/agentrun.yml)"
            )
        repository = environ.get("GITHUB_REPOSITORY", "")
        if "/" not in repository:
            raise AgentrunError("GITHUB_REPOSITORY is not set to owner/name")
        payload: dict[str, Any] = {}
        path = environ.get("GITHUB_EVENT_PATH")
        if path:
            try:
                loaded = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise AgentrunError(f"cannot read the event payload {path}: {exc}") from None
            if not isinstance(loaded, dict):
                raise AgentrunError(f"the event payload {path} is not a JSON object")
            payload = loaded
        elif name not in ("schedule", "workflow_dispatch"):
            raise AgentrunError(f"GITHUB_EVENT_PATH is not set for a {name} event")
        return cls(name, payload, repository, environ.get("GITHUB_REF_NAME", ""))


@dataclass
class ActionResult:
    lines: list[str] = field(default_factory=list)
    slug: str = ""
    pr_url: str = ""
    state: str = ""
    build: BuildState | None = None  # the build as last shown (the job summary reads it)

    def show(self, state: BuildState, runner: str | None = None) -> None:
        """The build's outputs; ``runner``: who runs it now (none: it is stopped if running)."""
        from agentrun.commands.inspect import state_word

        self.slug, self.state = state.slug, state_word(state, runner)
        self.build = state
        self.pr_url = state.proposal.url if state.proposal else ""

    def write_outputs(self, path: Path) -> None:
        """Append ``slug``, ``pr-url`` and ``state`` to the step's ``$GITHUB_OUTPUT``."""
        with path.open("a", encoding="utf-8") as out:
            for key, value in (("slug", self.slug), ("pr-url", self.pr_url), ("state", self.state)):
                out.write(f"{key}={value}\n")


@contextmanager
def outputs_written(environ: Mapping[str, str]) -> Iterator[ActionResult]:
    """The job's result, written to ``$GITHUB_OUTPUT`` (when set) however the job ends:
    on an error too, with what was known of the build by then (empty values before)."""
    result = ActionResult()
    try:
        yield result
    finally:
        path = environ.get("GITHUB_OUTPUT")
        if path:
            result.write_outputs(Path(path))


def action(
    repo: pygit2.Repository,
    event: GitHubEvent,
    config_path: str = CONFIG_FILE,
    remote: str = "origin",
    stop_at: float | None = None,
    label: str | None = None,
    result: ActionResult | None = None,
    observer: Observer | None = None,
) -> ActionResult:
    """Act on one event; ``stop_at`` is a ``time.monotonic()`` deadline for the runner,
    ``label`` the trigger label when it is not the config's; ``result`` is filled in as
    the job goes (the caller keeps what it holds when the job raises); ``observer``
    watches the builds the job runs."""
    job = Job(repo, event, config_path, remote, stop_at, label, result or ActionResult())
    job.observer = observer
    handlers: dict[str, Callable[[], ActionResult]] = {
        "issues": job.labeled,
        "issue_comment": job.commented,
        "pull_request_review": job.reviewed,
        "pull_request": job.closed,
        "schedule": job.sweep,
        "workflow_dispatch": job.sweep,
    }
    handler = handlers.get(event.name)
    if handler is None:
        return job._say(f"agentrun does not act on {event.name} events; nothing to do")
    return handler()


class Job:
    """One Action job: the repository, the event, the base config and the forge."""

    def __init__(
        self,
        repo: pygit2.Repository,
        event: GitHubEvent,
        config_path: str,
        remote: str,
        stop_at: float | None,
        label: str | None,
        result: ActionResult,
    ) -> None:
        self.repo, self.event, self.remote, self.stop_at = repo, event, remote, stop_at
        self.config_path, self.label = config_path, label
        self._config: Config | None = None
        self.log, self.cache = EventLog(repo), StateCache(repo)
        self.result = result
        self.observer: Observer | None = None
        self.steering = Steering(
            repo, self._open_forge, lambda: self.config.forge.allow_bots, self._say, remote
        )

    # --- the events ---------------------------------------------------------------------

    def labeled(self) -> ActionResult:
        payload = self.event.payload
        label = str((payload.get("label") or {}).get("name", ""))
        if payload.get("action") != "labeled" or label != self.config.forge.label:
            return self._say(
                f"ignored: {payload.get('action')} with label {label!r} "
                f"(the trigger label is {self.config.forge.label!r})"
            )
        issue = payload.get("issue") or {}
        if "pull_request" in issue:
            return self._say("ignored: a label on a pull request does not start a build")
        number = int(issue["number"])
        login = str((payload.get("sender") or {}).get("login", ""))
        self._pull()
        state = self._issue_build(number)
        if state is None:
            state = self._create(issue, login)
            self._say(f"build {state.slug} created for issue #{number}")
        else:
            self._say(f"build {state.slug} already exists for issue #{number}: resuming it")
            if state.paused:
                from agentrun.commands.control import request

                request(self.repo, state.slug, lambda s: BuildResumeRequested(), login)
        return self._run(state.slug)

    def commented(self) -> ActionResult:
        payload = self.event.payload
        if payload.get("action") != "created":
            return self._say(f"ignored: issue_comment {payload.get('action')}")
        issue = payload.get("issue") or {}
        number = int(issue["number"])
        self.steering.note_bot(payload.get("comment", {}).get("user"))
        self._pull()
        state = (
            self._proposal_build(number)
            if "pull_request" in issue
            else self._issue_build(number) or self._proposal_build(number)
        )
        if state is None:
            return self._say(f"no agentrun build belongs to #{number}; nothing to do")
        self._steer(state)
        return self._run(state.slug)

    def reviewed(self) -> ActionResult:
        from agentrun.forge.github import BRANCH_PREFIX

        payload = self.event.payload
        review = payload.get("review") or {}
        pull = payload.get("pull_request") or {}
        number = int(pull.get("number", 0))
        if payload.get("action") != "submitted":
            return self._say(f"ignored: pull_request_review {payload.get('action')}")
        # Builds publish only from their own branches: a review elsewhere steers nothing,
        # whatever the pull request's number (nothing is fetched or asked of the API).
        head = str((pull.get("head") or {}).get("ref", ""))
        if not head.startswith(BRANCH_PREFIX):
            return self._say(
                f"pull request #{number} is not an agentrun build's (its branch {head!r} is "
                f"not {BRANCH_PREFIX}*); nothing to do"
            )
        self.steering.note_bot(review.get("user"))
        self._pull()
        state = self._proposal_build(number)
        if state is None:
            return self._say(f"pull request #{number} is not an agentrun build's; nothing to do")
        self._steer(state)
        return self._run(state.slug)

    def closed(self) -> ActionResult:
        """A build's pull request was merged or closed: finished becomes closed (§12)."""
        payload = self.event.payload
        pull = payload.get("pull_request") or {}
        number = int(pull.get("number", 0))
        if payload.get("action") != "closed":
            return self._say(f"ignored: pull_request {payload.get('action')}")
        self._pull()
        state = self._proposal_build(number)
        if state is None:
            return self._say(f"pull request #{number} is not an agentrun build's; nothing to do")
        login = str((payload.get("sender") or {}).get("login", "")) or "github"
        self._finish(state, number, bool(pull.get("merged")), login)
        return self.result

    def sweep(self) -> ActionResult:
        from agentrun.commands.sweep import sweep

        self._pull()
        moved = self._finish_closed()
        steerable = [s for s in self._states() if s.issue is not None and _open(s)]
        self.steering.prefetch(steerable)
        for state in steerable:
            moved = self.steering.steer(state) or moved
        if moved:
            self._push()
        swept = sweep(self.repo, self.remote, self.observer, stop_at=self.stop_at)
        self.result.lines.extend(item.line() for item in swept.builds)
        self.result.lines.extend(
            f"build {slug} cannot be read: {error}" for slug, error in swept.unreadable
        )
        if swept.builds or swept.unreadable:
            return self.result
        return self._say("no open builds to sweep")

    # --- closing: merged or closed pull requests archive their builds -----------------

    def _finish(self, state: BuildState, number: int, merged: bool, login: str) -> bool:
        """Record the close and archive the build, unless a runner is executing it now."""
        from agentrun.commands.pulls import finish_build

        holder = self._holder(state.slug, live=True)
        if holder is not None:
            self._say(
                f"build {state.slug}: pull request #{number} was closed while {holder} runs "
                "it; the next sweep archives it"
            )
            return False
        finish_build(self.repo, state.slug, number, merged, login)
        self._push()
        self.result.slug, self.result.state = state.slug, "merged" if merged else "closed"
        self.result.pr_url = state.proposal.url if state.proposal else ""
        word = "merged" if merged else "closed"
        self._say(f"build {state.slug}: pull request #{number} was {word}; the build is archived")
        return True

    def _finish_closed(self) -> bool:
        """Archive the builds whose pull request was merged or closed since the last job."""
        archived_any = False
        forge: HostedForge | None = None
        for state in self._states():
            number = proposal_number(state)
            if number is None or state.proposal is None or state.proposal.closed:
                continue
            forge = forge or self._open_forge()
            try:
                info = forge.get(number)
            except ForgeError as exc:
                self._say(f"build {state.slug}: cannot read pull request #{number}: {exc}")
                continue
            if info.state != "open":
                merged = info.state == "merged"
                archived_any = self._finish(state, number, merged, "github") or archived_any
        return archived_any

    # --- steering: comments and reviews since the cursor -----------------------------

    def _steer(self, state: BuildState) -> None:
        """Steer one build; push what that appended, so it stays when the job runs nothing."""
        self.result.show(state)  # what the outputs say if steering raises
        if self.steering.steer(state):
            self._push()

    # --- builds ---------------------------------------------------------------------------

    def _states(self) -> list[BuildState]:
        states = []
        for slug in self.log.slugs():
            try:
                states.append(load_state(self.log, self.cache, slug)[1])
            except AgentrunError as exc:
                self._say(f"build {slug} cannot be read: {exc}")
        return states

    def _issue_build(self, number: int) -> BuildState | None:
        ref = f"{self.event.repository}#{number}"
        found = [s for s in self._states() if s.issue == ref]
        return found[0] if found else None

    def _proposal_build(self, number: int) -> BuildState | None:
        found = [s for s in self._states() if proposal_number(s) == number]
        return found[0] if found else None

    def _create(self, issue: Mapping[str, Any], login: str) -> BuildState:
        """Create the issue's build here and on the remote; the remote's wins a race."""
        from agentrun.commands.build import check_runnable, slugify
        from agentrun.commands.doctor import auto_pick
        from agentrun.store.archive import archived
        from agentrun.store.sync import RefUpdate, Remote

        number = int(issue["number"])
        title = sanitize(str(issue.get("title") or ""), TITLE_LIMIT)
        body = sanitize(str(issue.get("body") or ""))
        goal = f"{title}\n\n{body}" if body else title
        if not goal:
            raise AgentrunError(f"issue #{number} has no title or text to build from")
        config = self.config
        if not config.roles:
            config, _ = auto_pick(config)
        check_runnable(config)
        branch, base_sha = self._base()
        stem = f"issue-{number}-{slugify(title)}"
        gone = archived(self.repo)
        slug = next(s for s in (stem, *(f"{stem}-{n}" for n in range(2, 1000))) if s not in gone)
        created = BuildCreated(
            goal=goal,
            base_ref=branch,
            base_sha=base_sha,
            branch=f"agentrun/{slug}",
            source="issue",
            issue=f"{self.event.repository}#{number}",
            requested_by=login or None,
            config=snapshot(config),
        )
        tip, _ = self.log.append(slug, [Draft(created, HumanActor(login=login or "github"))], None)
        # The remote must not have the log yet: of two jobs creating it at once, one wins
        # and the other continues with the winner's log.
        done = Remote(self.repo, self.remote).push([RefUpdate(build_ref(slug), tip.oid, None)])
        if done is None or done.returncode != 0:
            self.repo.references.delete(build_ref(slug))
            self._pull()
            state = self._issue_build(number)
            if state is None:
                why = (done.stderr.strip() if done else "") or "no answer"
                raise AgentrunError(f"could not create build {slug} on {self.remote}: {why}")
            return state
        return load_state(self.log, self.cache, slug)[1]

    def _run(self, slug: str) -> ActionResult:
        """Run the build when it has work; another job's live lease is not an error."""
        from agentrun.kernel.decide import Wait, decide
        from agentrun.runner.loop import Runner

        state = load_state(self.log, self.cache, slug)[1]
        self.result.show(state)  # what the outputs say if the run raises
        if isinstance(decide(state), Wait):
            self.result.show(state)
            return self._say(f"build {slug} is {self.result.state}; nothing to run")
        try:
            runner = Runner(
                self.repo, slug, self.observer, remote=self.remote, stop_at=self.stop_at
            )
            outcome = runner.run()
        except LeaseHeldError as exc:
            holder = self._holder(slug)
            self.result.show(load_state(self.log, self.cache, slug)[1], holder or "elsewhere")
            return self._say(f"not run here: {exc}" + (f" (held by {holder})" if holder else ""))
        self.result.show(outcome.state)
        why = f" (stopped: {outcome.waiting})" if outcome.waiting == "time-limit" else ""
        return self._say(f"build {slug} is {self.result.state}{why}")

    def _holder(self, slug: str, live: bool = False) -> str | None:
        """Who holds the build's lease on the remote now, if anyone can be seen to
        (``live``: only a holder whose lease has not expired)."""
        from agentrun.gitrepo import now_utc
        from agentrun.store.lease import lease_info, lease_ref
        from agentrun.store.sync import Remote, SyncError

        ref = lease_ref(slug)
        try:
            where = Remote(self.repo, self.remote)
            seen = where.ls(ref).get(ref)
            if seen is None:
                return None
            where.git(
                "fetch",
                "--no-tags",
                "--quiet",
                self.remote,
                f"+{ref}:{where.tracking}leases/{slug}",
            )
        except SyncError:
            return None
        info = lease_info(self.repo, seen)
        if live and info.expired(now_utc()):
            return None
        return f"{info.holder} on {info.host} (pid {info.pid})"

    # --- the remote, the base, the config, the forge -----------------------------------

    def _pull(self) -> None:
        from agentrun.store.sync import pull

        pull(self.repo, self.remote)

    def _push(self) -> None:
        """Push what steering appended, so a job that does not run the build keeps it."""
        from agentrun.store.sync import SyncError, sync

        for attempt in range(3):
            try:
                sync(self.repo, self.remote)
                return
            except SyncError:
                if attempt == 2:
                    raise

    def _default_branch(self) -> str:
        repository = self.event.payload.get("repository") or {}
        branch = repository.get("default_branch")
        if branch:
            return str(branch)
        if self.event.name == "schedule" and self.event.ref_name:
            return self.event.ref_name  # a scheduled run is on the default branch
        head = self.repo.references.get(f"refs/remotes/{self.remote}/HEAD")
        if head is not None and isinstance(head.target, str):
            return head.target.removeprefix(f"refs/remotes/{self.remote}/")
        return "main"

    def _base(self) -> tuple[str, str]:
        """The default branch and its commit, as fetched from the remote."""
        branch = self._default_branch()
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
        forge set to github: a build started here publishes there."""
        if self._config is None:
            branch, sha = self._base()
            source = f"{branch}:{self.config_path}"
            try:
                entry = self.repo[sha].peel(pygit2.Tree)[self.config_path]
            except KeyError:
                if self.config_path != CONFIG_FILE:
                    raise ConfigError(f"there is no {self.config_path} on {branch}") from None
                config = Config()
            else:
                blob = self.repo[entry.id]
                if not isinstance(blob, pygit2.Blob):
                    raise ConfigError(f"{source} is not a file")
                config = parse_config(blob.data.decode("utf-8", "replace"), source)
            data = config.model_dump(mode="json")
            data["forge"]["kind"] = FORGE
            if self.label:
                data["forge"]["label"] = self.label
            self._config = config_from_data(data, source)
            # Issue text, comments and reviews may quote a secret: scrubbed before written.
            secrets.remember_config(self._config, os.environ)
        return self._config

    def _open_forge(self) -> HostedForge:
        from agentrun.forge.base import open_forge

        found = open_forge(self.repo, FORGE, self.stop_at)
        if not isinstance(found, HostedForge):
            raise ForgeError(f"the {FORGE} forge cannot read issues and permissions")
        return found

    def _say(self, line: str) -> ActionResult:
        self.result.lines.append(line)
        return self.result


def _open(state: BuildState) -> bool:
    """Still steerable: running, or complete with its proposal open (it takes reviews)."""
    if state.status == "running":
        return True
    proposal = state.proposal
    return state.status == "complete" and proposal is not None and not proposal.closed
