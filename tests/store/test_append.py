"""The one append helper: re-read, re-decide, compare-and-swap, bounded retries (DESIGN §2)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pygit2
import pytest

from agentrun.errors import ConcurrentUpdateError, EscalationError
from agentrun.events import BuildCreated, HumanActor, ObservationRecorded
from agentrun.kernel.draft import Draft
from agentrun.kernel.state import BuildState
from agentrun.store.append import append_decided
from agentrun.store.log import EventLog

SLUG = "race"
PER_WRITER = 150

# Each writer records the seq it decided from: a draft decided from a stale state would
# carry a seq that is not its parent's.
WRITER = """
import pathlib, sys, time
import pygit2
from agentrun.events import ObservationRecorded
from agentrun.kernel.draft import Draft
from agentrun.store.append import append_decided
from agentrun.store.log import EventLog

path, slug, name, count, go = sys.argv[1:]
while not pathlib.Path(go).exists():
    time.sleep(0.001)
log = EventLog(pygit2.Repository(path), writer=name)
for _ in range(int(count)):
    append_decided(
        log, slug, lambda state: [Draft(ObservationRecorded(phase=name, text=str(state.seq)))]
    )
"""


def _created(log: EventLog) -> None:
    created = BuildCreated(goal="race", base_ref="main", base_sha="a" * 40, branch="agentrun/race")
    log.append(SLUG, [Draft(created, HumanActor(login="ada"))], None)


def _decided_from_the_tip(log: EventLog, writers: set[str], each: int) -> None:
    events = [s.event for s in log.read(SLUG)]
    assert len(events) == 1 + len(writers) * each
    assert [e.seq for e in events] == list(range(1, 2 + len(writers) * each))
    for event in events[1:]:
        assert isinstance(event.payload, ObservationRecorded)
        assert int(event.payload.text) == event.seq - 1  # decided from its parent's state
    for name in writers:
        assert sum(1 for e in events if e.writer == name) == each


@pytest.mark.slow
def test_two_processes_each_decide_from_the_tip_they_append_on(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    log = EventLog(repo)
    _created(log)
    go = repo_path.parent / "go"
    writers = {
        name: subprocess.Popen(
            [sys.executable, "-c", WRITER, str(repo_path), SLUG, name, str(PER_WRITER), str(go)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("writer-a", "writer-b")
    }
    time.sleep(0.5)  # both interpreters start and wait on the signal
    go.touch()
    for name, proc in writers.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name} failed:\n{err}"
    _decided_from_the_tip(log, set(writers), PER_WRITER)


def test_threads_each_decide_from_the_tip_they_append_on(repo_path: Path) -> None:
    _created(EventLog(pygit2.Repository(str(repo_path))))
    go = threading.Event()
    errors: list[BaseException] = []

    def write(name: str) -> None:
        # One repository object a thread: pygit2's are not shared between threads.
        log = EventLog(pygit2.Repository(str(repo_path)), writer=name)
        go.wait()
        try:
            for _ in range(40):
                append_decided(
                    log,
                    SLUG,
                    lambda state: [Draft(ObservationRecorded(phase=name, text=str(state.seq)))],
                )
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"t{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    _decided_from_the_tip(EventLog(pygit2.Repository(str(repo_path))), {"t0", "t1", "t2"}, 40)


def test_nothing_to_append_writes_nothing(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    _created(log)
    before = log.tip_oid(SLUG)
    assert append_decided(log, SLUG, lambda state: None) is None
    assert append_decided(log, SLUG, lambda state: []) is None
    assert log.tip_oid(SLUG) == before


def test_the_result_names_what_was_written_and_the_state_it_came_from(
    repo: pygit2.Repository,
) -> None:
    log = EventLog(repo)
    _created(log)
    done = append_decided(
        log, SLUG, lambda state: [Draft(ObservationRecorded(phase="p", text="one"))]
    )
    assert done is not None
    assert done.decided_from.seq == 1
    assert done.tip.seq == 2 and done.tip.oid == log.tip_oid(SLUG)
    assert [s.event.seq for s in done.stored] == [2]


def test_a_refusal_from_decide_reaches_the_caller_and_writes_nothing(
    repo: pygit2.Repository,
) -> None:
    log = EventLog(repo)
    _created(log)
    before = log.tip_oid(SLUG)

    def refuse(state: BuildState) -> list[Draft]:
        raise EscalationError(f"build {state.slug} has no open escalation to answer")

    with pytest.raises(EscalationError, match="no open escalation"):
        append_decided(log, SLUG, refuse)
    assert log.tip_oid(SLUG) == before


def test_giving_up_says_which_write_and_keeps_the_rivals_events(repo: pygit2.Repository) -> None:
    log = EventLog(repo)
    _created(log)
    rival = EventLog(repo, writer="rival")
    seen: list[int] = []

    def decide(state: BuildState) -> list[Draft]:
        seen.append(state.seq)
        # Another writer appends between this read and our write, every time.
        rival.append(SLUG, [Draft(ObservationRecorded(phase="rival", text="x"))], rival.tip(SLUG))
        return [Draft(ObservationRecorded(phase="mine", text="y"))]

    with pytest.raises(ConcurrentUpdateError, match="the cursor of race: other writers kept"):
        append_decided(log, SLUG, decide, what="the cursor of race", attempts=3)
    assert seen == [1, 2, 3]  # re-read and re-decided after every lost race
    events = [s.event for s in log.read(SLUG)]
    assert [e.writer for e in events[1:]] == ["rival"] * 3
