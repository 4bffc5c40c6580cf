"""Running one agent session for a phase: brackets, prompt, turn, phase commit, facts.

The session is bracketed by ``session.started`` / ``session.ended`` (with the
transcript). The agent reports through its verbs; after the turn the runner reads
the log, and no report from the session means ``phase.failed`` (``no-terminal``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pygit2

from agentrun import isolation, procs, secrets
from agentrun.agent.drain import Drainer, drain
from agentrun.environment import key_variable, session_env
from agentrun.errors import GuardError, LeaseLostError, RuntimeSetupError
from agentrun.events import CodeReviewVerdict
from agentrun.gitrepo import common_dir
from agentrun.kernel import sessions as record
from agentrun.kernel.budget import FirstSession, remaining_budget, remaining_wall_seconds
from agentrun.kernel.decide import RunPhase, Wait
from agentrun.kernel.guard import before_first_session
from agentrun.kernel.runner import made
from agentrun.kernel.session_end import PRODUCERS
from agentrun.kernel.sessions import AgentWork, SessionJob, Turn, job_of, subject
from agentrun.kernel.state import BuildState, Report
from agentrun.prices import price_of, runtime_price, with_cost
from agentrun.runner.build import BuildHandle, Observer
from agentrun.runner.prompts import render_prompt
from agentrun.runner.slots import session_slot
from agentrun.runner.watch import AbortWatcher
from agentrun.runner.workspace import PhaseMark, Workspace
from agentrun.runtimes.base import (
    UNAVAILABLE,
    SessionControl,
    SessionSpec,
    TurnResult,
    make_runtime,
)
from agentrun.runtimes.mcp.servers import secret_values, user_servers
from agentrun.runtimes.mcp_config import MCP_KINDS
from agentrun.store.lease import Heartbeat
from agentrun.store.notes import add_note

WAIT_SECONDS = 1.0  # a first session waiting for other tasks' sessions looks again


def rung_of(work: AgentWork) -> int | None:
    """The rung of its role's ladder the work starts on (None: no ladder)."""
    return work.rung if isinstance(work, RunPhase) else None


def session_budget(state: BuildState) -> float:
    """A session's wall clock: its own budget, and never past the build's work time."""
    left = remaining_wall_seconds(state)
    own = state.config.policy.session_budget_seconds
    return own if left is None else max(min(own, left), 1.0)


def session_tokens(state: BuildState, model: str | None) -> int | None:
    """The tokens a session may spend before a token or dollar budget runs out.

    Dollars become tokens at the model's dearer rate (input or output), so the cap holds
    whatever the mix; a model with no known price is held to the token budget only.
    """
    tokens, dollars = remaining_budget(state)
    price = price_of(model, state.config.prices)
    if dollars is not None and price is not None and max(price.input, price.output) > 0:
        affordable = int(dollars / max(price.input, price.output) * 1_000_000)
        tokens = affordable if tokens is None else min(tokens, affordable)
    return tokens


