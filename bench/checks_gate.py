"""What the forge's CI gate (``[forge] require_checks``) adds to a build and to a sweep.

    .venv/bin/python bench/checks_gate.py [--quick]

1. A build started by ``git agentrun action`` from GitHub's example ``issues.labeled``
   payload (scripted agents, one verify command), against Prism serving GitHub's API
   description behind the tests' recording proxy, with the gate on (the required check
   already green at the first look) and, the baseline in the same run, with it off.
2. ``git agentrun sweep --remote origin`` in a fresh clone over one build that waits for
   its CI (nothing changed since the last look: nothing is recorded), against the same
   sweep over one parked build (the baseline: read, decided, skipped).
3. The size of a failed check's feedback in the next implement round's prompt: at most,
   from a 64 KB job log and a long summary.

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
from pathlib import Path
from typing import Any

import pygit2
from _common import IDENTITY

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.prism import REPOSITORY, GitHubAPI, serve_github  # noqa: E402

from agentrun.events import SeenCheck  # noqa: E402
from agentrun.forge.base import Check  # noqa: E402
from agentrun.kernel.gate import failure_feedback  # noqa: E402
from agentrun.runner.gate import LOG_LIMIT, SUMMARY_LIMIT  # noqa: E402
from agentrun.store.log import EventLog  # noqa: E402

EXAMPLES = ROOT / "tests/clients/node_modules/@octokit/webhooks-examples/api.github.com/index.json"
CONFIG = """\
[roles]
default = ["scripted"]

[runtimes.scripted]
kind = "script"
script = "agent-script.toml"

