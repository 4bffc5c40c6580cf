"""The event schema changes only with its version (DESIGN §13).

``schema-v<N>.json`` lists every field of the event envelope and payloads at schema
version N (name, type, default). A
change to any event's fields without a new SCHEMA_VERSION (and its upcaster in
``events.UPCASTERS``) fails here; so does a schema version no recorded bundle speaks.

To move to a new version: bump ``events.SCHEMA_VERSION``, add the upcaster, run this file
with ``AGENTRUN_WRITE_SCHEMA=1`` to write the new ``schema-v<N>.json``, and record a
bundle with the new release (``tests/upgrade/record.sh``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import get_args

from pydantic import BaseModel

from agentrun.events import SCHEMA_VERSION, UPCASTERS, Event

HERE = Path(__file__).parent


def fields(model: type[BaseModel], seen: dict[str, object]) -> None:
    """Every field of ``model`` and of the models it holds: name, type, default."""
    if model.__name__ in seen:
        return
    described: dict[str, str] = {}
    seen[model.__name__] = described
    for name, info in model.model_fields.items():
        default = (
            "required" if info.is_required() else repr(info.get_default(call_default_factory=True))
        )
        # Named as the package exports them: which module of events/ holds a class is
        # layout, not schema.
        annotation = re.sub(r"agentrun\.events\.\w+\.", "agentrun.events.", str(info.annotation))
        described[name] = f"{annotation} = {default}"
        for inner in _models(info.annotation):
            fields(inner, seen)


def _models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


def current() -> str:
    seen: dict[str, object] = {}
    fields(Event, seen)
    return json.dumps(seen, indent=1, sort_keys=True) + "\n"


def test_the_event_schema_is_the_one_of_its_version() -> None:
    path = HERE / f"schema-v{SCHEMA_VERSION}.json"
    if os.environ.get("AGENTRUN_WRITE_SCHEMA") == "1":
        path.write_text(current())
    assert path.exists(), f"no {path.name}: see this module's docstring"
    assert path.read_text() == current(), (
        "event fields changed at the same schema version: bump events.SCHEMA_VERSION, add its "
        "upcaster to events.UPCASTERS and record a bundle (see tests/upgrade/test_schema.py)"
    )


def test_every_older_version_has_its_upcaster() -> None:
    assert sorted(UPCASTERS) == list(range(1, SCHEMA_VERSION))


def test_a_bundle_speaks_the_current_schema_version(tmp_path: Path) -> None:
    seen: set[int] = set()
    for bundle in sorted(HERE.glob("v*.bundle")):
        listed = subprocess.run(
            ["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True
        )
        repo = tmp_path / bundle.stem
        subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
        subprocess.run(
            ["git", "-C", str(repo), "fetch", "-q", str(bundle), "+refs/*:refs/*"], check=True
        )
        logs = [line.split()[1] for line in listed.stdout.splitlines() if "refs/agentrun/" in line]
        for ref in logs:
            bodies = subprocess.run(
                ["git", "-C", str(repo), "log", "--format=%b%x00", ref],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for body in bodies.split("\0"):
                if body.strip().startswith("{") and '"v":' in body:
                    seen.add(json.loads(body.strip())["v"])
    assert SCHEMA_VERSION in seen, f"no bundle records schema v{SCHEMA_VERSION}; record one"
