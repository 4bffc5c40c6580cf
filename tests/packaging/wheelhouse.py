"""The package as people get it: an sdist and a wheel built once per session, and venvs
that install the wheel the ways the README names (pip, pipx, uv tool).

The fixtures live here, not in a conftest.py: a second conftest module would take the
name ``conftest`` that tests import tests/conftest.py by. A test module imports the ones
it uses (``dist_fixture`` is the fixture ``dist``); each is built once per session however
many modules import it.

Dependencies come from the package index through the user's own caches: the autouse
fixture of tests/conftest.py moves HOME for every test, so the caches are named here.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = Path(pwd.getpwuid(os.getuid()).pw_dir)  # HOME is moved for each test
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or ACCOUNT / ".cache")
CACHES = {"PIP_CACHE_DIR": str(CACHE / "pip"), "UV_CACHE_DIR": str(CACHE / "uv")}
BIN = Path(sys.executable).parent  # this venv's pipx and uv
INSTALL_SECONDS = 300

# What a checkout may hold that is no part of the package: planted in the copy that is
# built, so the archives' test sees each refused. Paths are relative to the root.
STRAYS = (
    ".venv/lib/python3/site-packages/stray.py",
    ".venv-aider/bin/stray",
    "build/lib/agentrun/stray.py",
    "dist/git_agentrun-0.0.0-py3-none-any.whl",
    "src/agentrun.egg-info/PKG-INFO",
    "src/agentrun/__pycache__/stray.cpython-311.pyc",
    "src/agentrun/forge/__pycache__/github.cpython-311.pyc",
    "src/agentrun/stray.pyc",
    "tests/clients/node_modules/stray/index.js",
    ".mypy_cache/stray.json",
    ".pytest_cache/stray",
    ".hypothesis/stray",
    ".coverage",
)


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path
    source: Path  # the copy of the checkout they were built from


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment with the real caches, no AGENTRUN_* and no venv of its own:
    this venv's bin leaves PATH, so its editable ``git-agentrun`` cannot stand in."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRUN_")}
    out.pop("VIRTUAL_ENV", None)
    path = out.get("PATH", "").split(os.pathsep)
    out["PATH"] = os.pathsep.join(p for p in path if p and Path(p) != BIN)
    out.update(CACHES)
    out.update(extra or {})
    return out


def run(
    argv: list[str | Path], cwd: Path | None = None, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=environ if environ is not None else env(),
        capture_output=True,
        text=True,
        timeout=INSTALL_SECONDS,
    )


def check(
    argv: list[str | Path], cwd: Path | None = None, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``run``, which must exit 0."""
    done = run(argv, cwd, environ)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def tracked(root: Path) -> list[str]:
    """The checkout's files as git sees them: committed, staged or new (not ignored)."""
    listed = check(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=root).stdout
    return sorted({p for p in listed.split("\0") if p and (root / p).exists()})


@functools.cache
def _build(base: Path) -> Dist:
    source = base / "checkout"
    for name in tracked(ROOT):
        if (ROOT / name).is_symlink():
            continue  # tests/clients/node_modules: a link to this machine's install
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    for stray in STRAYS:
        (source / stray).parent.mkdir(parents=True, exist_ok=True)
        (source / stray).write_text("stray\n")
    out = base / "dist"
    check([sys.executable, "-m", "build", "--outdir", out, source])
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dist(sdist, wheel, source)


@pytest.fixture(scope="session", name="dist")
def dist_fixture(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """``python -m build`` (the sdist, then the wheel from it) of a copy of this checkout
    with the strays above planted in it."""
    return _build(tmp_path_factory.getbasetemp() / "packaging")


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """An environment where ``git agentrun`` is this venv's."""
        out = env(extra)
        out["PATH"] = f"{self.bin}{os.pathsep}{out['PATH']}"
        return out


def make_venv(root: Path, *requirements: str | Path) -> Venv:
    """A venv with ``requirements`` installed by this venv's pip (``--python``): the same
    install as its own pip's, without the seconds ensurepip and byte-compiling take."""
    venv.create(root, with_pip=False)
    made = Venv(root)
    pip = [sys.executable, "-m", "pip", "--python", made.bin / "python", "install"]
    check([*pip, "-q", "--no-compile", *requirements])
    return made


@functools.cache
def _bare(wheel: Path, root: Path) -> Venv:
    return make_venv(root, wheel)


@pytest.fixture(scope="session", name="bare")
def bare_fixture(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A venv with the wheel installed and no extra: PyGithub is not there."""
    return _bare(dist.wheel, tmp_path_factory.getbasetemp() / "packaging" / "bare")
