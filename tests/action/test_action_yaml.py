"""action.yml and the example workflow: the inputs, outputs, triggers and permissions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def test_the_action_installs_this_package_and_runs_the_action_command() -> None:
    action = load(ROOT / "action.yml")
    assert set(action["inputs"]) == {
        "github-token",
        "label",
        "config",
        "anthropic-api-key",
        "openai-api-key",
        "timeout-minutes",
    }
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert action["inputs"]["config"]["default"] == ".agentrun.toml"
    assert set(action["outputs"]) == {"slug", "pr-url", "state"}
    for name, output in action["outputs"].items():
        assert output["value"] == f"${{{{ steps.agentrun.outputs.{name} }}}}"
    runs = action["runs"]
    assert runs["using"] == "composite"
    scripts = [step.get("run", "") for step in runs["steps"]]
    install = next(s for s in scripts if "pip install" in s)
    assert "$ACTION_PATH" in install
    step = next(s for s in runs["steps"] if s.get("id") == "agentrun")
    assert step["run"].startswith("git agentrun action ")
    env = step["env"]
    # Credentials reach the step as environment variables (secrets), never as arguments.
    assert env["ANTHROPIC_API_KEY"] == "${{ inputs.anthropic-api-key }}"
    assert env["OPENAI_API_KEY"] == "${{ inputs.openai-api-key }}"
    assert env["GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    assert env["AGENTRUN_LABEL"] == "${{ inputs.label }}"
    assert "inputs." not in step["run"]


def test_the_example_workflow_triggers_permissions_and_concurrency() -> None:
    flow = load(ROOT / "examples" / "github" / "agentrun.yml")
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on["issues"] == {"types": ["labeled"]}
    assert on["issue_comment"] == {"types": ["created"]}
    assert on["pull_request_review"] == {"types": ["submitted"]}
    assert on["pull_request"] == {"types": ["closed"]}
    assert on["schedule"][0]["cron"]
    assert "workflow_dispatch" in on
    assert flow["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
        "statuses": "write",
    }
    concurrency = flow["concurrency"]
    assert "github.event.issue.number" in concurrency["group"]
    assert "github.event.pull_request.number" in concurrency["group"]
    assert concurrency["cancel-in-progress"] is False
    (job,) = flow["jobs"].values()
    assert "github.event.label.name == 'agentrun'" in job["if"]
    assert "contains(github.event.comment.body, '/agentrun')" in job["if"]
    checkout, fetch, agentrun = job["steps"]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["fetch-depth"] == 0
    assert "refs/agentrun/*" in fetch["run"]
    assert "agentrun" in agentrun["uses"]
    secrets = [v for v in agentrun["with"].values() if "secrets." in str(v)]
    assert secrets == ["${{ secrets.ANTHROPIC_API_KEY }}"]  # one secret to add
    # The job outlives agentrun's own limit, so a build stops at a boundary, resumable.
    assert int(agentrun["with"]["timeout-minutes"]) < int(job["timeout-minutes"])
