"""What a build shows on a forge: status comments and proposal descriptions (DESIGN §8).

Pure text from the reduced state; ``publish`` decides where and when it is posted.
The local forge gets ``render_status``/``render_body``; a hosted forge gets
``render_hosted_status`` (the issue's status comment: checklist, round, questions with
the ``/agentrun answer`` syntax, usage, links) and ``render_hosted_body``.
"""

from __future__ import annotations

from agentrun.kernel import approval
from agentrun.kernel.ladder import rung_lines
from agentrun.kernel.state import BuildState, Escalation
from agentrun.kernel.tasks import task_phase, task_state_name

CHECK = {"pass": "passed", "fail": "failed", "skipped": "skipped"}
STATUS_MARK = "<!-- agentrun:status {slug} -->"
QUESTION_MARK = "<!-- agentrun:question {slug} {id} -->"
PLAN_LINES = 15
TEXT_LIMIT = 3000
# The pipeline's stages as the status checklist shows them, in order.
STAGES = (
    ("plan", "plan"),
    ("plan-review", "plan review"),
    ("plan-approval", "plan approval"),
    ("implement", "implement"),
    ("code-review", "code review"),
    ("reconcile", "merge the moved base"),
    ("verify", "verify"),
    ("finalize", "finalize"),
)
ORDER = [stage for stage, _ in STAGES] + ["done"]


def render_status(state: BuildState) -> str:
    """The status shown on a proposal: where the build is and what was checked."""
    lines = [
        f"**agentrun build `{state.slug}`** — {state.state_name}, at {state.phase_label}",
        "",
        f"Goal: {state.goal}",
        "",
        f"Base: `{state.base_ref}` ({state.base_sha[:10]}) · head: `{state.head[:10]}` · "
        f"implement rounds: {state.impl_round if state.implemented else 0}",
    ]
    if state.tasks:
        lines += ["", "**Tasks**", *_tasks_table(state)]
    lines += _candidates_table(state, "**Candidates**")
    lines += _verify_table(state)
    for esc in state.open_escalations:
        lines += [
            "",
            f"**Question {esc.id}** ({_asked_in(esc)}): {esc.question}",
            local_reply(state.slug, esc),
        ]
    if state.observations:
        lines += ["", "Follow-ups:"] + [f"- {o}" for o in state.observations]
    lines += ["", f"Sessions: {state.sessions} · {state.usage.describe()}"]
    if state.phase_usage:
        lines += ["", "| phase | usage |", "| --- | --- |"]
        lines += [f"| {phase} | {used.describe()} |" for phase, used in state.phase_usage.items()]
    lines += _rungs_table(state)
    if state.unpriced_models:
        lines.append(f"\nUnknown price (not in the total): {', '.join(state.unpriced_models)}")
    return "\n".join(lines) + "\n"


def _rungs_table(state: BuildState) -> list[str]:
    """What each rung of a model ladder spent (none without a ladder)."""
    rows = rung_lines(state)
    return ["", "| role | rung | usage |", "| --- | --- | --- |", *rows] if rows else []


def render_body(state: BuildState) -> str:
    return f"{state.goal}\n\n---\n\n{render_status(state)}"


def render_hosted_status(state: BuildState, run_url: str | None = None) -> str:
    """The status comment on a hosted forge: checklist, round, questions, usage, links."""
    lines = [
        STATUS_MARK.format(slug=state.slug),
        f"**agentrun** · build `{state.slug}` · **{state.state_name}** at {state.phase_label}",
        "",
        f"Goal: {clip(state.goal.strip().splitlines()[0] if state.goal.strip() else '')}",
        "",
        *_checklist(state),
    ]
    lines += _outcome(state)
    if state.feedback and state.status == "running" and state.stage != "done":
        lines += ["", f"Round {state.current_round} works on:"]
        lines += [f"- {clip(' '.join(f.split()), 300)}" for f in state.feedback[:5]]
    for esc in state.open_escalations:
        # The plan's question holds the whole plan, posted as its own comment.
        asked = esc.question.split("\n", 1)[0] if esc.cause == approval.CAUSE else esc.question
        lines += [
            "",
            f"**Question {esc.id}** ({_asked_in(esc)}): {clip(asked)}",
            hosted_reply(esc),
        ]
    if state.tasks:
        lines += ["", "**Tasks**", *_tasks_table(state)]
    lines += _candidates_table(state, "**Candidates**")
    lines += _verify_table(state)
    lines += _rungs_table(state)
    if state.observations:
        lines += ["", "Follow-ups:"] + [f"- {clip(o, 300)}" for o in state.observations[-10:]]
    links = [f"log: `git agentrun log {state.slug}`"]
    if state.proposal is not None:
        links.insert(0, f"pull request: {state.proposal.url}")
    if run_url:
        links.append(f"[this run]({run_url})")
    lines += [
        "",
        f"Implement round {state.impl_round} · sessions: {state.sessions} · "
        f"{state.usage.describe()}",
        " · ".join(links),
    ]
    return "\n".join(lines) + "\n"


