"""Payloads of ``refs/agentrun/memory``: the facts builds carry into later builds.

The memory is an event log like a build's (one event per commit, compare-and-swap
appends, synced like the rest), holding only these three types. A fact is added once,
with its id (``m-<n>``), its text, where it came from and the paths it concerns; a
person accepts or forgets it later. Its state is the fold of the three
(:mod:`agentrun.kernel.memory`): forgotten is final, whatever else a merged log holds.
"""

from __future__ import annotations

from typing import Literal

from agentrun.events.base import PayloadModel

FactState = Literal["proposed", "accepted", "forgotten"]


class MemoryAdded(PayloadModel, summary="{id} {state}: {text:.80}"):
    """A fact: ``who`` is ``agent``, a person's login, ``verify`` or ``setup``; ``build``
    and ``phase`` (``verify:test@1``) say where it was learned ("" for a person's own)."""

    type: Literal["memory.added"] = "memory.added"
    id: str
    text: str
    who: str
    build: str = ""
    phase: str = ""
    paths: tuple[str, ...] = ()
    state: Literal["proposed", "accepted"] = "proposed"


class MemoryAccepted(PayloadModel, summary="{id} accepted by {by}"):
    type: Literal["memory.accepted"] = "memory.accepted"
    id: str
    by: str


class MemoryForgotten(PayloadModel, summary="{id} forgotten by {by}"):
    type: Literal["memory.forgotten"] = "memory.forgotten"
    id: str
    by: str
