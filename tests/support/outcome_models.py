"""Priced scripted models for the outcomes harness (bench/outcomes), served by ModelServer.

A *strong* model knows each instance's fix: in implement it reads the planted file, writes
the project's own text back over the bug with ``edit_file`` and reports done. A *cheap*
model never fixes it: it writes a wrong change (a comment) and reports done, in a few
tokens or, when its failures are expensive, in many turns of many tokens each. Both plan
and review alike (a review approves). The model is the request's ``model``; the instance
is the one whose goal the request's prompt holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from support.model_server import Request, ToolCall, Turn


class Fixable(Protocol):
    """What the models need of an instance (bench/outcomes/_instances.Instance)."""

    @property
    def id(self) -> str: ...
    @property
    def file(self) -> str: ...
    @property
    def old(self) -> str: ...
    @property
    def new(self) -> str: ...
    @property
    def goal(self) -> str: ...


@dataclass(frozen=True)
class Behaviour:
    """How one model name behaves: whether it fixes the bug (every instance's, or only
    those in ``fixes_only``), the tokens each answer reports, and how many turns an
    implement session reads before it edits."""

    fixes: bool
    tokens_in: int
    tokens_out: int
    reading_turns: int = 1
    fixes_only: frozenset[str] = frozenset()


def tool_names(request: Request) -> list[str]:
    tools = request.body.get("tools", []) if isinstance(request.body, dict) else []
    return [t.get("name") or t.get("function", {}).get("name", "") for t in tools]


# A session's phase by the verb among its tools; the reviews (plan and code) approve alike.
PHASE_VERBS = {"submit_plan": "plan", "done": "implement", "pass": "verify"}


def phase_of(request: Request) -> str:
    """plan, implement, verify or review: from the tools the session was given."""
    names = tool_names(request)
    return next((phase for verb, phase in PHASE_VERBS.items() if verb in names), "review")


class OutcomeModels:
    """The responder: ``behaviours`` by model name; ``instances`` to find each fix."""

    def __init__(self, instances: Sequence[Fixable], behaviours: dict[str, Behaviour]) -> None:
        self.instances = list(instances)
        self.behaviours = behaviours

    def __call__(self, request: Request) -> Turn:
        model = str(request.body.get("model", "")) if isinstance(request.body, dict) else ""
        behaviour = self.behaviours.get(model)
        if behaviour is None:
            return Turn(status=404, error=f"no model {model!r} here")
        text = request.text()
        instance = next((i for i in self.instances if i.goal in text), None)
        steps = len(request.tool_results())
        turns = self._turns(phase_of(request), instance, behaviour)
        turn = turns[min(steps, len(turns) - 1)]
        return Turn(
            text=turn.text,
            tool_calls=turn.tool_calls,
            tokens_in=behaviour.tokens_in,
            tokens_out=behaviour.tokens_out,
        )

    def _turns(self, phase: str, instance: Fixable | None, behaviour: Behaviour) -> list[Turn]:
        if phase == "plan":
            where = instance.file if instance else "the code"
            return [call("list_files"), call("submit_plan", plan=f"1. Fix the bug in {where}.\n")]
        if phase == "verify":
            return [call("pass")]
        if phase == "review":
            return [call("approve")]
        if instance is None:
            return [call("done", summary="nothing found to change")]
        reads = [call("read_file", path=instance.file)] * behaviour.reading_turns
        if behaviour.fixes or instance.id in behaviour.fixes_only:
            edit = call("edit_file", path=instance.file, old=instance.new, new=instance.old)
        else:  # a change that leaves the bug where it is
            edit = call("edit_file", path=instance.file, old=instance.new, new=instance.new + " ")
        return [*reads, edit, call("done", summary=f"fixed {instance.id}")]


def call(name: str, **arguments: Any) -> Turn:
    return Turn(text=f"calling {name}", tool_calls=(ToolCall(name, arguments),))
