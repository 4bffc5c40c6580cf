"""The outcomes harness's instances (instances.toml) and how one becomes a repository: its
project's pinned sdist fetched from the package index, unpacked, the bug planted, and
committed as one initial commit (so that no history shows the agent the planted change).

Imported by run.py and by the tests' scripted models (which play a model that knows each
instance's fix); it imports nothing of agentrun.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

INSTANCES = Path(__file__).resolve().parent / "instances.toml"
# The project's tests, fast and alike on every machine: no plugins of the environment
# (a pytest plugin installed for something else must not change the figures), no cache,
# no bytecode left in the worktree for a later round to commit.
TEST_PREFIX = (
    "PYTHONDONTWRITEBYTECODE=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "
    "python -m pytest -q -rfE -p no:cacheprovider"
)
PIP_DOWNLOAD = (
    *(sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check"),
    *("--no-deps", "--no-binary", ":all:"),
)
IGNORED = "__pycache__/\n*.pyc\n.pytest_cache/\n"


class InstanceError(Exception):
    """An instance that cannot be made (a download, an edit that does not apply): one line."""


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    tests: str  # pytest's arguments, in the unpacked sdist
    protect: tuple[str, ...]  # the test files (glob patterns)


@dataclass(frozen=True)
class Instance:
    id: str
    project: Project
    file: str
    old: str  # the project's own text, exactly once in `file`
    new: str  # the planted bug
    fails: str  # a test id that fails with the bug planted
    goal: str

    @property
    def test_command(self) -> str:
        """The verify step's command: the project's own tests."""
        return f"{TEST_PREFIX} {self.project.tests}"


def load(path: Path = INSTANCES) -> list[Instance]:
    data = tomllib.loads(path.read_text())
    projects = {
        p["name"]: Project(p["name"], p["version"], p["tests"], tuple(p["protect"]))
        for p in data["project"]
    }
    return [
        Instance(
            id=i["id"],
            project=projects[i["project"]],
            file=i["file"],
            old=i["old"],
            new=i["new"],
            fails=i["fails"],
            goal=i["goal"],
        )
        for i in data["instance"]
    ]


def select(instances: list[Instance], count: int | None) -> list[Instance]:
    """The first ``count`` instances taking one project at a time in turn (file order), so
    that a few instances still span as many projects as they can."""
    by_project: dict[str, list[Instance]] = {}
    for instance in instances:
        by_project.setdefault(instance.project.name, []).append(instance)
    ordered: list[Instance] = []
    while any(by_project.values()):
        for queue in by_project.values():
            if queue:
                ordered.append(queue.pop(0))
    return ordered if count is None else ordered[:count]


def fetch(project: Project, cache: Path) -> Path:
    """The project's sdist, downloaded once into ``cache`` by pip from its configured
    index (``--no-binary :all:``: the source with its tests, never a wheel)."""
    folder = cache / f"{project.name}-{project.version}"
    found = sorted(folder.glob("*")) if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    spec = f"{project.name}=={project.version}"
    done = subprocess.run(
        [*PIP_DOWNLOAD, "-d", str(folder), spec],
        capture_output=True,
        text=True,
    )
    found = sorted(folder.glob("*"))
    if done.returncode != 0 or not found:
        tail = (done.stderr.strip().splitlines() or ["no file"])[-1]
        shutil.rmtree(folder, ignore_errors=True)
        raise InstanceError(f"pip download {spec} failed: {tail}")
    return found[0]


def unpack(archive: Path, into: Path) -> None:
    """The sdist's files into ``into``, without its top folder."""
    staging = into.with_name(into.name + ".unpacking")
    shutil.rmtree(staging, ignore_errors=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(staging)
    else:
        with tarfile.open(archive) as t:
            t.extractall(staging, filter="data")
    (top,) = staging.iterdir()
    top.rename(into)
    staging.rmdir()


def plant(instance: Instance, root: Path) -> None:
    """Replace the instance's ``old`` text by ``new`` in its file; each must be there
    exactly once (before and after), else the instance no longer fits its project and
    its fix is not one edit."""
    path = root / instance.file
    text = path.read_text()
    if text.count(instance.old) != 1:
        raise InstanceError(
            f"{instance.id}: the text to replace is in {instance.file} "
            f"{text.count(instance.old)} times (want exactly 1)"
        )
    planted = text.replace(instance.old, instance.new)
    if planted.count(instance.new) != 1:
        raise InstanceError(f"{instance.id}: the planted text is not unique in {instance.file}")
    path.write_text(planted)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise InstanceError(f"git {' '.join(args)} exited {done.returncode}: {done.stderr[-400:]}")
    return done.stdout.strip()


def make_repo(instance: Instance, cache: Path, into: Path, planted: bool = True) -> Path:
    """The instance as a git repository on ``main``: the unpacked sdist with the bug
    planted (or not: ``planted=False``, to check the tests pass without it), one commit."""
    unpack(fetch(instance.project, cache), into)
    if planted:
        plant(instance, into)
    with (into / ".gitignore").open("a") as ignore:
        ignore.write("\n" + IGNORED)
    git(into.parent, "init", "-q", "-b", "main", str(into))
    git(into, "add", "-A")
    git(into, "commit", "-q", "-m", f"{instance.project.name} {instance.project.version}")
    return into


def run_tests(instance: Instance, root: Path, env: dict[str, str]) -> tuple[int, str]:
    """The project's tests in ``root``: exit code and output."""
    done = subprocess.run(
        ["bash", "-c", instance.test_command],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def names(fails: str, failing: list[str]) -> bool:
    """Whether the failing test ids name ``fails`` (a test id, or a parametrized test's
    name without its parameters)."""
    return any(f == fails or f.startswith(fails + "[") for f in failing)


def failing_tests(output: str) -> list[str]:
    """The test ids pytest's summary (``-rfE``) names as failed."""
    return [
        line.split()[1]
        for line in output.splitlines()
        if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1
    ]
