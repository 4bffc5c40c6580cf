"""The runner loop: claim the lease, read the log, decide, execute, append, repeat.

Killed at any point, a new runner re-reads the log and re-decides: what a dead runner
left open is closed first, and a started-but-unfinished phase re-runs from its start.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import assert_never

import pygit2

from agentrun import isolation, procs, secrets
from agentrun.errors import (
    AgentrunError,
    ConcurrentUpdateError,
    ForgeError,
    RuntimeSetupError,
)
from agentrun.kernel import approval
from agentrun.kernel import runner as kernel_runner
from agentrun.kernel.decide import (
    Acknowledge,
    AwaitChecks,
    Choose,
    Decision,
    Integrate,
    Publish,
    RaiseEscalation,
    Recorded,
    RunAgentVerify,
    RunCheck,
    RunFinalizeStep,
    RunPhase,
    RunTasks,
    Wait,
    decide,
    decide_task,
)
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.kernel.tasks import branch_of
from agentrun.runner import gate, setup
from agentrun.runner.basecheck import base_moved, base_unpushed
from agentrun.runner.build import BuildHandle, LogTamperedError, Observer, Silent
from agentrun.runner.candidates import choose
from agentrun.runner.checks import run_check, run_finalize_step
from agentrun.runner.deadline import TIME_LIMIT, Deadline
from agentrun.runner.publish import Publisher
from agentrun.runner.remote import RemoteRun, configured_remote
from agentrun.runner.sessions import SessionRunner
from agentrun.runner.tasks import TaskPool, integrate
from agentrun.runner.user_refs import report_moved, user_refs
from agentrun.runner.workspace import Workspace
from agentrun.store.lease import Heartbeat, Lease, acquire, lease_ttl, task_key

BASE_UNPUSHED = "base-unpushed"  # a push's build whose base commit the remote lacks


@dataclass(frozen=True)
class Outcome:
    state: BuildState
    waiting: str
    said: str = ""  # one line saying why, where the wait is not the state's own


class Runner:
    """Runs one build until it completes or parks (``wait``)."""

    def __init__(
        self,
        repo: pygit2.Repository,
        slug: str,
        observer: Observer | None = None,
        remote: str | None = None,
        stop_at: float | None = None,
        task: str | None = None,
        fan_out: bool = False,
    ) -> None:
        """``remote``: claim and sync the build there (default: ``[sync] remote``).
        ``stop_at``: a ``time.monotonic()`` deadline; reaching it ends the run as Ctrl-C
        would, and ``run`` returns an Outcome waiting on ``"time-limit"``.
        ``task``: run only that task of the build's graph, under the task's own lease.
        ``fan_out``: stop where tasks are ready to run (waiting on ``"tasks"``), for CI
        jobs to run them elsewhere, instead of running them here."""
        self.repo = repo
        self.slug = slug
        self.task = task
        self.fan_out = fan_out
        self.instance = f"r-{uuid.uuid4().hex[:8]}"
        self.observer = observer or Silent()
        self.remote = remote if remote is not None else configured_remote(repo, slug)
        self.stop_at = stop_at
        self._remote: RemoteRun | None = None
        self._deadline = Deadline(None)
        self._pool = TaskPool(repo, slug, self.remote)
        self.ready: tuple[str, ...] = ()  # with fan_out: the tasks left for other jobs
        self._looked: set[str] = set()  # heads whose CI this run looked at (once each)

    def run(self, acknowledge_only: bool = False) -> Outcome:
        """Execute decisions until ``wait``; with ``acknowledge_only``, only controls."""
        unpushed = self._base_unpushed()
        if unpushed is not None:
            return unpushed
        ttl = lease_ttl()
        beat_every = ttl / 4
        key = self.slug if self.task is None else task_key(self.slug, self.task)
        lease = acquire(self.repo, key, holder=self.instance, ttl=ttl)
        try:
            if self.remote:
                self._remote = RemoteRun(
                    self.repo, self.remote, self.slug, self.instance, ttl, lease_key=key
                )
                self._remote.claim(beat_every)
            dead = lease.taken_from
            if dead is not None and dead.agent_pgid and dead.holder_dead_here():
                # Whatever the dead runner's agent left running would race the new session.
                procs.end_group(dead.agent_pgid)
            with Heartbeat(lease, beat_every) as beat, Deadline(self.stop_at) as deadline:
                self._deadline = deadline
                return self._run_synced(lease, beat, acknowledge_only)
        finally:
            lease.release()

    def _base_unpushed(self) -> Outcome | None:
        """A build a push started waits, before anything is claimed or appended, until its
        base commit is on the remote: the push may have been refused after the hook sent
        the log (DESIGN §9). Asked once, before its first runner attaches."""
        from agentrun.store.cache import StateCache, load_state
        from agentrun.store.log import EventLog

        if self.task is not None:
            return None
        try:
            state = load_state(EventLog(self.repo), StateCache(self.repo), self.slug)[1]
        except AgentrunError:
            return None  # the loop says what is wrong with it
        if state.source != "hook" or state.runner is not None:
            return None
        why = base_unpushed(self.repo, state, self.remote)
        return None if why is None else Outcome(state, BASE_UNPUSHED, why)

    def _run_synced(self, lease: Lease, beat: Heartbeat, acknowledge_only: bool) -> Outcome:
        """The loop, then a last push and the remote lease's release, however it ended."""
        remote = self._remote
        try:
            try:
                outcome = self._loop(lease, beat, acknowledge_only)
            except BaseException:
                self._pool.interrupt()  # the task processes record where they were cut
                self._pool.wait()
                raise
        except LogTamperedError:
            # What is in the log now is not ours to publish: release, push nothing.
            if remote is not None:
                with contextlib.suppress(AgentrunError):
                    remote.close(push=False)
            raise
        except KeyboardInterrupt:
            if not self._deadline.fired:
                self._close_quietly()
                raise
            outcome = self._stopped()
        except BaseException:
            self._close_quietly()
            raise
        if remote is not None:
            remote.close()
        return outcome

    def _close_quietly(self) -> None:
        """On the way out with an error: push what can be pushed, release, keep the error."""
        if self._remote is not None:
            with contextlib.suppress(AgentrunError):
                self._remote.close()

    def _stopped(self) -> Outcome:
        return Outcome(self._handle().state, TIME_LIMIT)

    def _handle(self) -> BuildHandle:
        return BuildHandle(
            self.repo, self.slug, self.observer, writer=self.instance, task=self.task
        )

    def _decide(self, build: BuildHandle) -> Decision:
        if self.task is None:
            return decide(build.full)
        return decide_task(build.full, self.task)

    def _loop(self, lease: Lease, beat: Heartbeat, acknowledge_only: bool) -> Outcome:
        build = self._handle()
        try:
            return self._steps(build, lease, beat, acknowledge_only)
        finally:
            build.save()  # what `status` and the next runner read first

    def _steps(
        self, build: BuildHandle, lease: Lease, beat: Heartbeat, acknowledge_only: bool
    ) -> Outcome:
        state = build.state
        secrets.remember_config(state.config, os.environ)
        isolation.start(state.config)  # the level CI asks for is possible, or stop here
        if self.task is None:
            workspace = Workspace(self.repo, self.slug, state.branch)
        else:
            branch = branch_of(state.branch, self.task)
            workspace = Workspace(self.repo, self.slug, branch, name=branch.rpartition("/")[2])
        # Only the build's runner speaks on the forge; a task's shows through it.
        publisher = Publisher(self.repo, build, self.stop_at, quiet=self.task is not None)
        sessions = SessionRunner(
            self.repo,
            build,
            workspace,
            beat,
            self.observer,
            self._interrupted_by,
            self._remote.aborted if self._remote is not None else None,
        )
        if self.task is not None:
            first = self._decide(build)
            if isinstance(first, Wait) and first.reason != "in-flight":
                return Outcome(state, first.reason)  # nothing to do: nothing is appended
        # A run that only looks at a waiting build's CI, and finds nothing new, leaves the
        # log as it was: the runner attaches before its first other work.
        attach = not acknowledge_only
        if attach and not isinstance(self._decide(build), AwaitChecks):
            self._attach(build)
            attach = False
        while True:
            beat.check()
            state = build.refresh()
            decision = self._decide(build)
            if isinstance(decision, AwaitChecks) and decision.sha in self._looked:
                decision = Wait("checks")  # the next run (a sweep, a CI trigger) looks again
            if isinstance(decision, Wait):
                publisher.sync_status()
                return Outcome(state, decision.reason)
            if isinstance(decision, RunTasks) and self.fan_out:
                self.ready = decision.ready
                publisher.sync_status()
                return Outcome(state, "tasks")
            if acknowledge_only and not isinstance(decision, Acknowledge):
                return Outcome(state, "not-acknowledged")
            if self._deadline.reached:
                return Outcome(state, TIME_LIMIT)
            if attach and not isinstance(decision, AwaitChecks):
                self._attach(build)
                attach = False
                continue  # decided again on the attached state
            publisher.sync_status()  # show what is about to run (a no-op when unchanged)
            try:
                with self._deadline.phase():
                    self._execute(decision, build, workspace, sessions, publisher)
            except ConcurrentUpdateError:
                continue  # someone appended between our read and our write: re-decide
            publisher.sync_status()
            if self._remote is not None:
                build.refresh()  # nothing is pushed that this runner did not check
                self._remote.boundary(build)

    def _attach(self, build: BuildHandle) -> None:
        me = procs.me()
        build.append(kernel_runner.attached(build.state, self.instance, me.host, me.pid))

    def _execute(
        self,
        decision: Decision,
        build: BuildHandle,
        workspace: Workspace,
        sessions: SessionRunner,
        publisher: Publisher,
    ) -> None:
        if isinstance(decision, Recorded):
            if isinstance(decision, Acknowledge):
                self._pool.wait()  # the task processes stop at their next boundary first
            if isinstance(decision, RaiseEscalation) and decision.cause == approval.CAUSE:
                # The question quotes the plan: an artifact, which the kernel does not read.
                plan = build.state.plan
                text = build.log.text(build.tip, plan)
                decision = approval.quoting(decision, self.slug, plan, text)
            made = kernel_runner.made(build.state, decision, self.instance)
            # An acknowledgement is a fact; the rest were decided from this very state.
            build.append(made, fact=isinstance(decision, Acknowledge))
        elif isinstance(decision, RunPhase | RunAgentVerify):
            self._with_workspace(build, workspace, decision, lambda: sessions.run(decision))
        elif isinstance(decision, RunCheck):
            self._with_workspace(
                build, workspace, decision, lambda: run_check(build, workspace, decision)
            )
        elif isinstance(decision, RunFinalizeStep):
            if decision.command is None and not decision.give_up:
                self._with_workspace(build, workspace, decision, lambda: sessions.run(decision))
            else:
                self._with_workspace(
                    build,
                    workspace,
                    decision,
                    lambda: run_finalize_step(build, workspace, decision),
                )
        elif isinstance(decision, Publish):
            if decision.operation == "mark-ready" and self._base_moved(build):
                return  # reconcile first, then verify again (DESIGN §5)
            try:
                publisher.publish(decision.operation)
            except ForgeError as exc:
                build.append([kernel_runner.setup_failed(f"forge: {exc}")])
        elif isinstance(decision, AwaitChecks):
            self._looked.add(decision.sha)
            try:
                gate.look(build, publisher.forge, decision)
            except ForgeError as exc:
                # Nothing is recorded: the build waits, and the next run looks again.
                self.observer.warning(f"build {self.slug}: cannot read the CI checks: {exc}")
        elif isinstance(decision, RunTasks):
            build.save()  # each task's runner starts from the state cache
            self._pool.run(decision, self.stop_at)
            if self._pool.failures:
                # A task process that cannot run (a bug, a broken worktree) is said once
                # per try; the build fails after max_phase_attempts of them.
                said = "; ".join(self._pool.failures)
                self._pool.failures.clear()
                build.append([kernel_runner.setup_failed(said)])
        elif isinstance(decision, Integrate):
            self._with_workspace(
                build, workspace, decision, lambda: integrate(build, workspace, decision)
            )
        elif isinstance(decision, Choose):
            choose(build, decision)
        elif isinstance(decision, Wait):
            pass  # ``_loop`` returns on a wait before it executes anything
        else:
            assert_never(decision)

    def _interrupted_by(self) -> str:
        return "the time limit" if self._deadline.fired else "Ctrl-C"

    def _base_moved(self, build: BuildHandle) -> bool:
        """Record ``base.moved`` when the base moved and no longer merges cleanly."""
        state = build.state
        moved = base_moved(self.repo, state, self.remote)
        if moved is None:
            return False
        build.append([Draft(moved)], fact=False)
        return True

    def _with_workspace(
        self,
        build: BuildHandle,
        workspace: Workspace,
        decision: RunPhase | RunAgentVerify | RunCheck | RunFinalizeStep | Integrate,
        work: Callable[[], None],
    ) -> None:
        try:
            workspace.prepare(build.state.head)
        except RuntimeSetupError as exc:
            build.append([kernel_runner.setup_failed(str(exc))])
            return
        before = user_refs(self.repo)
        if not setup.ensure(build, workspace):
            report_moved(self.repo, build, self.observer, before, setup.PHASE)
            return  # it failed: the build parks with its output as the question
        work()
        report_moved(self.repo, build, self.observer, before, _phase_of(decision))


def _phase_of(
    decision: RunPhase | RunAgentVerify | RunCheck | RunFinalizeStep | Integrate,
) -> str:
    if isinstance(decision, Integrate):
        return f"integrate:{decision.task}"
    if isinstance(decision, RunPhase):
        return f"{decision.phase}@{decision.round}"
    if isinstance(decision, RunFinalizeStep):
        return f"finalize:{decision.step}"
    return f"verify:{decision.step}@{decision.round}"
