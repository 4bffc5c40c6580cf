"""Agent verbs: which verb fits which phase and session, and the event each one makes.

The verb's command (``git agentrun agent <verb>``), the outbox's drain and the runtimes
that live inside the runner all check and build a report here; they only read the log
and append what this returns (DESIGN §6). The rules themselves (which verb fits which
phase, who may speak, what a plain verb needs) live in :mod:`agentrun.kernel.rules`,
free of the models, so that the verb's quick path checks with the same code.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrun import events as ev
from agentrun.errors import VerbError
from agentrun.kernel import rules, tasks
from agentrun.kernel.draft import Draft
from agentrun.kernel.graph import GraphError
from agentrun.kernel.graph import parse as parse_graph
from agentrun.kernel.guard import next_escalation_id
from agentrun.kernel.rules import (
    ANY_PHASE_VERBS,
    PHASE_VERBS,
    AgentEnv,
    Speaker,
    VerbReport,
    plain_said,
)
from agentrun.kernel.state import BuildState

__all__ = [
    "ANY_PHASE_VERBS",
    "PHASE_VERBS",
    "AgentEnv",
    "VerbReport",
    "check_fits",
    "check_session",
    "scoped",
    "speaker",
    "verb_draft",
]


def speaker(state: BuildState) -> Speaker | None:
    """What the checks need of the state's open session."""
    session = state.session
    if session is None:
        return None
    reported = None if session.report is None else session.report.type
    return Speaker(session.session, session.phase, session.round, reported)


def scoped(state: BuildState, env: AgentEnv) -> BuildState:
    """The state the agent works in: its task's view, or the build's."""
    if env.task is None:
        return state
    if not tasks.has_part(state, env.task):
        raise VerbError(
            f"build {env.build} has no task {env.task!r} (AGENTRUN_TASK); nothing recorded"
        )
    return tasks.view(state, env.task)


def check_fits(state: BuildState, env: AgentEnv, verb: str) -> None:
    rules.check_fits(speaker(scoped(state, env)), env, verb)


def check_session(state: BuildState, env: AgentEnv) -> None:
    """``env`` speaks for the open session of its build, in its phase and round."""
    rules.check_speaker(speaker(state), env)


def verb_draft(
    state: BuildState, env: AgentEnv, rep: VerbReport, scrub: Callable[[str], str]
) -> tuple[Draft, str]:
    """The event the report makes, and a line confirming it.

    ``scrub`` cleans the plan's summary before it is cut short (the store scrubs the
    whole event, but a secret cut in half would no longer be recognised).
    """
    state = scoped(state, env)
    role = state.session.role if state.session else env.family
    actor = ev.AgentActor(role=role, session=env.session)
    verb = rep.verb
    if verb == "plan":
        if not rep.text.strip():
            raise VerbError("the plan is empty: write the plan to a file and pass its path")
        name = f"plan-r{env.round}.md"
        first = scrub(rep.text.strip().splitlines()[0])[:100]
        try:
            graph, refused = parse_graph(rep.text), ""
        except GraphError as exc:
            graph, refused = (), str(exc)
        payload: object = ev.PlanSubmitted(
            session=env.session, plan=name, summary_text=first, tasks=graph, tasks_error=refused
        )
        said = f"plan submitted ({name})"
        if graph:
            said += f" with a graph of {len(graph)} task(s)"
        if refused:
            said += f"; its task graph is refused and the plan goes back to you: {refused}"
        return Draft(payload, actor, {name: rep.text.encode()}, env.task), said
    if verb in ("approve", "revise"):
        said = plain_said(rep)
        model = ev.PlanReviewVerdict if env.family == "plan-review" else ev.CodeReviewVerdict
        payload = model(
            session=env.session,
            round=env.round,
            verdict="approve" if verb == "approve" else "revise",
            findings=rep.findings,
        )
        return Draft(payload, actor, task=env.task), said
    if verb == "done":
        done = ev.AgentDone(session=env.session, summary_text=rep.text)
        return Draft(done, actor, task=env.task), plain_said(rep)
    if verb == "select":
        offered = len(state.offered)
        number = int(rep.text) if rep.text.strip().isdigit() else 0
        if not 1 <= number <= offered:
            raise VerbError(
                f"candidate {rep.text.strip() or '?'} was not offered: answer a number from 1 "
                f"to {offered}; nothing recorded"
            )
        chose = ev.CandidateSelected(session=env.session, number=number)
        return Draft(chose, actor, task=env.task), f"candidate {number} selected"
    if verb in ("pass", "fail"):
        said = plain_said(rep)
        payload = ev.VerifyVerdict(
            session=env.session, verdict="pass" if verb == "pass" else "fail", reason=rep.text
        )
        return Draft(payload, actor, task=env.task), said
    if not rep.text.strip():
        raise VerbError("`escalate` needs the question to ask")
    esc_id = next_escalation_id(state)
    payload = ev.EscalationRaised(
        id=esc_id,
        phase=env.phase,
        round=env.round,
        source="agent",
        cause="agent",
        question=rep.text.strip(),
        session=env.session,
    )
    return Draft(
        payload, actor, task=env.task
    ), f"escalation {esc_id} raised; the build parks until it is answered"
