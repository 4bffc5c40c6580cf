"""The sdist and the wheel hold the package and its notices, and nothing a checkout strays.

The copy they are built from has the strays of conftest.STRAYS planted in it.
"""

from __future__ import annotations

import tarfile
import zipfile
from email.parser import HeaderParser

import pytest
import yaml
from wheelhouse import ROOT, STRAYS, Dist, dist_fixture, tracked  # noqa: F401 (fixture)

import agentrun

pytestmark = pytest.mark.slow

STEM = f"git_agentrun-{agentrun.__version__}"
MAN = "share/man/man1/git-agentrun.1"  # where it is installed, under the venv's prefix
TOP = ["LICENSE", "NOTICE", "README.md", "pyproject.toml", f"data/{MAN}"]
# What flit_core writes into every sdist it makes: the metadata.
BACKEND_SDIST = ["PKG-INFO"]
DIST_INFO = ["METADATA", "WHEEL", "entry_points.txt", "RECORD"]


def package_files() -> list[str]:
    """Every file of the import package in this checkout, relative to ``src/``."""
    return [p.removeprefix("src/") for p in tracked(ROOT) if p.startswith("src/agentrun/")]


def sdist_names(dist: Dist) -> set[str]:
    with tarfile.open(dist.sdist) as archive:
        return {m.name.removeprefix(f"{STEM}/") for m in archive.getmembers() if m.isfile()}


def wheel_names(dist: Dist) -> set[str]:
    with zipfile.ZipFile(dist.wheel) as archive:
        return {n for n in archive.namelist() if not n.endswith("/")}


def metadata(dist: Dist) -> list[tuple[str, str]]:
    with zipfile.ZipFile(dist.wheel) as archive:
        text = archive.read(f"{STEM}.dist-info/METADATA").decode()
    return list(HeaderParser().parsestr(text).items())


def test_the_strays_are_planted(dist: Dist) -> None:
    assert all((dist.source / stray).is_file() for stray in STRAYS)
    assert (dist.source / "src/agentrun/cli/main.py").is_file()


def test_the_sdist_is_the_package_its_notices_and_the_man_page(dist: Dist) -> None:
    expected = {f"src/{name}" for name in package_files()} | set(TOP) | set(BACKEND_SDIST)
    found = sdist_names(dist)
    assert found - expected == set(), "unexpected in the sdist"
    assert expected - found == set(), "missing from the sdist"


def test_the_wheel_is_the_package_its_notices_and_the_man_page(dist: Dist) -> None:
    expected = set(package_files()) | {f"{STEM}.data/data/{MAN}"}
    expected |= {f"{STEM}.dist-info/{name}" for name in DIST_INFO}
    expected |= {f"{STEM}.dist-info/licenses/{name}" for name in ("LICENSE", "NOTICE")}
    found = wheel_names(dist)
    assert found - expected == set(), "unexpected in the wheel"
    assert expected - found == set(), "missing from the wheel"


def test_the_shipped_notices_are_the_checkouts(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as archive:
        for name in ("LICENSE", "NOTICE", f"data/{MAN}"):
            member = archive.extractfile(f"{STEM}/{name}")
            assert member is not None and member.read() == (ROOT / name).read_bytes()
    with zipfile.ZipFile(dist.wheel) as archive:
        for name in ("LICENSE", "NOTICE"):
            shipped = archive.read(f"{STEM}.dist-info/licenses/{name}")
            assert shipped == (ROOT / name).read_bytes()
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "src/agentrun/data/shapes.toml" in (ROOT / "NOTICE").read_text()


def test_the_metadata(dist: Dist) -> None:
    fields = metadata(dist)
    one = dict(fields)
    assert one["Name"] == "git-agentrun"
    assert one["Version"] == agentrun.__version__
    assert one["License-Expression"] == "Apache-2.0"
    assert {v for k, v in fields if k == "License-File"} == {"LICENSE", "NOTICE"}
    assert one["Author"] and one["Keywords"]
    assert {v.split(",")[0] for k, v in fields if k == "Project-URL"} >= {"Homepage", "Source"}
    requires = [v for k, v in fields if k == "Requires-Dist"]
    # The forge clients come only with their extras, never with a plain install.
    for extra, wanted in (
        ("github", {"PyGithub", "requests"}),
        ("gitlab", {"python-gitlab", "requests"}),
    ):
        named = {
            r.split(">")[0].split(";")[0].strip() for r in requires if f'extra == "{extra}"' in r
        }
        assert named == wanted, requires
    clients = ("PyGithub", "python-gitlab", "requests")
    assert all("extra ==" in r for r in requires if r.startswith(clients)), requires
    assert {v for k, v in fields if k == "Provides-Extra"} >= {"github", "gitlab", "test"}


def test_the_classifiers_claim_the_pythons_the_workflow_tests(dist: Dist) -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    tested = {
        str(version)
        for job in workflow["jobs"].values()
        for version in job.get("strategy", {}).get("matrix", {}).get("python-version", [])
    }
    prefix = "Programming Language :: Python :: 3."
    claimed = {
        v.removeprefix("Programming Language :: Python :: ")
        for k, v in metadata(dist)
        if k == "Classifier" and v.startswith(prefix)
    }
    assert claimed == tested == {"3.11", "3.12", "3.13"}
