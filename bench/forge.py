"""What a GitHub Action build costs the forge and the remote, per phase; and a no-op sweep.

    .venv/bin/python bench/forge.py [--quick]

1. A build of 8 phases (plan, plan-review, implement, code-review, three verify commands,
   one finalize command), started by ``git agentrun action`` from GitHub's example
   ``issues.labeled`` payload, against Prism serving GitHub's API description behind the
   recording proxy of ``tests/support/prism.py``. The origin is a bare repository on
   ``file://`` with ``receive.unpackLimit=1``, so every push it receives is kept as one
   pack: the bytes pushed are the sizes of those packs. Requests are counted at the
   proxy. Baseline in the same run: the same refs (build branch, build log, notes) pushed
   once, by a plain ``git push``, to a fresh origin that already has the base branch.
2. A no-op ``git agentrun action`` on the ``schedule`` event over N parked builds (no new
   comments), each run in a fresh clone as a CI job would be. Baseline in the same run:
   ``git agentrun sweep --remote origin`` in a fresh clone (the same fetch and sweep,
   without reading the forge).

Needs ``npm ci --prefix tests/clients`` (Prism and GitHub's descriptions).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pygit2
from _common import IDENTITY

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.prism import (  # noqa: E402  (the tests' proxy, reused as the mock GitHub)
    REPOSITORY,
    GitHubAPI,
    serve_github,
)

from agentrun.config import Config  # noqa: E402
from agentrun.events import BuildCreated, EscalationRaised, HumanActor  # noqa: E402
from agentrun.kernel.draft import Draft  # noqa: E402
from agentrun.store.log import EventLog  # noqa: E402

EXAMPLES = ROOT / "tests/clients/node_modules/@octokit/webhooks-examples/api.github.com/index.json"
PHASES = 8
CONFIG = """\
[roles]
default = ["scripted"]

[runtimes.scripted]
kind = "script"
script = "agent-script.toml"

[[verify]]
name = "tests"
command = "true"

[[verify]]
name = "lint"
command = "true"

[[verify]]
name = "types"
command = "true"

[[finalize]]
name = "notes"
command = "true"
"""
# The implement phase writes about 40 KB of source, as a small real change would.
SCRIPT = """\
[[step]]
phase = "implement"
write = { "greeting.py" = %s }
"""


def git(cwd: Path, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}")
    return done.stdout.strip()


def labeled_payload(number: int) -> dict[str, Any]:
    """GitHub's example ``issues.labeled`` payload, adapted to the trigger label."""
    entries = json.loads(EXAMPLES.read_text())
    issues = next(e for e in entries if e["name"] == "issues")
    payload: dict[str, Any] = next(x for x in issues["examples"] if x["action"] == "labeled")
    payload["label"]["name"] = "agentrun"
    payload["issue"].update(number=number, title="Fix the greeting", body="Say hello.")
    payload["repository"].update(full_name=REPOSITORY, default_branch="main")
    return payload


def bare(path: Path, env: dict[str, str]) -> Path:
    git(path.parent, "init", "-q", "--bare", "-b", "main", str(path), env=env)
    git(path, "config", "receive.unpackLimit", "1", env=env)
    return path


def pack_bytes(origin: Path) -> tuple[int, int]:
    packs = list((origin / "objects" / "pack").glob("*.pack"))
    return len(packs), sum(p.stat().st_size for p in packs)


def seed(root: Path, env: dict[str, str]) -> tuple[Path, Path]:
    origin = bare(root / "origin.git", env)
    work = root / "seed"
    git(root, "clone", "-q", origin.as_uri(), str(work), env=env)
    (work / "README.md").write_text("hello\n")
    (work / ".agentrun.toml").write_text(CONFIG)
    body = "".join(
        f"def greet_{i}(name):\n    return f'hello {{name}} {i}'\n\n" for i in range(800)
    )
    (work / "agent-script.toml").write_text(SCRIPT % json.dumps(body))
    git(work, "add", "-A", env=env)
    git(work, "commit", "-q", "-m", "initial", env=env)
    git(work, "push", "-q", "origin", "HEAD:main", env=env)
    return origin, work


def action_env(api: GitHubAPI, root: Path, name: str, payload: object | None) -> dict[str, str]:
    env = {**os.environ, **IDENTITY, **api.env(), "GITHUB_EVENT_NAME": name}
    if payload is not None:
        path = root / f"{name}.json"
        path.write_text(json.dumps(payload))
        env["GITHUB_EVENT_PATH"] = str(path)
    return env


