"""``git agentrun agent usage``: what a ``command`` agent spent, reported for its session.

A ``command`` runtime runs any program, and cannot see what that program spent; every
other runtime reads its usage from the model's answers or the CLI's stream. So only a
``command`` agent's session takes the verb: on any other runtime the runtime's own
figures win and the verb is refused, so that nothing is counted twice. Each call adds
to the session's total, and the runtime folds the total into the session's
``session.ended`` (usage is stored once, DESIGN §3: the verb makes no event of its own).
A session with no call is "usage unreported" (``Usage(reported=False)``), not free.

Like the other verbs it only queues (``<worktree>/.agentrun/run/usage/<n>.json``); the
``command`` runtime reads the folder while the program runs (:class:`Tally`) and ends
the program once the total crosses what the build's budget left. The agent is not
trusted: every report is checked again there (whole numbers, none negative, none past
:data:`MAX_TOKENS` or :data:`MAX_COST_USD`, its own session) and the rest is refused
with a line in the transcript.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrun.agent.outbox import queue, take
from agentrun.errors import VerbError
from agentrun.events import Usage
from agentrun.kernel.rules import REPORTED_BY_AGENT
from agentrun.kernel.verbs import AgentEnv, scoped

USAGE = Path(".agentrun") / "run" / "usage"
# The runtime kinds whose usage only their agent can report.
# One report's bounds: far past any real session, short of figures that would swamp a
# build's totals (a lying agent may end its own session early, nothing more).
MAX_TOKENS = 10**9
MAX_COST_USD = 10_000.0
FIGURES = ("tokens_in", "tokens_out", "cache_read", "cache_write")


def reported_by_agent(kind: str) -> bool:
    """Whether a runtime kind's sessions report usage only through ``agent usage``."""
    return kind in REPORTED_BY_AGENT


def parse_tokens(option: str, text: str) -> int:
    """A token count given on the command line, or one clear refusal."""
    try:
        value = int(text.strip())
    except ValueError:
        raise VerbError(f"{option} {text!r} is not a whole number of tokens") from None
    return checked_tokens(option, value)


def parse_cost(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise VerbError(f"--cost {text!r} is not a number of dollars") from None
    return checked_cost(value)


def checked_tokens(what: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise VerbError(f"{what} {value!r} is not a whole number of tokens")
    if value < 0:
        raise VerbError(f"{what} {value:,} is negative: report what the session spent")
    if value > MAX_TOKENS:
        raise VerbError(f"{what} {value:,} is more than one report may carry ({MAX_TOKENS:,})")
    return value


def checked_cost(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise VerbError(f"--cost {value!r} is not a number of dollars")
    if value < 0:
        raise VerbError(f"--cost {value} is negative: report what the session spent")
    if value > MAX_COST_USD:
        raise VerbError(f"--cost {value} is more than one report may carry (${MAX_COST_USD:,.0f})")
    return float(value)


def usage_of(data: Mapping[str, Any]) -> Usage:
    """A queued report's figures, checked again (the agent may have written the file)."""
    figures = {name: checked_tokens(name, data.get(name, 0)) for name in FIGURES}
    cost = data.get("cost_usd")
    return Usage(**figures, cost_usd=None if cost is None else checked_cost(cost))


def submit_usage(
    env: AgentEnv, usage: Usage, model: str | None, cwd: Path, environ: Mapping[str, str]
) -> str:
    """Check that the session may report (open, on a ``command`` runtime), price the
    figures at ``model`` when no cost is given, and queue them; a line saying so."""
    from agentrun.agent.verbs import ReadOnlyCache, log_repository, worktree_of
    from agentrun.prices import price_of, with_cost
    from agentrun.store.cache import load_state
    from agentrun.store.log import EventLog

    repo = log_repository(cwd, environ)
    _, state = load_state(EventLog(repo), ReadOnlyCache(repo), env.build)
    state = scoped(state, env)
    session = state.session
    if session is None or session.session != env.session:
        raise VerbError(
            f"session {env.session} is not the open session of build {env.build} "
            "(it ended or was abandoned); usage not recorded"
        )
    config = state.config.runtime(session.runtime)
    kind = config.kind if config else "?"
    if not reported_by_agent(kind):
        raise VerbError(
            f"runtime {session.runtime} ({kind}) reports this session's usage itself; its "
            "figures count and these are not recorded (no usage is counted twice)"
        )
    priced = with_cost(usage, price_of(model or session.model, state.config.prices))
    request = {"session": env.session, "model": model, **priced.model_dump(exclude={"reported"})}
    workdir = worktree_of(cwd)
    path = queue(workdir, request, USAGE)
    unpriced = f" (no price for {model})" if priced.cost_usd is None and model else ""
    return (
        f"usage queued in {path.relative_to(workdir)}: {priced.describe()}{unpriced}; "
        f"it adds to session {env.session}'s total"
    )


@dataclass
class Tally:
    """A session's reported usage: the queued reports read as they come, each once.

    ``take`` is called by one thread at a time (the runtime's watcher, then the runtime
    after the program ended)."""

    workdir: Path
    session: str
    total: Usage | None = None  # None: nothing reported yet
    said: list[str] = field(default_factory=list)  # one line per report, for the transcript

    def take(self) -> Usage | None:
        """Read the reports queued since the last call; what they add (None: nothing)."""
        added: Usage | None = None
        for path in sorted((self.workdir / USAGE).glob("*.json")):
            try:
                data = take(path)
                if data is None:
                    continue
                claimed = str(data.get("session"))
                usage = usage_of(data)
            except (OSError, ValueError, VerbError) as exc:
                self.said.append(f"usage {path.name}: refused ({exc})")
                continue
            if claimed != self.session:
                self.said.append(f"usage {path.name}: from session {claimed}, not ours; refused")
                continue
            self.said.append(f"usage {path.name}: {usage.describe()} counted")
            added = usage if added is None else added + usage
        if added is not None:
            self.total = added if self.total is None else self.total + added
        return added

    @property
    def tokens(self) -> int:
        return self.total.tokens if self.total is not None else 0
