"""The summary index file (store/summary.py): records keyed by a log's tip, appended and
rewritten, torn, edited or foreign ones never used."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pygit2

from agentrun.events import BuildCreated, EscalationRaised, HumanActor
from agentrun.kernel.draft import Draft
from agentrun.kernel.evolve import replay
from agentrun.kernel.summary import summarize
from agentrun.store import summary
from agentrun.store.log import EventLog

TIP = "a" * 40
OTHER = "b" * 40
QUESTION = 'A "question" with \\u0000 and "\\u0000x:0" in it\nand a second line'


def state_of(repo: pygit2.Repository, slug: str, question: str | None = None) -> Any:
    log = EventLog(repo)
    created = BuildCreated(goal=f"goal of {slug}", base_ref="main", base_sha="a" * 40, branch=slug)
    drafts = [Draft(created, HumanActor(login="ada"))]
    if question is not None:
        drafts.append(
            Draft(
                EscalationRaised(
                    id="e1",
                    phase="plan",
                    round=1,
                    source="policy",
                    cause="policy",
                    question=question,
                )
            )
        )
    tip, _ = log.append(slug, drafts, None)
    return tip.oid, replay(slug, (s.event for s in log.walk(tip.oid)))


def expected_text(row: dict[str, Any], values: dict[str, Any]) -> str:
    """The row as ``status --json`` prints it inside ``builds``, with ``values`` laid over."""
    shown = {**row, **values}
    return json.dumps(shown, indent=2, ensure_ascii=False).replace("\n", "\n    ")


def test_a_recorded_summary_is_found_at_its_tip_only(
    repo: pygit2.Repository, tmp_path: Path
) -> None:
    tip, state = state_of(repo, "one", QUESTION)
    folder = str(tmp_path / "agentrun")

    summary.record(folder, "one", tip, summarize(state))

    index = summary.load(folder)
    found = index.entry("one", tip)
    assert found is not None
    assert index.entry("one", OTHER) is None  # another tip of the log: read it again
    assert index.entry("two", tip) is None
    assert found["cells"] == ["one", "plan@1", "1", "e1", "-", "0", "-"]
    assert (found["state"], found["status"], found["approval"]) == ("parked", "running", False)
    row = summarize(state)["row"]
    assert row["escalation"]["question"] == QUESTION
    text = summary.row_text(found, ['"stopped"', '"me@host"', "true"])
    assert text == expected_text(row, {"state": "stopped", "runner": "me@host", "archived": True})


def test_later_records_win_and_a_rewrite_keeps_only_what_is_given(tmp_path: Path) -> None:
    folder = str(tmp_path / "agentrun")
    first = summary.entry(fake("one", "running"))
    second = summary.entry(fake("one", "complete"))
    summary.add(folder, [("one", TIP, first), ("one", TIP, second), ("two", OTHER, first)])
    index = summary.load(folder)
    assert index.records == 3
    assert index.entry("one", TIP) == second
    summary.rewrite(folder, [("two", OTHER, first)], ("c" * 40, [("old", TIP)]))
    index = summary.load(folder)
    assert index.records == 3  # the base line, the build, the archived set
    assert index.entry("one", TIP) is None
    assert index.entry("two", OTHER) == first
    assert index.archived_at("c" * 40) == [("old", TIP)]
    assert index.archived_at("d" * 40) is None  # the archive moved: list it again
    assert index.archived_at(None) == []


def test_torn_edited_and_foreign_records_are_misses(tmp_path: Path) -> None:
    folder = str(tmp_path / "agentrun")
    file = Path(summary.path(folder))
    torn = summary._build("torn", TIP, summary.entry(fake("torn", "running")))
    edited = summary._build("edited", TIP, summary.entry(fake("edited", "running")))
    edited = edited.replace('"state": \x00', '"state": "complete"')  # by hand, crc kept
    assert edited.count('"complete"') == 1
    file.parent.mkdir()
    file.write_text(torn[: len(torn) // 2])  # a writer that stopped half way
    whole = summary.entry(fake("whole", "running"))
    summary.add(folder, [("whole", TIP, whole)])
    with file.open("a") as fh:
        fh.write(edited + foreign("foreign", TIP) + "garbage\n[1, 2\n")
    last = summary.entry(fake("last", "running"))
    summary.add(folder, [("last", TIP, last)])

    index = summary.load(folder)

    assert index.entry("whole", TIP) == whole
    assert index.entry("last", TIP) == last
    assert index.entry("torn", TIP) is None
    assert index.entry("edited", TIP) is None
    assert index.entry("foreign", TIP) is None


def test_an_appender_rewrites_a_file_grown_well_past_its_last_rewrite(tmp_path: Path) -> None:
    folder = str(tmp_path / "agentrun")
    summary.rewrite(folder, [], None)
    entries = [summary.entry(fake("busy", "running", n)) for n in range(2)]
    size = len(summary._build("busy", TIP, entries[0]))
    appended = 2 * summary.GROWTH_SLACK // size + 2
    for n in range(appended):  # a runner appending to one build, with nobody reading status
        summary.add(folder, [("busy", f"{n:040x}", entries[n % 2])])
    index = summary.load(folder)
    assert index.records < appended
    assert index.entry("busy", f"{0:040x}") is None  # rewritten away
    assert index.entry("busy", f"{appended - 1:040x}") == entries[(appended - 1) % 2]
    assert Path(summary.path(folder)).stat().st_size < summary.GROWTH_SLACK + 2 * size


def test_a_folder_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    folder = str(blocked / "agentrun")
    summary.add(folder, [("one", TIP, summary.entry(fake("one", "running")))])
    summary.rewrite(folder, [], None)
    assert summary.load(folder).builds == {}
    assert blocked.read_text() == "not a folder"


def test_a_graph_has_two_slots_per_task() -> None:
    made = fake("tasks", "running")
    row = made["row"]
    row["tasks"] = [
        {"id": t, "state": "running", "phase": "implement@1", "runner": None, "deps": []}
        for t in ("alpha", "beta")
    ]
    made["tasks"] = [[t, "running", "implement@1", "1", "-", "0", "-"] for t in ("alpha", "beta")]
    found = summary.entry(made)
    values = ['"running"', "null", "false", '"stopped"', "null", '"running"', '"r@h"']
    tasks = [{**row["tasks"][0], "state": "stopped"}, {**row["tasks"][1], "runner": "r@h"}]
    assert summary.row_text(found, values) == expected_text(row, {"tasks": tasks})


def fake(slug: str, state: str, n: int = 0) -> dict[str, Any]:
    row = {"slug": slug, "state": state, "created_at": None, "runner": None, "archived": False}
    row |= {"n": n, "tasks": []}
    return {
        "row": row,
        "status": state,
        "approval": False,
        "cells": [slug, "plan@1", "1", "-", "-", "0", "-"],
        "tasks": [],
    }


def foreign(slug: str, tip: str) -> str:
    """A whole record as another agentrun release would write it."""
    entry = summary.entry(fake(slug, "running"))
    text = entry.pop("json")
    head = json.dumps(["0.0.1/1", "build", slug, tip, entry, len(text)], separators=(",", ":"))
    crc = zlib.crc32(f"{head[:-1]}\n{text}".encode())
    return f"{head[:-1]},{crc}]\n{text}\n"
