"""What a build teaches later builds, recorded in ``refs/agentrun/memory`` as it runs.

Deterministic sources add accepted facts: a verify command that passed (its step's name
and command), setup that worked (its commands). Code-review findings that recurred in two
rounds are proposed: a reviewer is an agent, and an agent's words wait for a person.
Each is added once (the same text never twice). A failure to write the memory is never
the build's: it goes on without the fact.
"""

from __future__ import annotations

from agentrun import events as ev
from agentrun.errors import AgentrunError
from agentrun.kernel import memory
from agentrun.runner.build import BuildHandle
from agentrun.store.facts import add, learned


def verify_passed(build: BuildHandle, step: str, command: str, round_: int) -> None:
    text = f"The verify step `{step}` passes with: `{command}`"
    learned(build.repo, text, "verify", build.slug, f"verify:{step}@{round_}")


def setup_worked(build: BuildHandle, command: str) -> None:
    text = f"Worktree setup that works: `{command}`"
    learned(build.repo, text, "setup", build.slug, "setup")


def findings_recurred(build: BuildHandle) -> None:
    """Propose the code-review findings that two rounds' verdicts share."""
    verdicts: list[tuple[int, tuple[str, ...]]] = []
    session = ""
    for stored in build.log.read(build.slug):
        p = stored.event.payload
        if isinstance(p, ev.CodeReviewVerdict) and stored.event.task == build.task:
            verdicts.append((p.round, p.findings))
            session = p.session
    for finding in memory.recurring(verdicts):
        actor = ev.AgentActor(role="code-review", session=session or "unknown")
        phase = f"code-review@{verdicts[-1][0]}"
        text = f"A reviewer asked for this in more than one round: {finding}"
        try:
            add(
                build.repo,
                text,
                "agent",
                accepted=False,
                actor=actor,
                build=build.slug,
                phase=phase,
            )
        except AgentrunError:
            continue
