"""Memory across builds, the pure part: facts folded from their log, and the prompt's block.

A fact's state is the fold of its events: ``memory.added`` (proposed or accepted),
``memory.accepted`` and ``memory.forgotten``. Forgotten is final: a merged log may hold
an accept from a clone that had not seen the forget yet, and the forget still wins, so
no machine that syncs injects the fact again.

Which accepted facts a prompt carries is a fixed rule (:func:`chosen`): those whose paths
match the build's planned or changed paths first, then the rest, each group newest first,
up to ``[memory] max_chars`` characters of the whole block; never those the build itself
taught (a build's facts are for later builds). Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from agentrun import events as ev
from agentrun.kernel.paths import any_matches

ID = re.compile(r"m-([1-9][0-9]{0,8})")
HEADING = (
    "\n\nWhat earlier builds of this repository learned (accepted facts, each with its source):\n\n"
)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Fact:
    """One fact as its events leave it; ``order`` is its place among the added facts."""

    id: str
    text: str
    who: str
    build: str
    phase: str
    paths: tuple[str, ...]
    state: ev.FactState
    added_at: datetime
    order: int
    by: str = ""  # who accepted or forgot it (for a fact added accepted: who added it)

    @property
    def source(self) -> str:
        """Where the fact came from, as the prompt and ``memory list`` name it."""
        parts = (self.build and f"build {self.build}", self.phase)
        where = ", ".join(part for part in parts if part)
        said = f"{self.who} ({where})" if where else self.who
        if self.state == "accepted" and self.by and self.by != self.who:
            said += f", accepted by {self.by}"
        return said


def fold(events: Iterable[ev.Event]) -> dict[str, Fact]:
    """The facts of the memory log's events, by id, in the order they were added."""
    facts: dict[str, Fact] = {}
    for event in events:
        p = event.payload
        if isinstance(p, ev.MemoryAdded):
            if p.id in facts:
                continue  # a re-parented duplicate: the first stands
            by = p.who if p.state == "accepted" else ""
            facts[p.id] = Fact(
                p.id, p.text, p.who, p.build, p.phase, p.paths, p.state, event.ts, len(facts), by
            )
        elif isinstance(p, ev.MemoryAccepted | ev.MemoryForgotten):
            found = facts.get(p.id)
            if found is None or found.state == "forgotten":
                continue
            state: ev.FactState = "accepted" if isinstance(p, ev.MemoryAccepted) else "forgotten"
            facts[p.id] = replace(found, state=state, by=p.by)
    return facts


def number(fact_id: str) -> int | None:
    found = ID.fullmatch(fact_id)
    return int(found[1]) if found else None


def next_id(facts: Iterable[str]) -> str:
    return f"m-{max((number(i) or 0 for i in facts), default=0) + 1}"


def normal(text: str) -> str:
    """What two texts must share to be the same fact: case and spacing aside."""
    return _SPACE.sub(" ", text).strip().casefold()


def same_text(facts: dict[str, Fact], text: str) -> Fact | None:
    wanted = normal(text)
    return next((f for f in facts.values() if normal(f.text) == wanted), None)


def chosen(
    facts: dict[str, Fact], paths: Sequence[str], max_chars: int, build: str = ""
) -> list[Fact]:
    """The accepted facts a prompt carries, in the order it shows them (see the module);
    none that ``build`` itself taught (it is a later build's to be told)."""
    accepted = sorted(
        (f for f in facts.values() if f.state == "accepted" and not (build and f.build == build)),
        key=lambda f: -f.order,
    )
    matching = [f for f in accepted if f.paths and paths and any_matches(f.paths, paths)]
    first = {f.id for f in matching}
    ordered = matching + [f for f in accepted if f.id not in first]
    taken: list[Fact] = []
    size = len(HEADING)
    for fact in ordered:
        size += len(entry(fact))
        if size > max_chars:
            break
        taken.append(fact)
    return taken


def entry(fact: Fact) -> str:
    paths = f" (paths: {', '.join(fact.paths)})" if fact.paths else ""
    return f"- {fact.id}, from {fact.source}{paths}: {_SPACE.sub(' ', fact.text).strip()}\n"


def block(facts: dict[str, Fact], paths: Sequence[str], max_chars: int, build: str = "") -> str:
    """The prompt's memory block; "" when no accepted fact fits (or there is none)."""
    taken = chosen(facts, paths, max_chars, build)
    return HEADING + "".join(entry(f) for f in taken) if taken else ""


def recurring(verdicts: Iterable[tuple[int, Sequence[str]]]) -> list[str]:
    """The findings of code-review verdicts (``(round, findings)``) that two rounds share,
    each once, in the words of its first round."""
    rounds: dict[str, set[int]] = {}
    first: dict[str, str] = {}
    for round_, findings in verdicts:
        for finding in findings:
            key = normal(finding)
            if key:
                rounds.setdefault(key, set()).add(round_)
                first.setdefault(key, finding.strip())
    return [first[key] for key, seen in rounds.items() if len(seen) >= 2]
