"""Start-up of the agent verbs, from inside a real session: ``git agentrun agent context``
and ``git agentrun agent done`` against ``git --version`` + Python's own start-up.

    .venv/bin/python bench/verbs.py [--repeat 15] [--quick]

A real build runs (the scripted agent plans and reviews); its implement agent is a
command agent, a Python program, which times each command from process start to exit,
round-robin, in the session's own environment (the runner's ``git-agentrun`` on PATH,
``AGENTRUN_*`` set, the log read through ``AGENTRUN_GIT_DIR``). Every timed ``done`` is
*accepted*: it validates against the log and queues its report in the outbox, which the
agent empties again before the next one (the runner drains the outbox only at its
heartbeat, 30 s after the session starts; a ``done`` that was refused is counted and
said). Then the agent changes a file and reports ``done`` for real, and the build ends.

Baseline = median ``git --version`` + median ``python -c pass`` (this interpreter), both
measured in the same session; the target for each verb is 3× the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import IDENTITY

AGENT = """\
import json, os, subprocess, sys, time
from pathlib import Path

sys.stdin.read()
repeat = int(os.environ["BENCH_REPEAT"])
outbox = Path(".agentrun/run/outbox")
commands = {
    "git --version": ["git", "--version"],
    "python -c pass": [sys.executable, "-c", "pass"],
    "agent context": ["git", "agentrun", "agent", "context"],
    "agent done": ["git", "agentrun", "agent", "done", "--summary", "timed"],
}
times = {name: [] for name in commands}
refused = []
for _ in range(repeat):
    for name, argv in commands.items():
        started = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        times[name].append(time.perf_counter() - started)
        if done.returncode != 0:
            if name != "agent done":
                sys.exit(f"{name} exited {done.returncode}: {done.stderr.decode()}")
            refused.append(done.stderr.decode().strip())
        for queued in outbox.glob("*.json"):
            queued.unlink()  # so that the next `done` is accepted too
Path(os.environ["BENCH_OUT"]).write_text(json.dumps({"times": times, "refused": refused}))
Path("change.txt").write_text("changed by the bench agent\\n")
subprocess.run(["git", "agentrun", "agent", "done", "--summary", "bench"])
"""

CONFIG = """\
[roles]
default = ["scripted"]
implement = ["agent"]

[runtimes.scripted]
kind = "script"
script = "script.toml"

[runtimes.agent]
kind = "command"
command = [{python}, {agent}]
env = {{ BENCH_REPEAT = "{repeat}", BENCH_OUT = {out} }}
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **IDENTITY}, check=True)


def session_times(root: Path, repeat: int) -> dict[str, object]:
    """Run one build whose implement agent times the commands; what it measured."""
    repo, agent, out = root / "repo", root / "agent.py", root / "times.json"
    agent.write_text(AGENT)
    repo.mkdir()
    config = CONFIG.format(
        python=json.dumps(sys.executable),
        agent=json.dumps(str(agent)),
        repeat=repeat,
        out=json.dumps(str(out)),
    )
    (repo / ".agentrun.toml").write_text(config)
    (repo / "script.toml").write_text("")  # the scripted defaults: plan, approve
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    bindir = str(Path(sys.executable).parent)  # where `git-agentrun` is installed
    env = {**os.environ, **IDENTITY, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(
        ["git", "agentrun", "run", "Add the change"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"the build exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    found: dict[str, object] = json.loads(out.read_text())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs of each command")
    parser.add_argument("--quick", action="store_true", help="3 runs each (smoke test)")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-verbs-") as tmp:
        found = session_times(Path(tmp), repeat)
    times: dict[str, list[float]] = found["times"]  # type: ignore[assignment]
    refused: list[str] = found["refused"]  # type: ignore[assignment]
    ms = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    baseline = ms["git --version"] + ms["python -c pass"]
    print(f"verbs: median wall ms of {repeat} runs each, inside an implement session")
    for name, value in ms.items():
        print(f"{name:<16} {value:>8.1f}")
    print(f"{'baseline':<16} {baseline:>8.1f}  (git --version + python -c pass)")
    accepted = repeat - len(refused)
    print(f"agent done: {accepted} of {repeat} accepted (queued), {len(refused)} refused")
    for line in sorted(set(refused)):
        print(f"  refused: {line}")
    for name in ("agent context", "agent done"):
        ratio = ms[name] / baseline
        verdict = "ok" if ratio <= 3 else "MISSED"
        print(f"ratio {name}/baseline: {ratio:.2f} (target <= 3: {verdict})")


if __name__ == "__main__":
    main()
