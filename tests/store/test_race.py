"""Two real processes appending to one build: compare-and-swap loses nothing (DESIGN §2)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pygit2
import pytest

from agentrun.events import BuildCreated, HumanActor, ObservationRecorded
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

SLUG = "race"
PER_WRITER = 1000

# Each writer waits for the start signal, then appends PER_WRITER events one by one.
# On a lost race it re-reads the tip and re-appends, as the kernel does (never blindly).
WRITER = """
import pathlib, sys, time
import pygit2
from agentrun.errors import ConcurrentUpdateError
from agentrun.events import ObservationRecorded
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

path, slug, name, count, go = sys.argv[1:]
while not pathlib.Path(go).exists():
    time.sleep(0.001)
log = EventLog(pygit2.Repository(path), writer=name)
retries = 0
for i in range(int(count)):
    while True:
        draft = Draft(ObservationRecorded(phase=name, text=str(i)))
        try:
            log.append(slug, [draft], log.tip(slug))
            break
        except ConcurrentUpdateError:
            retries += 1
print(retries)
"""


@pytest.mark.slow
def test_two_processes_lose_no_events(repo: pygit2.Repository, repo_path: Path) -> None:
    log = EventLog(repo)
    created = BuildCreated(goal="race", base_ref="main", base_sha="a" * 40, branch="agentrun/race")
    log.append(SLUG, [Draft(created, HumanActor(login="ada"))], None)

    go = repo_path.parent / "go"
    writers = {
        name: subprocess.Popen(
            [sys.executable, "-c", WRITER, str(repo_path), SLUG, name, str(PER_WRITER), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("writer-a", "writer-b")
    }
    time.sleep(0.5)  # let both interpreters start and wait on the signal
    go.touch()
    results = {name: proc.communicate(timeout=300) for name, proc in writers.items()}
    for name, proc in writers.items():
        assert proc.returncode == 0, f"{name} failed:\n{results[name][1]}"

    events = log.read(SLUG)
    assert len(events) == 1 + 2 * PER_WRITER
    assert [s.event.seq for s in events] == list(range(1, 2 + 2 * PER_WRITER))
    for name in writers:
        mine = [s.event for s in events if s.event.writer == name]
        texts = [e.payload.text for e in mine if isinstance(e.payload, ObservationRecorded)]
        assert texts == [str(i) for i in range(PER_WRITER)]  # all there, in each writer's order
        assert {e.payload.phase for e in mine if isinstance(e.payload, ObservationRecorded)} == {
            name
        }
    assert Counter(s.event.writer for s in events[1:]) == {"writer-a": 1000, "writer-b": 1000}
    # The writers really ran at the same time: their events interleave in the log.
    switches = sum(1 for a, b in pairwise(events[1:]) if a.event.writer != b.event.writer)
    assert switches > 1
    retries = {name: int(out.strip()) for name, (out, _) in results.items()}
    print(f"writer switches: {switches}, retries after lost races: {retries}")
