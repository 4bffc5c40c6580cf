"""How builds, events and proposals read on a terminal or in a CI log."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agentrun.events import Usage, describe_actor
from agentrun.forge.base import ProposalInfo
from agentrun.kernel import approval
from agentrun.kernel.budget import how_to_price
from agentrun.kernel.ladder import rung_spend
from agentrun.kernel.state import BuildState
from agentrun.kernel.summary import cost_cell, task_rows, tokens_cell
from agentrun.store.log import Stored
from agentrun.view.table import table

if TYPE_CHECKING:
    from agentrun.commands.doctor import Diagnosis


def tokens_text(usage: Usage) -> str:
    """A TOKENS cell: ``unreported`` for sessions whose agent reported nothing."""
    return tokens_cell(usage.tokens, usage.reported)


def cost_text(state: BuildState, usage: Usage | None = None) -> str:
    """The build's cost, or ``usage``'s (one of its tasks'); ``?`` marks a total that may
    leave out sessions of unknown price (the build had some)."""
    used = state.usage if usage is None else usage
    return cost_cell(used.cost_usd, used.tokens, bool(state.unpriced_models))


def event_line(stored: Stored) -> str:
    e = stored.event
    summary = e.payload.summary().replace("\n", " ")
    if len(summary) > 140:
        summary = summary[:137] + "..."
    task = f"[{e.task}] " if e.task else ""
    return (
        f"{e.seq:>4} {e.ts:%H:%M:%S} {stored.oid[:8]} {e.type:<24} {task}{summary}"
        f"  [{describe_actor(e.actor)}]"
    )


def outcome_lines(state: BuildState, word: str) -> list[str]:
    """How a run ended; ``word``: the state as `status` names it (``stopped``, …)."""
    lines = [f"build {state.slug}: {word} at {state.phase_label}"]
    for esc in state.open_escalations:
        lines.append(f"question {esc.id} ({esc.phase}@{esc.round}): {esc.question}")
        if esc.cause == approval.CAUSE:
            lines.append(f"  approve: git agentrun approve {state.slug}")
            lines.append(f'  or:      git agentrun answer {state.slug} "what to change"')
        else:
            lines.append(f'  answer:  git agentrun answer {state.slug} "…"')
        lines.append(f"  then:    git agentrun resume {state.slug}")
    if state.paused:
        lines.append(f"resume with: git agentrun resume {state.slug}")
    if state.waits_for_checks and not state.open_escalations:
        from agentrun.kernel.gate import waiting_for

        lines.append(f"waiting for {waiting_for(state)}")
        lines.append(f"  continue: git agentrun sweep (or resume {state.slug}) once they ran")
    if state.status == "failed":
        lines.append(f"reason: {state.reason}")
    if state.proposal is not None:
        ready = "ready for review" if state.proposal.ready else "draft"
        lines.append(
            f"proposal #{state.proposal.number} ({ready}): "
            f"git agentrun pulls show {state.proposal.number}"
        )
    return lines


def usage_lines(state: BuildState) -> list[str]:
    """Tokens and cost per phase and for the whole build."""
    lines = [f"usage:    {phase}: {used.describe()}" for phase, used in state.phase_usage.items()]
    lines += [
        f"rung:     {r.role} {r.rung} ({r.runtime}{', now' if r.current else ''}): "
        f"{r.usage.describe()}"
        for r in rung_spend(state)
    ]
    lines.append(f"total:    {state.usage.describe()}")
    if state.unpriced_models:
        fix = how_to_price(state.config, state.unpriced_models)
        lines.append(f"unknown price: {', '.join(state.unpriced_models)} ({fix})")
    return lines


def detail_lines(state: BuildState, artifacts: list[str], word: str | None = None) -> list[str]:
    """``show``: ``word`` is the state as ``status`` says it (``stopped``)."""
    lines = [
        f"build:    {state.slug}",
        f"goal:     {state.goal}",
        f"state:    {word or state.state_name} at {state.phase_label}{_gate(state)}",
        f"base:     {state.base_ref} {state.base_sha[:10]}",
        f"branch:   {state.branch} at {state.head[:10]}",
        f"sessions: {state.sessions}",
    ]
    lines += usage_lines(state)
    if state.proposal is not None:
        lines.append(f"proposal: #{state.proposal.number} {state.proposal.url}")
    for name, result in state.verify_results.items():
        lines.append(f"verify:   {name} {result.outcome} (attempt {result.attempt})")
    for esc in state.escalations:
        status = "open" if esc.is_open else f"answered by {esc.by}: {esc.answer}"
        task = f" (task {esc.task})" if esc.task else ""
        lines.append(f"question: {esc.id} {esc.phase}@{esc.round}{task} {esc.question} [{status}]")
    for note in state.observations:
        lines.append(f"note:     {note}")
    lines += task_lines(state)
    lines += candidate_lines(state)
    if artifacts:
        lines.append("artifacts: " + ", ".join(artifacts))
    return lines


def _gate(state: BuildState) -> str:
    """What ``show`` adds when the plan waits for a person's approval."""
    asked = approval.waiting(state)
    if asked is None:
        return ""
    return f", waiting for plan approval ({asked.id}): git agentrun approve {state.slug}"


def task_lines(state: BuildState) -> list[str]:
    """The build's task graph, one row per task in the plan's order, for `show`."""
    if not state.tasks:
        return []
    body = []
    for row in task_rows(state):
        t = row.task
        goal = t.goal.strip().splitlines()[0] if t.goal.strip() else ""
        body.append(
            [
                t.id,
                ",".join(t.deps) or "-",
                row.state_name,
                row.phase,
                str(t.impl_round),
                tokens_text(t.usage),
                cost_text(state, t.usage),
                row.branch,
                goal,
            ]
        )
    headers = ["TASK", "DEPS", "STATE", "PHASE", "ROUND", "TOKENS", "COST", "BRANCH", "GOAL"]
    return [f"tasks ({len(body)}):"] + [f"  {line}" for line in table(headers, body)]


def candidate_lines(state: BuildState) -> list[str]:
    """Best of N, for `show`: every round's candidates, the one that went on, the kept
    heads (refs/agentrun/candidates/<slug>/<round>/<n>), and a round under way."""
    body = [
        [
            str(c.round),
            c.id,
            c.runtime,
            "passed" if c.passed else f"failed ({c.failing} step(s))",
            "chosen"
            if c.chosen
            else f"kept as refs/agentrun/candidates/{state.slug}/{c.round}/"
            + c.id.removeprefix("c"),
            f"{c.tokens:,}",
            c.head[:10],
        ]
        for c in state.candidate_history
    ]
    body += [
        [
            str(state.candidate_round),
            c.id,
            c.runtime or "",
            {"passed": "passed", "failed": f"failed ({c.failing} step(s))"}.get(c.stage, "pending"),
            f"at {c.stage}" if state.status == "running" else state.status,
            tokens_text(c.usage),
            c.head[:10],
        ]
        for c in state.candidates.values()
    ]
    if not body:
        return []
    headers = ["ROUND", "CANDIDATE", "RUNTIME", "VERIFY", "OUTCOME", "TOKENS", "HEAD"]
    return [f"candidates ({len(body)}):"] + [f"  {line}" for line in table(headers, body)]


def pulls_table(found: list[ProposalInfo]) -> None:
    if not found:
        click.echo("no proposals yet")
        return
    body = [
        [
            f"#{p.number}",
            p.state + (" draft" if p.draft and p.state == "open" else ""),
            p.head,
            p.base,
            p.title,
        ]
        for p in found
    ]
    for line in table(["#", "STATE", "HEAD", "BASE", "TITLE"], body):
        click.echo(line)


def proposal_lines(info: ProposalInfo, commits: list[tuple[str, str]] | None = None) -> list[str]:
    draft = " (draft)" if info.draft and info.state == "open" else ""
    lines = [
        f"#{info.number} {info.title}",
        f"state: {info.state}{draft}   {info.head} -> {info.base}   {info.url}",
        "",
        info.body.rstrip(),
    ]
    if commits is not None:
        lines += ["", f"commits ({len(commits)}):"]
        lines += [f"  {sha[:10]} {subject}" for sha, subject in commits]
    if info.comments:
        lines += ["", f"comments ({len(info.comments)}):"]
        for c in info.comments:
            lines += [f"--- {c.author} #{c.id} ({c.updated_at:%Y-%m-%d %H:%M})", c.body.rstrip()]
    return lines


def doctor_lines(found: Diagnosis) -> list[str]:
    body = [
        [
            row.name,
            row.kind,
            ",".join(row.roles) or "-",
            "ok" if row.probe.ok else "no",
            row.probe.detail,
        ]
        for row in found.rows
    ]
    lines = table(["RUNTIME", "KIND", "ROLES", "RUNS", "DETAIL"], body)
    if found.default_ok:
        how = "picked, none is configured" if found.picked else "configured"
        lines.append(f"default role runs on: {', '.join(found.default)} ({how})")
    elif found.picked:
        lines.append("no runtime can run here: configure one (`git agentrun init`)")
    else:
        lines.append(f"the default role cannot run: none of {', '.join(found.default)} is usable")
    lines += found.prices
    if found.isolation:
        lines.append(found.isolation)
    if found.forge:
        lines.append(found.forge)
    lines += found.budgets
    lines += found.checks
    return lines
