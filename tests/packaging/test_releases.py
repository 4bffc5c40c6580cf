"""Releases people can pin: the README's tagging commands give `v0.x.y` and a `v0` that
follows, and its examples name the current release in those forms."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml
from conftest import git, make_repo
from wheelhouse import ROOT

import agentrun

README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def tag_commands() -> list[str]:
    (block,) = re.findall(r"```\n(.*?)```", section("Releases"), re.S)
    return block.strip().splitlines()


def release(repo: Path, version: str) -> None:
    """The README's commands for ``version`` (they are written for v0.2.0)."""
    for line in tag_commands():
        subprocess.run(line.replace("0.2.0", version), shell=True, cwd=repo, check=True)


def remote_tags(origin: Path) -> dict[str, str]:
    """Each tag of ``origin`` and the commit it names (annotated tags peeled)."""
    listed = git(origin, "ls-remote", "--tags", str(origin)).splitlines()
    peeled = dict(reversed(line.split("\t")) for line in listed)
    return {
        name.removeprefix("refs/tags/"): peeled.get(f"{name}^{{}}", sha)
        for name, sha in peeled.items()
        if not name.endswith("^{}")
    }


def test_the_readme_tags_a_release_and_moves_v0_to_it(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    repo = make_repo(tmp_path / "agentrun")
    git(repo, "remote", "add", "origin", f"file://{origin}")
    git(repo, "push", "-q", "origin", "main")
    first = git(repo, "rev-parse", "HEAD")
    release(repo, "0.1.0")
    assert remote_tags(origin) == {"v0.1.0": first, "v0": first}

    git(repo, "commit", "-q", "--allow-empty", "-m", "the next release")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "push", "-q", "origin", "main")
    release(repo, "0.2.0")
    assert remote_tags(origin) == {"v0.1.0": first, "v0.2.0": second, "v0": second}


def test_the_readme_examples_pin_the_current_release() -> None:
    current, major = f"v{agentrun.__version__}", f"v{agentrun.__version__.split('.')[0]}"
    github = section("GitHub")
    assert f"`OWNER/agentrun@{major}`" in github
    assert f"`OWNER/agentrun@{current}`" in github
    assert f"`OWNER/agentrun@<commit> # {current}`" in github
    (config,) = re.findall(r"```yaml\n(.*?)```", section("The pre-push hook"), re.S)
    (entry,) = yaml.safe_load(config)["repos"]
    assert entry["rev"] == current
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in entry["hooks"]] == [h["id"] for h in hooks]


def test_the_readme_installs_the_distribution_by_its_name() -> None:
    first_build = section("Your first build, on your own project")
    for command in ("pipx install git-agentrun", "uv tool install git-agentrun"):
        assert command in first_build
    assert "pipx inject git-agentrun 'PyGithub>=2.8' 'requests>=2.28'" in first_build
    assert not re.search(r"(pip|pipx|uv tool) install agentrun\b", README)
