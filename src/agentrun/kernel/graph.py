"""A plan's task graph: the fenced ``agentrun-tasks`` block of a submitted plan.

It holds a JSON list of ``{"id", "goal", "deps", "paths"}``. Pure: the verb that submits
the plan reads it here, and a graph that does not hold goes back to the plan's author
with the reason (``kernel.session_end``), never a crash.
"""

from __future__ import annotations

import json
import re
from graphlib import CycleError, TopologicalSorter

from pydantic import ValidationError

from agentrun.events import TaskSpec
from agentrun.kernel.paths import spec

INFO = "agentrun-tasks"
MAX_TASKS = 12
TASK_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")  # whole ids only: fullmatch
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")


class GraphError(ValueError):
    """Why a plan's task graph was refused, in one line its author can act on."""


def blocks(plan: str) -> list[str]:
    """The bodies of the plan's fenced blocks whose info string is ``agentrun-tasks``."""
    found: list[str] = []
    lines = plan.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening["fence"]
        body: list[str] = []
        i += 1
        while i < len(lines) and not _closes(lines[i], fence):
            body.append(lines[i])
            i += 1
        if opening["info"] == INFO:
            found.append("\n".join(body))
        i += 1
    return found


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and set(stripped) == {fence[0]}


def parse(plan: str) -> tuple[TaskSpec, ...]:
    """The plan's task graph in its order (``()``: it has none); ``GraphError`` if it
    does not hold."""
    found = blocks(plan)
    if not found:
        return ()
    if len(found) > 1:
        raise GraphError(f"the plan has {len(found)} `{INFO}` blocks; it may have one")
    try:
        doc = json.loads(found[0])
    except ValueError as exc:
        raise GraphError(f"the `{INFO}` block is not JSON: {exc}") from None
    if not isinstance(doc, list) or not doc:
        raise GraphError(f"the `{INFO}` block must hold a non-empty JSON list of tasks")
    if len(doc) > MAX_TASKS:
        raise GraphError(f"the graph has {len(doc)} tasks; at most {MAX_TASKS} are allowed")
    tasks = tuple(_task(n, item) for n, item in enumerate(doc, 1))
    _check_ids(tasks)
    return tasks


def _task(n: int, item: object) -> TaskSpec:
    if not isinstance(item, dict):
        raise GraphError(f"task {n} is not an object with id, goal, deps and paths")
    unknown = sorted(set(item) - {"id", "goal", "deps", "paths"})
    if unknown:
        raise GraphError(f"task {n} has unknown key(s) {', '.join(unknown)}")
    try:
        task = TaskSpec.model_validate({k: v for k, v in item.items() if v is not None})
    except ValidationError as exc:
        detail = exc.errors()[0]
        where = ".".join(str(p) for p in detail["loc"])
        said = str(detail["msg"]).replace("valid tuple", "list")
        raise GraphError(f"task {n}: {where + ': ' if where else ''}{said}") from None
    if not TASK_ID.fullmatch(task.id):
        raise GraphError(
            f"task {n}: id {task.id!r} must match [a-z0-9][a-z0-9-]{{0,31}} (lower-case "
            "letters, digits and '-', at most 32)"
        )
    if re.fullmatch(r"c[0-9]+", task.id):
        raise GraphError(f"task {n}: id {task.id!r} is kept for candidates (c1, c2, …)")
    if not task.goal.strip():
        raise GraphError(f"task {task.id}: its goal is empty")
    try:
        spec(task.paths)
    except ValueError as exc:
        raise GraphError(f"task {task.id}: a path pattern does not parse: {exc}") from None
    return task


def _check_ids(tasks: tuple[TaskSpec, ...]) -> None:
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise GraphError(f"task id {task.id!r} is used twice")
        seen.add(task.id)
    for task in tasks:
        for dep in task.deps:
            if dep not in seen:
                raise GraphError(f"task {task.id} depends on {dep!r}, which is not a task")
    try:
        TopologicalSorter({t.id: t.deps for t in tasks}).prepare()
    except CycleError as exc:
        cycle = " -> ".join(reversed(exc.args[1]))
        raise GraphError(f"the task graph has a cycle: {cycle}") from None
    earlier: set[str] = set()
    for task in tasks:
        later = [d for d in task.deps if d not in earlier]
        if later:
            raise GraphError(
                f"task {task.id} depends on {', '.join(later)}, listed after it: list a "
                "task after the tasks it depends on"
            )
        earlier.add(task.id)
