"""``action.yml`` run step by step (``support.action_steps``): agentrun in a venv of its
own, outside the workspace, reused from the tool cache, and nothing changed in the rest
of the user's job.

The install is real (``pip install`` of this repository's files into a new venv), once
per module: the later tests reuse its tool cache as a cache hit would.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from github_flow import Site, labeled
from runner.helpers import git
from support.action_steps import Runner, StepRun, checkout, step_env
from support.prism import GitHubAPI

import agentrun

SLUG = "issue-7-fix-the-greeting"
pytestmark = pytest.mark.slow  # a real pip install, once per module
UNMEASURED = {"actions/setup-python", "actions/cache"}
FOUND = "git agentrun --version >found.txt || rm found.txt"


@pytest.fixture(scope="module")
def action(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkout(tmp_path_factory.mktemp("action"))


@pytest.fixture(scope="module")
def tool_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tool-cache")


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    found = Site(tmp_path, github_api)
    # The agent's session runs `git agentrun` as any agent does: found on the PATH
    # agentrun gives it, whatever the job's PATH holds.
    found.configure([{"phase": "implement", "run": FOUND}])
    return found


def job_runner(site: Site, action: Path, cache: Path, name: str = "runner") -> Runner:
    job = site.job("issues", labeled(7, "Fix the greeting", "Say hello.", "maintainer"))
    env = step_env(job.env())
    assert shutil.which("git-agentrun", path=env["PATH"]) is None  # only the Action's venv has it
    return Runner(job.checkout, site.root / name, env, action=action, cache=cache)


def by_name(steps: list[StepRun]) -> dict[str, StepRun]:
    return {step.name: step for step in steps}


def test_the_action_runs_agentrun_from_a_venv_of_its_own(
    site: Site, action: Path, tool_cache: Path
) -> None:
    runner = job_runner(site, action, tool_cache)

    steps = runner.run()

    assert {s.uses for s in steps if s.seconds is None} == UNMEASURED
    found = by_name(steps)
    venv = Path(found["Locate agentrun's venv"].outputs["dir"])
    assert venv.parent == tool_cache / "git-agentrun"  # the tool cache, not the workspace
    assert (venv / "bin" / "git-agentrun").is_file()
    assert not (runner.workspace / ".venv").exists()
    assert found["Run agentrun"].outputs == {
        "slug": SLUG,
        "pr-url": "https://github.com/octocat/Hello-World/pull/1347",
        "state": "complete",
        "tasks": "[]",
    }
    version = git(site.origin, "show", f"agentrun/{SLUG}:found.txt")
    assert version == f"agentrun {agentrun.__version__}"
    # Nothing changes for the rest of the user's job: no PATH, no variables, and the
    # job's Python has no agentrun.
    assert runner.files()["GITHUB_PATH"].read_text() == ""
    assert runner.files()["GITHUB_ENV"].read_text() == ""
    probe = subprocess.run([runner.python, "-c", "import agentrun"], capture_output=True)
    assert probe.returncode != 0
    assert runner.files()["GITHUB_STEP_SUMMARY"].read_text().startswith("### agentrun\n")


def test_a_venv_in_the_tool_cache_is_used_again(site: Site, action: Path, tool_cache: Path) -> None:
    job_runner(site, action, tool_cache, "first").run()  # the module's install, if first
    again = job_runner(site, action, tool_cache, "second")

    found = by_name(again.run())

    install = found["Install agentrun"]
    venv = found["Locate agentrun's venv"].outputs["dir"]
    assert install.output == f"agentrun: using the venv {venv}\n"
    assert found["Run agentrun"].outputs["state"] == "complete"


def test_the_venv_is_named_after_what_it_is_built_from(
    site: Site, action: Path, tool_cache: Path, tmp_path: Path
) -> None:
    changed = checkout(tmp_path / "changed")
    with (changed / "src" / "agentrun" / "__init__.py").open("a") as out:
        out.write("# a new release\n")
    runner = job_runner(site, action, tool_cache)
    other = job_runner(site, changed, tool_cache, "other")

    first = runner.run(until="venv")[-1].outputs
    second = other.run(until="venv")[-1].outputs

    assert first["key"] != second["key"]
    assert first["dir"] != second["dir"]
    assert first["key"].startswith("git-agentrun-Linux-X64-py3.")
    assert Path(first["dir"]).name == first["key"]


def test_a_broken_venv_is_built_again(site: Site, action: Path, tmp_path: Path) -> None:
    """A venv whose Python is gone (the runner's Python moved on) does not start: the
    install step replaces it instead of failing the job."""
    cache = tmp_path / "cache"
    runner = job_runner(site, action, cache)
    venv = Path(runner.run(until="venv")[-1].outputs["dir"])
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "git-agentrun").write_text("#!/gone/python\n")
    (venv / "bin" / "git-agentrun").chmod(0o755)

    found = by_name(job_runner(site, action, cache, "again").run())

    assert "using the venv" not in found["Install agentrun"].output
    assert found["Run agentrun"].outputs["state"] == "complete"