class SessionRunner:
    def __init__(
        self,
        repo: pygit2.Repository,
        build: BuildHandle,
        workspace: Workspace,
        beat: Heartbeat,
        observer: Observer,
        interrupted_by: Callable[[], str] = lambda: "Ctrl-C",
        remote_abort: threading.Event | None = None,
    ) -> None:
        """``interrupted_by`` names what a KeyboardInterrupt was (Ctrl-C, a time limit);
        ``remote_abort`` is set when an abort request arrives through the remote."""
        self.repo = repo
        self.build = build
        self.workspace = workspace
        self.beat = beat
        self.observer = observer
        self.interrupted_by = interrupted_by
        self.remote_abort = remote_abort

    def run(self, work: AgentWork) -> None:
        state = self.build.state
        job = job_of(work, state.impl_round)
        names = state.config.runtimes_for(job.role, rung_of(work) or 0)
        if not names:
            self.build.append(record.no_runtime(job), fact=False)
            return
        if not self._fits(job, work, names[0]):
            return
        with session_slot(self.repo, state.slug, state.config.policy, self.beat.check):
            self._run(job, work, names)

    def _fits(self, job: SessionJob, work: AgentWork, name: str) -> bool:
        """Whether the session may start: a role's first session has no average to go by,
        so the kernel is asked again with what its prompt and one response need (False:
        it parked the build on the budget question, or the session waits for others)."""
        state = self.build.state
        config = state.config.runtime(name)
        if config is None:
            return True  # the session records that the runtime is not configured
        plan = self.build.log.text(self.build.tip, state.plan)
        prompt = render_prompt(
            self.repo, state, job.phase, job.round, job.feedback, plan, self.observer.warning
        )
        first = FirstSession(len(prompt.encode()), config.output_cap, config.model)
        verdict = before_first_session(state, work, first)
        if verdict is None:
            return True
        if isinstance(verdict, Wait):
            # Tasks running beside it hold what it needs: it starts once they have ended.
            self.beat.check()
            time.sleep(WAIT_SECONDS)
            return False
        self.build.append(made(state, verdict, ""), fact=False)
        return False

    def _run(self, job: SessionJob, work: AgentWork, names: tuple[str, ...]) -> None:
        if isinstance(work, RunPhase) and work.merge:
            merged = self._merge(job, work.merge)
            if merged is None:
                return
            job = merged
        else:
            self.build.append([record.begun(job)], fact=False)
        rung = rung_of(work)
        for index, name in enumerate(names):
            substitution = names[0] if index else None
            on = None if rung is None else rung + index  # an unreachable rung falls to the next
            retry_elsewhere = self._session(
                job, name, substitution, last=index == len(names) - 1, rung=on
            )
            if not retry_elsewhere:
                return

    def _merge(self, job: SessionJob, base: str) -> SessionJob | None:
        """Reconcile: merge the moved base; a clean merge needs no agent (None: done)."""
        state = self.build.state
        try:
            conflicts = self.workspace.start_merge(base)
        except RuntimeSetupError as exc:
            self.build.append(record.refused(job, str(exc)))
            return None
        if conflicts:
            self.build.append([record.begun(job)], fact=False)
            listed = "\n".join(f"  {path}" for path in conflicts)
            note = f"Merging the base {base[:10]} left conflicts in:\n{listed}"
            return replace(job, feedback=(*job.feedback, note))
        mark = PhaseMark(state.slug, job.phase, job.round, None, f"merge {base[:10]}", state.task)
        try:
            head = self.workspace.commit_phase(state.head, mark, config=state.config, merge=base)
        except GuardError as exc:
            self.build.append(record.refused(job, str(exc)))
            return None
        self.build.append(record.merged(job, base, head), fact=False)
        return None

    def _session(
        self, job: SessionJob, name: str, substitution: str | None, last: bool, rung: int | None
    ) -> bool:
        """One session on runtime ``name`` (on ``rung`` of the role's ladder); True when an
        alternate (or the next rung) should take over."""
        state = self.build.state
        session = f"s-{uuid.uuid4().hex[:8]}"
        config = state.config.runtime(name)
        model = config.model if config else None
        self.build.append([record.session_started(job, session, name, model, substitution, rung)])
        if config is None:
            error = f"role {job.role!r} is routed to runtime {name!r}, which is not configured"
            self._fail(job, session, TurnResult(ok=False, error=error, permanent=True), "")
            return False
        # The credentials its `env` table gives the runtime are scrubbed like secrets from
        # here on (the build's config snapshot, written before, keeps what it needs).
        secrets.remember(secrets.values_of((key_variable(config),), config.env))
        # So are the values of the environment the role's MCP servers get.
        servers = user_servers(state.config, job.role, os.environ)
        secrets.remember(secret_values(servers))
        plan = self.build.log.text(self.build.tip, state.plan)
        spec = SessionSpec(
            session=session,
            build=state.slug,
            phase=job.phase,
            round=job.round,
            attempt=job.attempt,
            role=job.role,
            prompt=render_prompt(
                self.repo,
                state,
                job.phase,
                job.round,
                job.feedback,
                plan,
                self.observer.warning,
                mcp=config.kind in MCP_KINDS,
            ),
            workdir=self.workspace.path,
            env=session_env(
                state.slug,
                job.phase,
                job.round,
                session,
                git_dir=common_dir(self.repo),
                secret=state.config.secrets.env,
                keep=(key_variable(config),),
                kind=config.kind,
                pass_env=config.pass_env,
                task=state.task,
            ),
            budget_seconds=session_budget(state),
            repo_root=Path(self.repo.workdir or self.workspace.path),
            resume_from=self._resume_from(job, name),
            max_tokens=session_tokens(state, config.model),
            sandbox=isolation.for_worktree(
                self.repo, state.config, state.slug, self.workspace.path
            ),
            git_dir=common_dir(self.repo),
            task=state.task,
            mcp_servers=servers,
        )
        control = SessionControl(on_activity=self.observer.activity, on_process=self._record_agent)
        watcher = AbortWatcher(
            self.repo, state.slug, control.cancel, self.remote_abort, seen=self.build.judged()
        )
        # The agent's verbs only queue: their reports are appended here, scrubbed, while
        # the agent runs (an escalation takes effect at once) and after the turn.
        drainer = Drainer(self.repo.path, self.workspace.path, session, self.beat.interval)
        self.build.save()  # the agent's verbs read the state: from the cache, at once
        try:
            runtime = make_runtime(name, config)
            handle, turn = runtime.start(spec, control)
            transcript = runtime.end(handle)
        except RuntimeSetupError as exc:
            watcher.stop()
            drainer.stop()
            self._fail(job, session, TurnResult(ok=False, error=str(exc), permanent=True), "")
            return False
        except KeyboardInterrupt:
            control.cancel.set()
            watcher.stop()
            with contextlib.suppress(Exception):
                drainer.stop()
            self._end_agent()
            why = self.interrupted_by()
            self.build.append(record.interrupted(job, session, why))
            raise
        watcher.stop()
        self._record_agent(None)
        queued = drainer.stop() + drain(self.repo, self.workspace.path, session)
        if queued:
            transcript = replace(transcript, text=transcript.text + "\n".join(queued) + "\n")
        price = runtime_price(config, state.config.prices)
        turn = replace(turn, usage=with_cost(turn.usage, price))
        state = self.build.refresh()
        open_session = state.session if state.session and state.session.session == session else None
        report = open_session.report if open_session else None
        artifact = record.transcript_name(session)
        ended = Turn(
            session,
            artifact,
            {artifact: transcript.text.encode()},
            turn.usage,
            transcript.runtime_session_id,
        )
        if control.cancel.is_set() or turn.cause == "aborted":
            self.build.append(record.aborted(ended))
            return False
        if report is None:
            if turn.ok or not turn.error:
                turn = TurnResult(ok=False, usage=turn.usage, error=record.NO_TERMINAL)
            if turn.cause == UNAVAILABLE and not last:
                self._fail(job, session, turn, transcript.text, count=False)
                return True  # the runtime is not available here: an alternate takes over
            self._fail(job, session, turn, transcript.text)
            return False
        # A report stands even if the program then exited badly or ran out its budget.
        self._succeed(job, ended, report)
        return False

    def _succeed(self, job: SessionJob, ended: Turn, report: Report) -> None:
        state = self.build.state
        if not record.commits(report):
            self.build.append(record.succeeded(job, ended, report, None))
            return
        mark = PhaseMark(
            state.slug, job.phase, job.round, ended.session, subject(report), state.task
        )
        work = job.work
        merge = work.merge if isinstance(work, RunPhase) else None
        try:
            head = self.workspace.commit_phase(state.head, mark, config=state.config, merge=merge)
        except GuardError as exc:
            refused = TurnResult(ok=False, error=str(exc), usage=ended.usage, cause="guard")
            self._fail(job, ended.session, refused, "", dict(ended.artifacts))
            return
        implement = isinstance(work, RunPhase) and work.phase == "implement" and not merge
        paths = self.workspace.changed_paths(state.base_sha, head) if implement else ()
        self.build.append(record.succeeded(job, ended, report, head, paths))
        add_note(
            self.repo,
            head,
            {
                "build": state.slug,
                "phase": job.phase,
                "round": job.round,
                "session": ended.session,
                "report": report.type,
            },
        )
        if isinstance(report, CodeReviewVerdict) and report.findings:
            from agentrun.runner.memory import findings_recurred

            findings_recurred(self.build)

    def _fail(
        self,
        job: SessionJob,
        session: str,
        turn: TurnResult,
        transcript: str,
        arts: dict[str, bytes] | None = None,
        count: bool = True,
    ) -> None:
        artifact = record.transcript_name(session)
        ended = Turn(session, artifact, arts or {artifact: transcript.encode()}, turn.usage)
        max_attempts = self.build.state.config.policy.max_phase_attempts
        self.build.append(
            record.session_failed(
                job, ended, turn.error, turn.permanent, turn.cause, max_attempts, count
            )
        )

    def _resume_from(self, job: SessionJob, runtime: str) -> str | None:
        """A producer continues its last session when that session is still here."""
        last = self.build.state.resumable.get(job.role)
        if last is None or job.phase not in PRODUCERS or last.runtime != runtime:
            return None
        return last.id if last.host == procs.me().host else None

    def _record_agent(self, pid: int | None) -> None:
        self._agent_pid = pid
        # A lost lease is noticed by the loop's check; the session is not cut short here.
        with contextlib.suppress(LeaseLostError):
            self.beat.renew(agent_pgid=pid)

    def _end_agent(self) -> None:
        pid = getattr(self, "_agent_pid", None)
        if pid:
            procs.end_tree(pid)
