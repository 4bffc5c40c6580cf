"""Secret shapes: recall on the fake corpus, false positives on real projects, speed.

    .venv/bin/python bench/secrets.py [--quick]

``recall``: the fakes of tests/secrets/corpus.py (every provider's documented format,
random bodies) under several seeds; a fake counts as caught when ``scrub`` removes it
and ``shape_in`` names a line of it.
``false positives``: every line of popular sdists (requests, httpx, SQLAlchemy, kombu and
others whose docs and tests are full of URLs with passwords and Authorization headers),
downloaded now with pip, that ``shape_in`` flags, each listed for a person to judge, and
the count per project.
``scrub``: median time to scrub a typical 20 KB transcript, and one event message,
against the 8 shapes agentrun knew before (kept here only as the baseline).
Targets: recall 100% on the test seeds, no false positive.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This file is named like the standard library's `secrets`: its folder must not shadow it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

from agentrun import secrets  # noqa: E402

PROJECTS = (
    "requests==2.32.3",
    "rich==13.9.4",
    "httpx==0.28.1",
    "sqlalchemy==2.0.36",
    "kombu==5.4.2",
    "boltons==24.1.0",
    "tabulate==0.9.0",
    "toolz==1.0.0",
    "more-itertools==10.5.0",
)

# --- the baseline: the 8 shapes before data/shapes.toml ------------------------------------
_NOT_WORD = r"(?<![A-Za-z0-9_-])"
_MIXED = r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"
OLD_SHAPES = (
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    _NOT_WORD + r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}",
    r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{36,}",
    _NOT_WORD + r"glpat-[A-Za-z0-9_-]{20,}",
    r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])",
    _NOT_WORD + r"xox[abprs]-[A-Za-z0-9-]{10,}",
    _NOT_WORD + r"sk-ant-[A-Za-z0-9_-]{32,}",
    _NOT_WORD + r"sk-(?:proj-|svcacct-|admin-)?" + _MIXED + r"[A-Za-z0-9_-]{20,}",
)
OLD = re.compile("|".join(f"(?:{rx})" for rx in OLD_SHAPES))
OLD_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY"
    r"(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)


def old_scrub(text: str) -> str:
    return OLD.sub("[redacted]", OLD_BLOCK.sub("[redacted]", text))


def load_corpus() -> ModuleType:
    path = HERE.parent / "tests" / "secrets" / "corpus.py"
    spec = importlib.util.spec_from_file_location("secrets_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def caught(fake: Any) -> bool:
    lines = fake.line.splitlines()
    return fake.secret not in secrets.scrub(fake.line) and any(map(secrets.shape_in, lines))


def recall(corpus: ModuleType, seeds: range) -> None:
    fakes = [f for seed in seeds for f in corpus.fakes(seed)]
    missed = [f for f in fakes if not caught(f)]
    old_missed = [f for f in fakes if f.secret in old_scrub(f.line)]
    providers, last = len(corpus.PROVIDERS), seeds.stop - 1
    print(f"corpus: {len(fakes)} fakes of {providers} providers, seeds {seeds.start}..{last}")
    share = 100 * (1 - len(missed) / len(fakes))
    print(f"recall: {len(fakes) - len(missed)}/{len(fakes)} ({share:.2f}%)")
    print(f"recall of the 8 old shapes: {len(fakes) - len(old_missed)}/{len(fakes)}")
    for fake in missed:
        print(f"  missed {fake.provider}: {fake.line[:80]!r}")


def false_positives(workdir: Path) -> None:
    for project in PROJECTS:
        target = workdir / project
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             project, "-d", str(target), "-q"],
            check=True, capture_output=True,
        )  # fmt: skip
        (archive,) = target.glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
        files = hits = 0
        for path in sorted(p for p in target.rglob("*") if p.is_file() and p != archive):
            data = path.read_bytes()
            if b"\0" in data[:8192]:
                continue
            files += 1
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                kind = secrets.shape_in(line)
                if kind is not None:
                    hits += 1
                    where = path.relative_to(target)
                    print(f"  {project} {where}:{number}: {kind}: {line.strip()[:90]}")
        print(f"false-positive candidates in {project}: {hits} in {files} files")


def transcript(rng: random.Random, corpus: ModuleType, size: int = 20_000) -> str:
    """What an agent's session prints: prose, commands, code, diffs, JSON; two secrets."""
    words = [
        *("the", "a", "to", "of", "and", "in", "is", "it", "that", "this", "test", "file"),
        *("function", "value", "return", "config", "build", "agent", "review", "plan"),
        *("commit", "branch", "token", "key", "access", "password", "secret", "api"),
        *("request", "error", "passed", "failed", "module", "import", "class", "def"),
        *("self", "path", "json", "output"),
    ]
    fakes = corpus.fakes(rng.randrange(10**6))
    lines: list[str] = []
    while sum(map(len, lines)) < size:
        pick = rng.random()
        if pick < 0.45:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 16))) + ".")
        elif pick < 0.65:
            name = "_".join(rng.choice(words) for _ in range(2))
            lines.append(f"    {name} = {rng.choice(words)}({rng.randint(0, 99)}, key={name!r})")
        elif pick < 0.8:
            lines.append(f"$ git log --oneline | head  # {rng.getrandbits(160):040x}")
        elif pick < 0.95:
            text = " ".join(rng.choice(words) for _ in range(6))
            lines.append(
                f'{{"type": "tool_use", "id": "{rng.getrandbits(64):016x}", "input": "{text}"}}'
            )
        else:
            lines.append(f"+{rng.choice(words)} = {rng.randint(0, 10**6)}")
    lines.insert(len(lines) // 3, fakes[0].line)
    lines.insert(2 * len(lines) // 3, fakes[40].line)
    return "\n".join(lines)


def median_ms(scrub: Callable[[str], str], text: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        scrub(text)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def speed(corpus: ModuleType, reps: int) -> None:
    text = transcript(random.Random(7), corpus)
    t0 = time.perf_counter()
    secrets.scrub(text)  # the first call reads the rules and compiles those it needs
    cold = (time.perf_counter() - t0) * 1000
    old, new = [], []
    for _ in range(reps):  # interleaved, so load on the machine hits both alike
        old.append(median_ms(old_scrub, text, 5))
        new.append(median_ms(secrets.scrub, text, 5))
    o, n = statistics.median(old), statistics.median(new)
    said = {"phase": "implement", "text": "ran the tests: 42 passed"}
    event = json.dumps({"v": 1, "seq": 7, "type": "observation.recorded", "payload": said})
    old_event = median_ms(old_scrub, event, 2000) * 1000
    new_event = median_ms(secrets.scrub, event, 2000) * 1000
    size = len(text) // 1000
    print(f"scrub of a {size} KB transcript: {n:.2f} ms ({o:.2f} ms with the 8 old shapes)")
    print(f"scrub of one event: {new_event:.1f} µs ({old_event:.1f} µs with the 8 old shapes)")
    print(f"first scrub in a process (rules read and compiled): {cold:.1f} ms")
    print(f"ratio scrub new/old: {n / o:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds and runs (smoke test)")
    args = parser.parse_args()
    corpus = load_corpus()
    recall(corpus, range(corpus.SEED, corpus.SEED + (3 if args.quick else 20)))
    with tempfile.TemporaryDirectory() as workdir:
        false_positives(Path(workdir))
    speed(corpus, 3 if args.quick else 15)


if __name__ == "__main__":
    main()