def build_cost(root: Path, api: GitHubAPI, env: dict[str, str]) -> None:
    origin, _ = seed(root, env)
    before_packs, before_bytes = pack_bytes(origin)
    job = root / "job"
    git(root, "clone", "-q", origin.as_uri(), str(job), env=env)
    api.clear()
    done = subprocess.run(
        ["git", "agentrun", "action"],
        cwd=job,
        env=action_env(api, root, "issues", labeled_payload(7)),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"git agentrun action failed: {done.stdout}{done.stderr}")
    slug = EventLog(pygit2.Repository(str(origin))).slugs()[0]
    events = [s.event.type for s in EventLog(pygit2.Repository(str(origin))).read(slug)]
    phases = sum(1 for t in events if t.endswith(".started") and t != "session.started")
    packs, pushed = pack_bytes(origin)
    packs, pushed = packs - before_packs, pushed - before_bytes
    requests = api.requests
    refused = api.refused()

    baseline = bare(root / "baseline.git", env)
    git(job, "push", "-q", baseline.as_uri(), "origin/main:refs/heads/main", env=env)
    base_bytes = pack_bytes(baseline)[1]
    git(
        job,
        "push",
        "-q",
        "--no-verify",
        baseline.as_uri(),
        f"refs/heads/agentrun/{slug}:refs/heads/agentrun/{slug}",
        f"refs/agentrun/builds/{slug}:refs/agentrun/builds/{slug}",
        "refs/notes/agentrun:refs/notes/agentrun",
        env=env,
    )
    plain = pack_bytes(baseline)[1] - base_bytes

    print(f"build {slug}: {events[-1]}, {len(events)} events, {phases} phases")
    if phases != PHASES:
        print(f"warning: expected {PHASES} phases")
    print(
        f"forge requests: {len(requests)} ({len(requests) / phases:.1f} per phase), "
        f"{len(refused)} refused by GitHub's description"
    )
    kinds = Counter(f"{r.method} {_template(r.path)}" for r in requests)
    for kind, count in kinds.most_common():
        print(f"  {count:4d}  {kind}")
    print(
        f"pushed: {pushed:,} bytes in {packs} pushes ({pushed / phases:,.0f} bytes per phase); "
        f"plain git push of the same refs: {plain:,} bytes"
    )
    print(f"ratio pushed/plain-push: {pushed / plain:.2f}")


def _template(path: str) -> str:
    parts = path.split("/")
    return "/".join("N" if p.isdigit() or len(p) == 40 else p for p in parts)


def parked_builds(root: Path, count: int, env: dict[str, str]) -> Path:
    origin, work = seed(root, env)
    repo = pygit2.Repository(str(work))
    log = EventLog(repo)
    base = str(repo.head.target)
    data = Config().model_dump(mode="json")
    data["roles"] = {"default": ["scripted"]}
    data["runtimes"] = {"scripted": {"kind": "script", "script": "agent-script.toml"}}
    data["forge"]["kind"] = "github"
    for n in range(count):
        slug = f"issue-{n + 1}-parked"
        created = BuildCreated(
            goal=f"Goal {n}",
            base_ref="main",
            base_sha=base,
            branch=f"agentrun/{slug}",
            source="issue",
            issue=f"{REPOSITORY}#{n + 1}",
            config=data,
        )
        question = EscalationRaised(
            id="e1", phase="plan", round=1, source="policy", cause="policy", question="Which?"
        )
        log.append(slug, [Draft(created, HumanActor(login="bench")), Draft(question)], None)
    git(work, "push", "-q", "origin", "refs/agentrun/*:refs/agentrun/*", env=env)
    return origin


def timed(cwd: Path, argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stdout}{done.stderr}")
    return seconds


def sweep_cost(root: Path, api: GitHubAPI, env: dict[str, str], count: int, reps: int) -> None:
    origin = parked_builds(root, count, env)
    api.clear()
    api.respond("GET", rf"/repos/{REPOSITORY}/issues/\d+/comments", [])  # nothing new
    action, plain = [], []
    for rep in range(reps):
        for kind, samples in (("action", action), ("plain", plain)):
            clone = root / f"{kind}-{rep}"
            git(root, "clone", "-q", origin.as_uri(), str(clone), env=env)
            if kind == "action":
                argv = ["git", "agentrun", "action"]
                run_env = action_env(api, root, "schedule", None)
            else:
                argv, run_env = ["git", "agentrun", "sweep", "--remote", "origin"], env
            samples.append(timed(clone, argv, run_env))
    requests = len(api.requests) / reps
    a, p = statistics.median(action), statistics.median(plain)
    print(
        f"no-op action sweep over {count} parked builds: {a * 1000:.0f} ms "
        f"({requests:.0f} forge requests); git agentrun sweep: {p * 1000:.0f} ms"
    )
    print(f"ratio action-sweep/sweep: {a / p:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    args = parser.parse_args()
    count, reps = (10, 1) if args.quick else (100, 3)
    bin_dir = str(Path(sys.executable).parent)  # git-agentrun of this environment
    env = {**os.environ, **IDENTITY, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    os.environ["PATH"] = env["PATH"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with serve_github(root) as api:  # the tests' mock GitHub
            (root / "build").mkdir()
            build_cost(root / "build", api, env)
            (root / "sweep").mkdir()
            sweep_cost(root / "sweep", api, env, count, reps)


if __name__ == "__main__":
    main()
