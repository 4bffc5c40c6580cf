"""An event to append, as the kernel makes it: before the store gives it a seq and a time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentrun.events import Actor, KernelActor


@dataclass(frozen=True)
class Draft:
    """An event to append: its payload, who it is from, and any artifacts it carries."""

    payload: object
    actor: Actor = field(default_factory=KernelActor)
    artifacts: Mapping[str, bytes] = field(default_factory=dict)
    task: str | None = None  # the task of the build's graph it belongs to (its envelope's)
