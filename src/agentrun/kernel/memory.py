"""Memory across builds, the pure part: facts folded from their log, and the prompt's block.

A fact's state is the fold of its events: ``memory.added`` (proposed or accepted),
``memory.accepted`` and ``memory.forgotten``. Forgotten is final: a merged log may hold
an accept from a clone that had not seen the forget yet, and the forget still wins, so
no machine that syncs injects the fact again.

Which accepted facts a prompt carries is a fixed rule (:func:`chosen`): those whose paths
match the build's planned or changed paths first, then the rest, each group newest first,
up to ``[memory] max_chars`` characters of the whole block; never those the build itself
taught (a build's facts are for later builds). Pure: no I/O, no clock.

What adding, accepting and forgetting append is decided here too (:func:`added`,
:func:`marked`): who adds a fact decides its first state, the same text is never added
twice, and forgotten stays forgotten unless a person adds the text again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from agentrun import events as ev
from agentrun.errors import AgentrunError
from agentrun.kernel.draft import Draft
from agentrun.kernel.paths import any_matches

ID = re.compile(r"m-([1-9][0-9]{0,8})")
HEADING = (
    "\n\nWhat earlier builds of this repository learned (accepted facts, each with its source):\n\n"
)
_SPACE = re.compile(r"\s+")
MAX_TEXT = 2000  # characters of one fact: a fact is a sentence or two, not a document
MAX_PATHS = 20
MAX_PATH = 200


class FactError(AgentrunError):
    """A memory command that cannot be done: one line saying why."""


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


def check_text(text: str) -> str:
    """A fact's text as it is stored (the caller has scrubbed it): stripped, checked."""
    text = text.strip()
    if not text:
        raise FactError("the fact is empty: say what later builds should know")
    if len(text) > MAX_TEXT:
        raise FactError(f"the fact has {len(text):,} characters; at most {MAX_TEXT:,}")
    return text


def clean_paths(paths: Sequence[str]) -> tuple[str, ...]:
    """Path globs (``.gitignore`` lines, as verify ``paths``), checked."""
    if len(paths) > MAX_PATHS:
        raise FactError(f"{len(paths)} --path globs; at most {MAX_PATHS}")
    for path in paths:
        if not path.strip() or "\n" in path or len(path) > MAX_PATH:
            raise FactError(
                f"--path {path!r} is not a glob (one line, at most {MAX_PATH} characters, "
                'such as "src/api/**")'
            )
    return tuple(p.strip() for p in paths)


@dataclass(frozen=True)
class Adding:
    """What adding a text means for the facts: the events, and the fact that already says
    it (None: the text is new)."""

    drafts: list[Draft]
    twin: Fact | None


def added(
    facts: dict[str, Fact],
    text: str,
    who: str,
    *,
    accepted: bool,
    actor: ev.Actor,
    build: str = "",
    phase: str = "",
    paths: tuple[str, ...] = (),
    over_forgotten: bool = False,
) -> Adding:
    """Add a fact unless one says the same already.

    A fact the same text already made that is only proposed is accepted by an
    ``accepted`` add (a person, or a command that passed, vouches for it now). A forgotten
    fact's text comes back only when ``over_forgotten`` (a person adds it again); a
    command that passes again does not revive what a person forgot.
    """
    live = {k: f for k, f in facts.items() if f.state != "forgotten"}
    twin = same_text(live if over_forgotten else facts, text)
    if twin is not None:
        if accepted and twin.state == "proposed":
            return Adding([Draft(ev.MemoryAccepted(id=twin.id, by=who), actor)], twin)
        return Adding([], twin)
    state: ev.FactState = "accepted" if accepted else "proposed"
    payload = ev.MemoryAdded(
        id=next_id(facts), text=text, who=who, build=build, phase=phase, paths=paths, state=state
    )
    return Adding([Draft(payload, actor)], None)


def find(facts: dict[str, Fact], fact_id: str) -> Fact:
    found = facts.get(fact_id.strip())
    if found is None:
        known = "`git agentrun memory list` lists them"
        raise FactError(f"no fact {fact_id!r} in refs/agentrun/memory: {known}")
    return found


def marked(facts: dict[str, Fact], fact_id: str, by: str, accept: bool) -> list[Draft]:
    """A person accepts (or forgets) a fact: the event, or none when nothing changes."""
    fact = find(facts, fact_id)
    if fact.state == "forgotten":
        if accept:
            raise FactError(
                f"fact {fact.id} was forgotten by {fact.by}; a forgotten fact stays "
                "forgotten (add its text again with `git agentrun memory add`)"
            )
        return []
    if accept and fact.state == "accepted":
        return []
    made = ev.MemoryAccepted if accept else ev.MemoryForgotten
    return [Draft(made(id=fact.id, by=by), ev.HumanActor(login=by))]


def as_json(fact: Fact) -> dict[str, object]:
    """A fact as ``memory list --json`` prints it."""
    return {
        "id": fact.id,
        "state": fact.state,
        "text": fact.text,
        "who": fact.who,
        "build": fact.build or None,
        "phase": fact.phase or None,
        "paths": list(fact.paths),
        "by": fact.by or None,
        "added_at": fact.added_at.isoformat(),
    }
