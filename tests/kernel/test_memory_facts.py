"""The memory's fold and the prompt's block: forgotten is final, paths first, max_chars."""

from __future__ import annotations

from datetime import UTC, datetime

from agentrun.events import (
    Event,
    KernelActor,
    MemoryAccepted,
    MemoryAdded,
    MemoryForgotten,
)
from agentrun.kernel.memory import HEADING, block, chosen, entry, fold, next_id, recurring

TS = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def events(*payloads: object) -> list[Event]:
    return [
        Event(seq=n, ts=TS, actor=KernelActor(), writer="t", payload=p)  # type: ignore[arg-type]
        for n, p in enumerate(payloads, 1)
    ]


def added(n: int, text: str, paths: tuple[str, ...] = (), state: str = "accepted") -> MemoryAdded:
    return MemoryAdded(
        id=f"m-{n}",
        text=text,
        who="verify",
        build="b",
        phase="verify:t@1",
        paths=paths,
        state=state,  # type: ignore[arg-type]
    )


def test_forgotten_is_final_and_proposed_waits_for_an_accept() -> None:
    facts = fold(
        events(
            added(1, "one"),
            added(2, "two", state="proposed"),
            MemoryForgotten(id="m-1", by="alice"),
            MemoryAccepted(id="m-1", by="bob"),  # merged from a clone that had not seen it
            MemoryAccepted(id="m-9", by="bob"),  # no such fact: nothing
        )
    )
    assert {f.id: f.state for f in facts.values()} == {"m-1": "forgotten", "m-2": "proposed"}
    assert block(facts, [], 4000) == ""
    facts = fold(events(added(2, "two", state="proposed"), MemoryAccepted(id="m-2", by="bob")))
    assert facts["m-2"].source == "verify (build b, verify:t@1), accepted by bob"
    assert next_id(facts) == "m-3"


def test_facts_about_the_builds_paths_come_first_then_the_newest() -> None:
    facts = fold(
        events(
            added(1, "oldest, about the API", ("src/api/**",)),
            added(2, "general"),
            added(3, "about the docs", ("docs/",)),
            added(4, "newest"),
            added(5, "about the API too", ("*.py",)),
        )
    )
    order = [f.id for f in chosen(facts, ["src/api/routes.py"], 4000)]
    assert order == ["m-5", "m-1", "m-4", "m-3", "m-2"]
    assert [f.id for f in chosen(facts, [], 4000)] == ["m-5", "m-4", "m-3", "m-2", "m-1"]


def test_the_block_stops_at_max_chars_and_names_each_source() -> None:
    facts = fold(events(*(added(n, f"fact number {n} " + "x" * 60) for n in range(1, 11))))
    whole = block(facts, [], 100_000)
    assert whole.startswith(HEADING) and whole.count("\n- m-") == 10
    assert "- m-10, from verify (build b, verify:t@1): fact number 10" in whole
    one = len(entry(facts["m-1"]))
    limit = len(HEADING) + 3 * one + one // 2
    cut = block(facts, [], limit)
    assert len(cut) <= limit
    assert [line[2:6] for line in cut.splitlines() if line.startswith("- m-")] == [
        "m-10",
        "m-9,",
        "m-8,",
    ]
    assert block(facts, [], len(HEADING) + one - 1) == ""  # not even one fits: no block


def test_findings_two_rounds_share_recur() -> None:
    found = recurring(
        [
            (1, ("Add a test for the greeting", "Rename x")),
            (2, ("add a test for  the greeting",)),
            (3, ("Rename y",)),
        ]
    )
    assert found == ["Add a test for the greeting"]
