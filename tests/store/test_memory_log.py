"""refs/agentrun/memory: compare-and-swap appends under a race, and sync between clones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pygit2
from conftest import git, make_repo

from agentrun.events import HumanActor
from agentrun.kernel.memory import block
from agentrun.store import facts
from agentrun.store import memory as store
from agentrun.store.sync import sync

WRITER = """
import sys
import pygit2
from agentrun.store.facts import add
from agentrun.events import HumanActor

repo = pygit2.Repository(sys.argv[1])
for n in range(int(sys.argv[3])):
    add(repo, f"{sys.argv[2]} fact {n}", "w", accepted=True, actor=HumanActor(login="w"))
"""


def clone(url: str, path: Path, name: str) -> pygit2.Repository:
    git(path.parent, "clone", "-q", url, path.name)
    git(path, "config", "user.email", f"{name}@example.com")
    return pygit2.Repository(str(path))


def machines(tmp_path: Path) -> tuple[pygit2.Repository, pygit2.Repository]:
    seed = make_repo(tmp_path / "seed")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    return clone(bare.as_uri(), tmp_path / "a", "a"), clone(bare.as_uri(), tmp_path / "b", "b")


def person(repo: pygit2.Repository, text: str, paths: tuple[str, ...] = ()) -> facts.Added:
    return facts.add(
        repo, text, "alice", accepted=True, actor=HumanActor(login="alice"), paths=paths
    )


def test_two_writers_racing_lose_no_fact_and_share_no_id(tmp_path: Path) -> None:
    repo_path = make_repo(tmp_path / "repo")
    each = 40
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(repo_path), name, str(each)])
        for name in ("left", "right")
    ]
    assert [p.wait(timeout=240) for p in procs] == [0, 0]

    found = store.read(pygit2.Repository(str(repo_path))).facts
    assert len(found) == 2 * each
    assert sorted(found) == sorted(f"m-{n}" for n in range(1, 2 * each + 1))
    texts = {f.text for f in found.values()}
    assert texts == {f"{side} fact {n}" for side in ("left", "right") for n in range(each)}
    # One linear chain: every event's seq is its parent's + 1 (the log's walk checks it).
    log = store.MemoryLog(pygit2.Repository(str(repo_path)))
    assert [s.event.seq for s in log.read(store.NAME)] == list(range(1, 2 * each + 1))


def test_the_same_text_is_one_fact(tmp_path: Path) -> None:
    repo = pygit2.Repository(str(make_repo(tmp_path / "repo")))
    first = person(repo, "Run the tests with  pytest -q")
    again = person(repo, "run the tests with pytest -q")
    assert (first.new, again.new, again.fact.id) == (True, False, "m-1")
    assert list(store.read(repo).facts) == ["m-1"]


def test_sync_carries_facts_both_ways_and_renumbers_a_clash(tmp_path: Path) -> None:
    a, b = machines(tmp_path)
    person(a, "A: the API lives in src/api")
    person(b, "B: migrations need `make db`")  # also m-1, on its own clone
    person(b, "A: the API lives in src/api")  # the same text as A's: one fact after sync
    forgotten = person(b, "B: an old fact")
    facts.forget(b, forgotten.fact.id, "bob")

    assert sync(a, "origin").memory == "pushed 1 event"
    said = sync(b, "origin").memory
    assert said.startswith("re-parented 4 local events onto 1 remote one")
    assert sync(a, "origin").memory.startswith("pulled")

    for repo in (a, b):
        found = store.read(repo).facts
        assert [(f.id, f.text, f.state) for f in found.values()] == [
            ("m-1", "A: the API lives in src/api", "accepted"),
            ("m-2", "B: migrations need `make db`", "accepted"),
            ("m-3", "B: an old fact", "forgotten"),
        ]


def test_a_fact_forgotten_on_one_clone_is_not_injected_on_the_other(tmp_path: Path) -> None:
    a, b = machines(tmp_path)
    person(a, "Use the fixtures in tests/fixtures", ("tests/**",))
    sync(a, "origin")
    sync(b, "origin")
    assert "Use the fixtures" in block(store.read(b).facts, ["tests/test_x.py"], 4000)

    facts.forget(a, "m-1", "alice")
    # B accepts it again before it hears of the forget: the forget still wins.
    facts.accept(b, "m-1", "bob")
    sync(a, "origin")
    sync(b, "origin")
    sync(a, "origin")

    for repo in (a, b):
        assert store.read(repo).facts["m-1"].state == "forgotten"
        assert block(store.read(repo).facts, ["tests/test_x.py"], 4000) == ""
    # Its text stays in the log's history.
    assert "Use the fixtures" in git(Path(b.workdir), "log", "refs/agentrun/memory")


def test_a_secret_in_a_fact_is_scrubbed_before_it_is_written(tmp_path: Path) -> None:
    repo = pygit2.Repository(str(make_repo(tmp_path / "repo")))
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    added = person(repo, f"The deploy token is {token}")
    assert token not in added.fact.text and "[redacted]" in added.fact.text
    history = git(Path(repo.workdir), "log", "-p", "refs/agentrun/memory")
    assert token not in history


def test_renumbered_ids_carry_their_accepts_and_forgets(tmp_path: Path) -> None:
    a, b = machines(tmp_path)
    person(a, "A1")
    sync(a, "origin")
    agent = HumanActor(login="agent")
    facts.add(b, "B1", "agent", accepted=False, actor=agent)  # m-1 here, m-2 after sync
    facts.add(b, "B2", "agent", accepted=False, actor=agent)  # m-2 here, m-3 after sync
    facts.accept(b, "m-2", "bob")  # B2
    facts.forget(b, "m-1", "bob")  # B1

    sync(b, "origin")

    found = store.read(b).facts
    assert {f.id: (f.text, f.state) for f in found.values()} == {
        "m-1": ("A1", "accepted"),
        "m-2": ("B1", "forgotten"),
        "m-3": ("B2", "accepted"),
    }
