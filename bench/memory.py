"""Memory across builds: what reading ``refs/agentrun/memory`` adds to a build, and the
size of the block it puts in a prompt.

    .venv/bin/python bench/memory.py [--facts 200] [--repeat 3] [--quick]

For 0 and ``--facts`` accepted facts: the time a fresh process takes to read the memory
log and render the prompt's block (what a build's first prompt pays), and the wall time
of a whole scripted build (plan, review, implement, review), each the median of
``--repeat`` runs; the build without facts is the baseline, measured in the same run.
Then the block's size in characters for a few counts of facts, against the default
``[memory] max_chars`` of 4000.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import IDENTITY

SETUP = """
import sys
import pygit2
from agentrun.store.facts import add
from agentrun.events import HumanActor
repo = pygit2.Repository(sys.argv[1])
for n in range(int(sys.argv[2])):
    text = f"fact {n}: the module src/part{n}.py keeps its state in one dict"
    add(repo, text, "bench", accepted=True, actor=HumanActor(login="bench"),
        paths=(f"src/part{n}.py",))
"""

READ = """
import sys, time
started = time.perf_counter()
import pygit2
from agentrun.kernel.memory import block
from agentrun.store.memory import read
repo = pygit2.Repository(sys.argv[1])
begun = time.perf_counter()
facts = read(repo).facts
text = block(facts, [], 4000)  # a build's first prompt: no changed paths yet
read_ms = (time.perf_counter() - begun) * 1000
begun = time.perf_counter()
block(facts, ["src/part3.py"], 4000)  # a later prompt: every fact's globs compiled once
print(read_ms, len(text), (time.perf_counter() - begun) * 1000)
"""

BUILD = """
import sys, time
import pygit2
from agentrun.commands.build import create_build, run_build
repo = pygit2.Repository(sys.argv[1])
started = time.perf_counter()
slug = create_build(repo, sys.argv[2]).slug
outcome = run_build(repo, slug)
assert outcome.state.state_name == "complete", outcome.state.status
print((time.perf_counter() - started) * 1000)
"""

CONFIG = """\
[roles]
default = ["scripted"]

[runtimes.scripted]
kind = "script"
script = "script.toml"
"""  # no verify step: a passing one would add a fact, and each run must read the same log
SCRIPT = '[[step]]\nphase = "implement"\nwrite = { "change.txt" = "changed\\n" }\n'


def env() -> dict[str, str]:
    return {**os.environ, **IDENTITY}


def python(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env(), capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return done.stdout.strip()


def make_repo(path: Path, facts: int) -> Path:
    path.mkdir(parents=True)
    (path / ".agentrun.toml").write_text(CONFIG)
    (path / "script.toml").write_text(SCRIPT)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=path, env=env(), check=True)
    if facts:
        python(SETUP, str(path), str(facts))
    return path


def median_ms(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    facts, repeat = (args.facts, args.repeat) if not args.quick else (40, 1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reads: dict[int, list[float]] = {0: [], facts: []}
        matched: dict[int, list[float]] = {0: [], facts: []}
        builds: dict[int, list[float]] = {0: [], facts: []}
        sizes: dict[int, int] = {}
        repos = {n: make_repo(root / f"repo-{n}", n) for n in (0, facts)}
        for turn in range(repeat):
            # Alternating which goes first: the first build of a round pays for a cold cache.
            order = list(repos.items()) if turn % 2 == 0 else list(repos.items())[::-1]
            for n, repo in order:
                ms, size, match_ms = python(READ, str(repo)).split()
                reads[n].append(float(ms))
                matched[n].append(float(match_ms))
                sizes[n] = int(size)
                builds[n].append(float(python(BUILD, str(repo), f"goal {len(builds[n])}")))
        for n in (1, 5, 20):
            repo = make_repo(root / f"sized-{n}", n)
            sizes[n] = int(python(READ, str(repo)).split()[1])
        none, many = median_ms(reads[0]), median_ms(reads[facts])
        print(f"memory read + block: 0 facts {none:.1f} ms, {facts} facts {many:.1f} ms")
        paths = median_ms(matched[facts])
        print(f"block against changed paths, first time in a process: {facts} facts {paths:.1f} ms")
        plain, full = median_ms(builds[0]), median_ms(builds[facts])
        print(f"scripted build: 0 facts {plain:.0f} ms, {facts} facts {full:.0f} ms")
        print(f"ratio build with {facts} facts/without: {full / plain:.3f}")
        for n in sorted(sizes):
            print(f"block with {n} accepted facts: {sizes[n]} characters (max_chars 4000)")


if __name__ == "__main__":
    main()
