"""The repository's own automation: Dependabot keeps the pins and the dependencies fresh."""

from __future__ import annotations

from typing import Any

import yaml
from wheelhouse import ROOT


def updates() -> list[dict[str, Any]]:
    config = yaml.safe_load((ROOT / ".github/dependabot.yml").read_text())
    assert config["version"] == 2
    return list(config["updates"])


def test_dependabot_updates_the_action_pins_and_the_python_dependencies() -> None:
    by_ecosystem = {u["package-ecosystem"]: u for u in updates()}
    assert set(by_ecosystem) == {"github-actions", "pip"}
    for update in by_ecosystem.values():
        assert update["directory"] == "/"  # the workflows, action.yml, pyproject.toml
        assert update["schedule"]["interval"] in {"daily", "weekly", "monthly"}


def test_every_action_the_ci_workflow_uses_is_pinned_to_a_commit() -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    steps = [s for job in workflow["jobs"].values() for s in job["steps"] if "uses" in s]
    assert steps
    for step in steps:
        _, _, ref = step["uses"].partition("@")
        assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), step["uses"]
    checkout = [s for s in steps if s["uses"].startswith("actions/checkout@")]
    assert checkout and all(s["with"]["persist-credentials"] is False for s in checkout)
