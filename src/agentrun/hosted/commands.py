"""``/agentrun …`` commands in forge comments: what a comment asks, parsed without I/O.

A command is a line that starts with ``/agentrun`` (outside fenced code and quotes, so
quoting the reply syntax back does not run it)::

    /agentrun answer [ID] TEXT   answer the open escalation (or escalation ID, e.g. e2);
                                 TEXT runs on over the following lines up to the next
                                 command
    /agentrun approve            approve the plan that waits for a person
    /agentrun pause | resume | abort | retry | reconcile | status
    /agentrun remember accept ID accept a proposed fact of refs/agentrun/memory (m-3)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

PREFIX = "/agentrun"
Verb = Literal[
    "answer", "approve", "pause", "resume", "abort", "retry", "reconcile", "status", "remember"
]
VERBS: tuple[Verb, ...] = get_args(Verb)
USAGE = (
    "`/agentrun answer [ID] TEXT`, `/agentrun approve`, `/agentrun pause`, `/agentrun resume`, "
    "`/agentrun abort`, `/agentrun retry`, `/agentrun reconcile`, `/agentrun status` or "
    "`/agentrun remember accept ID`"
)
_VERB: dict[str, Verb] = {verb: verb for verb in VERBS}
_ESCALATION_ID = re.compile(r"e\d+")
_FACT_ID = re.compile(r"m-[1-9][0-9]{0,8}")
_WORD = re.compile(r"[a-z][a-z-]{0,19}")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Command:
    verb: Verb
    text: str = ""  # the answer (``answer`` only)
    escalation: str | None = None  # the escalation named by ``answer ID``
    fact: str | None = None  # the fact named by ``remember accept ID``


@dataclass(frozen=True)
class Refusal:
    """A line that looks like a command but is not one; ``message`` says why."""

    line: str
    message: str


def _is_command(line: str) -> bool:
    stripped = line.strip()
    return stripped == PREFIX or stripped.startswith((PREFIX + " ", PREFIX + "\t"))


def parse(body: str) -> list[Command | Refusal]:
    """The commands of one comment body, in order; empty when it holds none."""
    lines = body.replace("\r\n", "\n").split("\n")
    found: list[Command | Refusal] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        if not _is_command(line):
            continue
        words = line.strip()[len(PREFIX) :].strip()
        verb, _, rest = words.partition(" ")
        verb = verb.lower()
        if verb == "answer":
            more: list[str] = []
            while i < len(lines) and not _is_command(lines[i]):
                more.append(lines[i])
                i += 1
            found.append(_answer(line, "\n".join([rest.strip(), *more]).strip()))
        elif verb == "remember":
            found.append(_remember(line, rest))
        elif (known := _VERB.get(verb)) is not None:
            found.append(Command(known))
        elif not verb:
            found.append(Refusal(line.strip(), f"a command needs a verb: {USAGE}"))
        elif _WORD.fullmatch(verb):
            found.append(Refusal(line.strip(), f"unknown command `{verb}`: use {USAGE}"))
        else:  # not echoed: it could mention people or break the reply's markdown
            found.append(Refusal(line.strip(), f"unknown command: use {USAGE}"))
    return found


def _answer(line: str, text: str) -> Command | Refusal:
    parts = text.split(None, 1)
    escalation = None
    if parts and _ESCALATION_ID.fullmatch(parts[0]):
        escalation, text = parts[0], parts[1].strip() if len(parts) > 1 else ""
    if not text:
        return Refusal(
            line.strip(), "the answer is empty: write `/agentrun answer [ID] TEXT` with the text"
        )
    return Command("answer", text, escalation)


def _remember(line: str, rest: str) -> Command | Refusal:
    words = rest.split()
    if len(words) == 2 and words[0].lower() == "accept" and _FACT_ID.fullmatch(words[1]):
        return Command("remember", fact=words[1])
    return Refusal(
        line.strip(), "write `/agentrun remember accept ID` with the fact's id (such as m-3)"
    )