[[verify]]
name = "tests"
command = "true"
"""
GATE = '\n[forge]\nrequire_checks = ["test"]\n'
SCRIPT = '[[step]]\nphase = "implement"\nwrite = { "greeting.py" = "print(1)\\n" }\n'
CHECK_RUNS = rf"/repos/{REPOSITORY}/commits/[0-9a-f]{{40}}/check-runs"


def git(cwd: Path, *args: str, env: dict[str, str]) -> None:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}")


def labeled_payload() -> dict[str, Any]:
    entries = json.loads(EXAMPLES.read_text())
    issues = next(e for e in entries if e["name"] == "issues")
    payload: dict[str, Any] = next(x for x in issues["examples"] if x["action"] == "labeled")
    payload["label"]["name"] = "agentrun"
    payload["issue"].update(number=7, title="Fix the greeting", body="Say hello.")
    payload["repository"].update(full_name=REPOSITORY, default_branch="main")
    return payload


def seed(root: Path, config: str, env: dict[str, str]) -> Path:
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin), env=env)
    work = root / "seed"
    git(root, "clone", "-q", origin.as_uri(), str(work), env=env)
    (work / ".agentrun.toml").write_text(config)
    (work / "agent-script.toml").write_text(SCRIPT)
    git(work, "add", "-A", env=env)
    git(work, "commit", "-q", "-m", "initial", env=env)
    git(work, "push", "-q", "origin", "HEAD:main", env=env)
    return origin


def check_runs(api: GitHubAPI, state: str) -> None:
    def answer(ex: dict[str, Any]) -> dict[str, Any]:
        done = state == "success"
        run = {
            **ex["check_runs"][0],
            "name": "test",
            "status": "completed" if done else "in_progress",
            "conclusion": "success" if done else None,
        }
        return {"total_count": 1, "check_runs": [run]}

    api.respond("GET", CHECK_RUNS, answer)


def timed(cwd: Path, argv: list[str], env: dict[str, str], codes: tuple[int, ...] = (0,)) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode not in codes:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return seconds


def one_build(root: Path, api: GitHubAPI, env: dict[str, str], gated: bool) -> tuple[float, Path]:
    root.mkdir(parents=True)
    origin = seed(root, CONFIG + (GATE if gated else ""), env)
    job = root / "job"
    git(root, "clone", "-q", origin.as_uri(), str(job), env=env)
    payload = root / "event.json"
    payload.write_text(json.dumps(labeled_payload()))
    run_env = {**env, **api.env(), "GITHUB_EVENT_NAME": "issues"}
    run_env["GITHUB_EVENT_PATH"] = str(payload)
    return timed(job, ["git", "agentrun", "action"], run_env), origin


def events(origin: Path) -> list[str]:
    log = EventLog(pygit2.Repository(str(origin)))
    return [s.event.type for slug in log.slugs() for s in log.read(slug)]


def build_cost(root: Path, api: GitHubAPI, env: dict[str, str], reps: int) -> None:
    api.clear()
    check_runs(api, "success")
    one_build(root / "warm-up", api, env, gated=False)  # Prism's and the OS's caches
    on, off = [], []
    for rep in range(reps):
        seconds, origin = one_build(root / f"on-{rep}", api, env, gated=True)
        on.append(seconds)
        assert "checks.seen" in events(origin) and events(origin)[-1] == "build.completed"
        off.append(one_build(root / f"off-{rep}", api, env, gated=False)[0])
    a, b = statistics.median(on), statistics.median(off)
    print(
        f"build with the gate (check green at once): {a * 1000:.0f} ms; without: {b * 1000:.0f} ms"
    )
    print(f"added by one gate check: {(a - b) * 1000:.0f} ms")
    print(f"ratio gated/ungated build: {a / b:.2f}")


def look_cost(root: Path, api: GitHubAPI, env: dict[str, str], reps: int) -> None:
    """One look in-process: the two requests (check runs, combined status) of ``checks``."""
    from agentrun.forge.base import open_forge

    api.clear()
    check_runs(api, "in_progress")
    repo = root / "look"
    git(root, "init", "-q", str(repo), env=env)
    os.environ.update(api.env())
    forge = open_forge(pygit2.Repository(str(repo)), "github")
    checks = getattr(forge, "checks")  # noqa: B009  (a HostedForge's)
    checks("a" * 40)  # the client's connection, warm
    samples = []
    for _ in range(reps * 10):
        t0 = time.perf_counter()
        checks("a" * 40)
        samples.append(time.perf_counter() - t0)
    look = statistics.median(samples) * 1000
    print(f"one look at the checks (2 requests to the local server): {look:.1f} ms")


def sweep_cost(root: Path, api: GitHubAPI, env: dict[str, str], reps: int) -> None:
    api.clear()
    check_runs(api, "in_progress")
    _, waiting = one_build(root / "waiting", api, env, gated=True)
    before = len(events(waiting))
    # The baseline: a parked build (its implement keeps failing until it asks).
    parked_root = root / "parked"
    parked_root.mkdir(parents=True)
    parked = seed(parked_root, CONFIG.replace('"true"', '"false"') + GATE, env)
    job = parked_root / "job"
    git(parked_root, "clone", "-q", parked.as_uri(), str(job), env=env)
    payload = parked_root / "event.json"
    payload.write_text(json.dumps(labeled_payload()))
    run_env = {**env, **api.env(), "GITHUB_EVENT_NAME": "issues", "GITHUB_EVENT_PATH": str(payload)}
    timed(job, ["git", "agentrun", "action"], run_env)
    sweep_env = {**env, **api.env()}
    wait_s, park_s = [], []
    for rep in range(reps):
        for origin, samples, codes in ((waiting, wait_s, (4,)), (parked, park_s, (0,))):
            clone = root / f"clone-{origin.parent.name}-{rep}"
            git(root, "clone", "-q", origin.as_uri(), str(clone), env=env)
            argv = ["git", "agentrun", "sweep", "--remote", "origin"]
            samples.append(timed(clone, argv, sweep_env, codes))
    grew = len(events(waiting)) - before
    a, b = statistics.median(wait_s), statistics.median(park_s)
    print(
        f"sweep over a build waiting for CI: {a * 1000:.0f} ms ({grew} events added over "
        f"{reps} sweeps); over a parked build: {b * 1000:.0f} ms"
    )
    print(f"ratio waiting-sweep/parked-sweep: {a / b:.2f}")


def feedback_size() -> None:
    from agentrun.runner.gate import _seen

    log = "".join(
        f"line {n}: FAILED tests/test_{n}.py::test_case - assert 1 == 2\n" for n in range(1200)
    )
    check = Check("test", "failure", "failure", "x" * 5000, log, "https://github.com/o/r/runs/1")
    seen: SeenCheck = _seen(check)
    text = failure_feedback(seen, "a" * 40, 1)
    print(
        f"feedback of one failed check: at most {len(text)} characters "
        f"(summary {SUMMARY_LIMIT}, log tail {LOG_LIMIT}, from a {len(log):,}-character log)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repetition (smoke test)")
    args = parser.parse_args()
    reps = 1 if args.quick else 3
    bin_dir = str(Path(sys.executable).parent)  # git-agentrun of this environment
    env = {**os.environ, **IDENTITY, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("GITHUB_ACTIONS", None)
    os.environ["PATH"] = env["PATH"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with serve_github(root) as api:
            look_cost(root, api, env, reps)
            build_cost(root / "build", api, env, reps)
            sweep_cost(root / "sweep", api, env, reps)
    feedback_size()


if __name__ == "__main__":
    main()
