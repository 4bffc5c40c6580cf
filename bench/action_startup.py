"""The Action's own start-up: its ``run:`` steps in order, from install to the first
request at the model server, on a cold and a warm package cache.

    .venv/bin/python bench/action_startup.py [--quick]

``action.yml`` runs through ``tests/support/action_steps.py`` (each ``run:`` step as the
runner runs it; ``actions/setup-python`` and ``actions/cache`` cannot run here and are
replaced by stand-ins, named below as unmeasured). The job is GitHub's example
``issues.labeled`` on a fresh clone of a bare ``file://`` origin, against Prism serving
GitHub's API; the config routes every role to an ``openai`` runtime pointed at the tests'
``ModelServer``. The clock stops at the first request that server receives, and the
job is ended there. Three starts, each in a new tool cache unless said:

- cold: an empty pip cache (``PIP_CACHE_DIR``): every package is fetched and built
  (from whatever index pip is configured with: on a machine with a local mirror that
  is no download);
- warm: the pip cache the cold start filled, a new venv;
- restored: the venv the warm start left, as an ``actions/cache`` hit leaves it.

Baseline in the same run: ``python -m venv`` plus ``pip install`` of agentrun's wheel
with the ``github`` extra, as the Action installs it (the wheel built once beforehand),
on the warm pip cache: what installing the package costs
anyway. ``--quick``: one cold start and one restored from it; otherwise the median of
three rounds (one cold start).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path

from _common import IDENTITY

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "action")]
os.environ.update(IDENTITY)

from github_flow import Site, labeled  # noqa: E402  (the Action tests' origin and payloads)
from support.action_steps import Runner, StepRun, checkout, step_env  # noqa: E402
from support.model_server import ModelServer, Turn  # noqa: E402
from support.prism import GitHubAPI, serve_github  # noqa: E402

CONFIG = """\
[roles]
default = ["mock"]

[runtimes.mock]
kind = "openai"
base_url = "{url}/v1"
model = "mock"
api_key_env = "OPENAI_API_KEY"
"""
FIRST_REQUEST_SECONDS = 120
ISSUES = count(7)  # a new issue, so a new build, for each start: a job ended mid-phase
# leaves its build's lease behind


def until_first_request(server: ModelServer) -> Callable[[list[str], dict[str, str], Path], str]:
    """Run the last step until the model server's first request, then end the job."""

    def run(argv: list[str], env: dict[str, str], cwd: Path) -> str:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + FIRST_REQUEST_SECONDS
        try:
            while not server.requests:
                if proc.poll() is not None:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    raise RuntimeError(f"agentrun ended before asking the model:\n{out}")
                if time.monotonic() > deadline:
                    raise RuntimeError("no request reached the model server")
                time.sleep(0.005)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return ""

    return run


def start(
    site: Site, server: ModelServer, action: Path, home: Path, cache: Path, pip: Path
) -> list[StepRun]:
    server.requests.clear()
    job = site.job("issues", labeled(next(ISSUES), "Fix the greeting", "Say hello.", "maintainer"))
    env = {**step_env(job.env()), "PIP_CACHE_DIR": str(pip)}
    runner = Runner(
        job.checkout, home, env, {"openai-api-key": "test-key"}, action=action, cache=cache
    )
    return runner.run(last=until_first_request(server))


def measured(steps: list[StepRun]) -> float:
    return sum(s.seconds for s in steps if s.seconds is not None)


def baseline(wheel: Path, python: str, home: Path, pip: Path) -> float:
    venv = home / "venv"
    env = {**os.environ, "PIP_CACHE_DIR": str(pip)}
    started = time.perf_counter()
    subprocess.run([python, "-m", "venv", str(venv)], check=True, env=env)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
         "--quiet", f"{wheel}[github]"],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round (smoke test)")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-", dir="/var/tmp") as name:
        tmp = Path(name)
        action = checkout(tmp / "action")
        pip = tmp / "pip-cache"
        python = Runner(tmp, tmp, {}).python
        with serve_github(tmp) as api, ModelServer(lambda _r: Turn(text="ok")) as server:
            site = site_for(tmp / "site", api, server)
            figures: dict[str, list[float]] = {"cold": [], "warm": [], "restored": [], "base": []}
            steps: dict[str, list[list[StepRun]]] = {"cold": [], "warm": [], "restored": []}
            for n in range(rounds):
                if n == 0:
                    cache = tmp / f"tc{n}"
                    steps["cold"].append(start(site, server, action, tmp / f"c{n}", cache, pip))
                    figures["cold"].append(measured(steps["cold"][-1]))
                if not args.quick:  # --quick: the cold start's venv is the one restored
                    cache = tmp / f"tw{n}"
                    steps["warm"].append(start(site, server, action, tmp / f"w{n}", cache, pip))
                    figures["warm"].append(measured(steps["warm"][-1]))
                steps["restored"].append(start(site, server, action, tmp / f"r{n}", cache, pip))
                figures["restored"].append(measured(steps["restored"][-1]))
                wheel = built_wheel(action, python, tmp / "dist", pip)
                figures["base"].append(baseline(wheel, python, tmp / f"b{n}", pip))
                shutil.rmtree(tmp / f"b{n}")
    report(figures, steps)


def site_for(root: Path, api: GitHubAPI, server: ModelServer) -> Site:
    root.mkdir()
    api.clear()
    site = Site(root, api)
    (site.seed / ".agentrun.toml").write_text(CONFIG.format(url=server.url))
    subprocess.run(["git", "add", ".agentrun.toml"], cwd=site.seed, check=True)
    subprocess.run(["git", "commit", "-qm", "configure"], cwd=site.seed, check=True)
    subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=site.seed, check=True)
    return site


def built_wheel(action: Path, python: str, dist: Path, pip: Path) -> Path:
    found = sorted(dist.glob("*.whl"))
    if found:
        return found[0]
    env = {**os.environ, "PIP_CACHE_DIR": str(pip)}
    subprocess.run(
        [python, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(action)],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    return sorted(dist.glob("*.whl"))[0]


def report(figures: dict[str, list[float]], steps: dict[str, list[list[StepRun]]]) -> None:
    base = statistics.median(figures["base"])
    print(f"baseline: venv + pip install of the wheel (warm pip cache): {base:.2f}s")
    kinds = [kind for kind in ("cold", "warm", "restored") if figures[kind]]
    for kind in kinds:
        runs = steps[kind]
        names = [s.name for s in runs[0] if s.seconds is not None]
        parts = ", ".join(
            f"{name} {statistics.median(step_seconds(run, name) for run in runs):.2f}s"
            for name in names
        )
        seconds = statistics.median(figures[kind])
        print(f"{kind}: {seconds:.2f}s to the first model request ({parts}; medians)")
    unmeasured = sorted({s.uses for s in steps["cold"][0] if s.uses})
    print(f"unmeasured (stand-ins): {', '.join(unmeasured)}")
    for kind in kinds:
        print(
            f"ratio {kind}-start/pip-install-wheel: {statistics.median(figures[kind]) / base:.2f}"
        )


def step_seconds(run: list[StepRun], name: str) -> float:
    return next(s.seconds for s in run if s.name == name and s.seconds is not None)


if __name__ == "__main__":
    main()