def render_hosted_body(state: BuildState, plan: str | None, issue: int | None) -> str:
    """The proposal's description: goal, plan summary, verification, where to talk."""
    lines = [clip(state.goal.strip(), TEXT_LIMIT)]
    if plan:
        lines += ["", "### Plan", "", plan]
    if state.tasks:
        lines += ["", "### Tasks", *_tasks_table(state)]
    lines += _candidates_table(state, "### Candidates")
    table = _verify_table(state)
    if table:
        lines += ["", "### Verification", *table]
    lines += _outcome(state)
    where = f"the status comment on #{issue}" if issue is not None else "the status comment below"
    lines += ["", f"agentrun build `{state.slug}` · **{state.state_name}** · progress in {where}"]
    if issue is not None and state.config.forge.closes_issue:
        lines += ["", f"Closes #{issue}"]
    return "\n".join(lines) + "\n"


def state_label(state: BuildState) -> str | None:
    """The one state label a build's issue and proposal carry (none once aborted)."""
    labels = state.config.forge.labels
    return {
        "running": labels.running,
        "waiting": labels.running,  # for the forge's CI: still in progress
        "parked": labels.parked,
        "paused": labels.parked,
        "complete": labels.done,
        "failed": labels.failed,
    }.get(state.state_name)


def _verify_table(state: BuildState) -> list[str]:
    if not state.config.verify:
        return []
    lines = ["", "| verify step | result |", "| --- | --- |"]
    for step in state.config.verify:
        result = state.verify_results.get(step.name)
        lines.append(f"| {step.name} | {CHECK[result.outcome] if result else 'pending'} |")
    return lines


def hosted_reply(esc: Escalation) -> str:
    """How a forge comment replies to ``esc``."""
    if esc.cause == approval.CAUSE:
        return (
            "Reply with a comment: `/agentrun approve` to go on, or "
            f"`/agentrun answer {esc.id} <what to change>` to send the plan back"
        )
    return f"Reply with a comment: `/agentrun answer {esc.id} <your answer>`"


def local_reply(slug: str, esc: Escalation) -> str:
    """How a person here replies to ``esc``."""
    if esc.cause == approval.CAUSE:
        return (
            f"Approve with `git agentrun approve {slug}`, or send the plan back with "
            f'`git agentrun answer {slug} "what to change"`.'
        )
    return f'Answer with `git agentrun answer {slug} "…"`.'


def _asked_in(esc: Escalation) -> str:
    """Where a question was asked: ``implement@1``, with its task when a task asked."""
    where = f"{esc.phase}@{esc.round}"
    return f"{where}, task `{esc.task}`" if esc.task else where


def _tasks_table(state: BuildState) -> list[str]:
    """The plan's task graph, one row per task in the plan's order."""
    lines = ["", "| task | state | phase | round | usage |", "| --- | --- | --- | --- | --- |"]
    for t in state.tasks.values():
        ask = next((e.id for e in state.open_escalations if e.task == t.id), None)
        word = task_state_name(state, t) + (f" (question {ask})" if ask else "")
        lines.append(
            f"| `{t.id}` | {word} | {task_phase(t)} | {t.impl_round} | {t.usage.describe()} |"
        )
    return lines


def _candidates_table(state: BuildState, title: str) -> list[str]:
    """Best of N: the candidates of every round, and which went on."""
    rows = [
        f"| {c.round} | `{c.id}` | {c.runtime} | {'passed' if c.passed else 'failed'} | "
        f"{'chosen' if c.chosen else 'kept'} |"
        for c in state.candidate_history
    ]
    rows += [
        f"| {state.candidate_round} | `{c.id}` | {c.runtime} | {c.stage} | running |"
        for c in state.candidates.values()
    ]
    if not rows:
        return []
    head = [
        "",
        "| round | candidate | runtime | verify | outcome |",
        "| --- | --- | --- | --- | --- |",
    ]
    return ["", title, *head, *rows]


def _checklist(state: BuildState) -> list[str]:
    config = state.config
    skip = {
        "plan-review": not config.pipeline.plan_review,
        "plan-approval": not approval.gated(state),
        "code-review": not config.pipeline.code_review,
        "reconcile": state.stage != "reconcile",
        "verify": not config.verify,
        "finalize": not config.finalize,
    }
    finished = state.status == "complete"
    # Running a task graph is the build's implement stage.
    current = "implement" if state.stage == "tasks" else state.stage
    now = ORDER.index(current) if current in ORDER else 0
    lines = []
    for stage, label in STAGES:
        if skip.get(stage):
            continue
        done = finished or ORDER.index(stage) < now
        here = not done and stage == current and state.status == "running"
        suffix = f" ← now (round {state.current_round})" if here else ""
        lines.append(f"- [{'x' if done else ' '}] {label}{suffix}")
    ready = state.proposal is not None and state.proposal.ready
    lines.append(f"- [{'x' if ready else ' '}] ready for review")
    return lines


def _outcome(state: BuildState) -> list[str]:
    if state.status == "aborted":
        return ["", "The build was aborted."]
    if state.waits_for_checks and not state.open_escalations:
        from agentrun.kernel.gate import waiting_for

        return ["", f"Waiting for {waiting_for(state)}, before ready for review."]
    if state.status != "failed":
        return []
    text = f"**The build failed:** {clip(state.reason, 500)}"
    if state.head != state.base_sha and state.published_head == state.head:
        text += f" Its work so far is pushed to `{state.branch}` at `{state.head[:10]}`."
    return ["", text]


def clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
