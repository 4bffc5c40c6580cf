"""action.yml and the example workflow: inputs, outputs, triggers, permissions, pins, and
what zizmor and actionlint say about them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
EXAMPLE = ROOT / "examples" / "github" / "agentrun.yml"
BIN = Path(sys.executable).parent  # the test venv, where the test extra put the linters
BOT = ("github-actions[bot]", "41898282+github-actions[bot]@users.noreply.github.com")
# `uses: owner/repo@<40 hex> # v1.2.3`: the commit, and the version a reader can check.
PINNED = re.compile(r"^\s*-?\s*uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def uses_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if re.match(r"^\s*-?\s*uses:", line)]


def test_the_action_installs_this_package_and_runs_the_action_command() -> None:
    action = load(ACTION)
    assert set(action["inputs"]) == {
        "github-token",
        "label",
        "config",
        "anthropic-api-key",
        "openai-api-key",
        "timeout-minutes",
        "build",
        "task",
        "committer-name",
        "committer-email",
    }
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert action["inputs"]["config"]["default"] == ".agentrun.toml"
    assert set(action["outputs"]) == {"slug", "pr-url", "state", "tasks"}
    for name, output in action["outputs"].items():
        assert output["value"] == f"${{{{ steps.agentrun.outputs.{name} }}}}"
    runs = action["runs"]
    assert runs["using"] == "composite"
    scripts = [step.get("run", "") for step in runs["steps"]]
    install = next(s for s in scripts if "pip install" in s)
    assert (
        '-m pip install --disable-pip-version-check --quiet \\\n  "${ACTION_PATH}[github]"'
        in install
    )
    step = next(s for s in runs["steps"] if s.get("id") == "agentrun")
    env = step["env"]
    # Credentials reach the step as environment variables (secrets), never as arguments.
    assert env["ANTHROPIC_API_KEY"] == "${{ inputs.anthropic-api-key }}"
    assert env["OPENAI_API_KEY"] == "${{ inputs.openai-api-key }}"
    assert env["AGENTRUN_LABEL"] == "${{ inputs.label }}"
    assert env["AGENTRUN_INPUT_BUILD"] == "${{ inputs.build }}"
    assert env["AGENTRUN_INPUT_TASK"] == "${{ inputs.task }}"
    assert not any("inputs." in s or "github." in s for s in scripts)  # no template injection


def test_the_token_reaches_agentrun_on_a_descriptor_and_no_environment_keeps_it() -> None:
    step = next(s for s in load(ACTION)["runs"]["steps"] if s.get("id") == "agentrun")
    assert step["env"]["AGENTRUN_TOKEN"] == "${{ inputs.github-token }}"
    assert "GITHUB_TOKEN" not in step["env"]
    lines = [line.strip() for line in step["run"].splitlines()]
    assert lines[:2] == ['exec 3<<<"$AGENTRUN_TOKEN"', "unset AGENTRUN_TOKEN"]
    assert 'AGENTRUN_TOKEN_FD=3 exec "$AGENTRUN_VENV/bin/git-agentrun" "$@" \\' in lines


@pytest.mark.parametrize(
    ("inputs", "argv"),
    [
        ({}, "action --config .agentrun.toml --time-limit 300"),
        ({"AGENTRUN_INPUT_BUILD": "b-1"}, "resume b-1 --remote origin --time-limit 300"),
        (
            {"AGENTRUN_INPUT_BUILD": "b-1", "AGENTRUN_INPUT_TASK": "api"},
            "task b-1 api --remote origin --time-limit 300",
        ),
        # An input is one argument, never shell: the CLI refuses what is not a task id.
        (
            {"AGENTRUN_INPUT_BUILD": "b-1", "AGENTRUN_INPUT_TASK": '$(touch "$OUT/ran"); x'},
            'task b-1 $(touch "$OUT/ran"); x --remote origin --time-limit 300',
        ),
    ],
)
def test_the_shell_step_leaves_no_environment_holding_the_token(
    tmp_path: Path, inputs: dict[str, str], argv: str
) -> None:
    """Run the step's script as Actions would, with git-agentrun replaced by a probe that
    reports every environment it can see up its own process tree and what fd 3 holds:
    acting on the event, running a build (the integrate job) or one of its tasks."""
    step = next(s for s in load(ACTION)["runs"]["steps"] if s.get("id") == "agentrun")
    probe = tmp_path / "bin" / "git-agentrun"
    probe.parent.mkdir()
    probe.write_text(
        "#!/bin/sh\n"
        'for pid in $$ $PPID; do tr "\\0" "\\n" </proc/$pid/environ; done >"$OUT/environ"\n'
        'cat <&3 >"$OUT/fd3"\n'
        'echo "$@" >"$OUT/argv"\n'
    )
    probe.chmod(0o755)
    token = "ghs_" + "Q" * 36
    env = {
        "PATH": "/usr/bin:/bin",
        "OUT": str(tmp_path),
        "AGENTRUN_VENV": str(tmp_path),
        "AGENTRUN_TOKEN": token,
        "AGENTRUN_CONFIG": ".agentrun.toml",
        "AGENTRUN_TIME_LIMIT": "300",
        **inputs,
    }
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fd3").read_text() == token + "\n"
    environ = (tmp_path / "environ").read_text()
    assert "AGENTRUN_TOKEN_FD=3" in environ
    assert token not in environ
    assert (tmp_path / "argv").read_text() == argv + "\n"
    assert not (tmp_path / "ran").exists()


def test_the_commit_identity_defaults_to_the_actions_bot() -> None:
    action = load(ACTION)
    inputs = action["inputs"]
    assert (inputs["committer-name"]["default"], inputs["committer-email"]["default"]) == BOT
    env = next(s for s in action["runs"]["steps"] if s.get("id") == "agentrun")["env"]
    for prefix in ("AGENTRUN_COMMITTER", "GIT_AUTHOR", "GIT_COMMITTER"):
        assert env[f"{prefix}_NAME"] == "${{ inputs.committer-name }}"
        assert env[f"{prefix}_EMAIL"] == "${{ inputs.committer-email }}"


def test_the_example_workflow_triggers_permissions_and_concurrency() -> None:
    flow = load(EXAMPLE)
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on["issues"] == {"types": ["labeled"]}
    assert on["issue_comment"] == {"types": ["created"]}
    assert on["pull_request_review"] == {"types": ["submitted"]}
    assert on["pull_request"] == {"types": ["closed"]}
    assert on["schedule"][0]["cron"]
    assert "workflow_dispatch" in on
    assert on["push"] == {"branches-ignore": ["agentrun/**"]}  # builds' pushes are no goals
    # The CI gate: the user's CI workflows completing continue the builds waiting on them.
    assert on["workflow_run"] == {"workflows": ["CI"], "types": ["completed"]}
    assert flow["permissions"] == {}  # nothing at the workflow level: the job says
    concurrency = flow["concurrency"]
    assert "github.event.issue.number" in concurrency["group"]
    assert "github.event.pull_request.number" in concurrency["group"]
    assert concurrency["cancel-in-progress"] is False
    assert list(flow["jobs"]) == ["agentrun", "tasks", "integrate"]
    job = flow["jobs"]["agentrun"]
    assert job["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
        "statuses": "write",
        "checks": "read",
        "actions": "read",
    }
    assert "github.event.label.name == 'agentrun'" in job["if"]
    assert (
        "(github.event_name != 'workflow_run' || "
        "startsWith(github.event.workflow_run.head_branch, 'agentrun/'))"
    ) in job["if"]
    assert "contains(github.event.comment.body, '/agentrun')" in job["if"]
    assert "contains(join(github.event.commits.*.message, ' '), 'Agentrun-Goal:')" in job["if"]
    for event in ("pull_request", "pull_request_review"):
        assert (
            f"(github.event_name != '{event}' || "
            "startsWith(github.event.pull_request.head.ref, 'agentrun/'))"
        ) in job["if"]
    checkout, agentrun = job["steps"]  # no step of its own fetches the build logs
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"] == {"fetch-depth": 0, "persist-credentials": False}
    assert not any("refs/agentrun" in str(step.get("run", "")) for step in job["steps"])
    assert "agentrun" in agentrun["uses"]
    secrets = [v for v in agentrun["with"].values() if "secrets." in str(v)]
    assert secrets == ["${{ secrets.ANTHROPIC_API_KEY }}"]  # one secret to add
    # The job outlives agentrun's own limit, so a build stops at a boundary, resumable.
    assert int(agentrun["with"]["timeout-minutes"]) < int(job["timeout-minutes"])


def test_the_example_fans_a_builds_ready_tasks_out_to_a_matrix() -> None:
    jobs = load(EXAMPLE)["jobs"]
    assert jobs["agentrun"]["outputs"] == {
        "slug": "${{ steps.agentrun.outputs.slug }}",
        "tasks": "${{ steps.agentrun.outputs.tasks }}",
    }
    assert jobs["agentrun"]["steps"][-1]["id"] == "agentrun"
    tasks, integrate = jobs["tasks"], jobs["integrate"]
    assert tasks["needs"] == "agentrun"
    assert tasks["if"] == "needs.agentrun.outputs.tasks != '[]'"  # skipped when none
    assert tasks["strategy"]["matrix"] == {"task": "${{ fromJSON(needs.agentrun.outputs.tasks) }}"}
    assert tasks["strategy"]["fail-fast"] is False
    assert tasks["permissions"] == {"contents": "write"}  # it speaks on no issue or PR
    # After every task job, also one that exited 7 (its task taken) or failed.
    assert integrate["needs"] == ["agentrun", "tasks"]
    assert integrate["if"].startswith("!cancelled() && needs.agentrun.result == 'success'")
    assert integrate["permissions"] == jobs["agentrun"]["permissions"]
    slug = "${{ needs.agentrun.outputs.slug }}"
    for job, task in ((tasks, "${{ matrix.task }}"), (integrate, None)):
        checkout, agentrun = job["steps"]
        assert checkout["with"] == {"fetch-depth": 0, "persist-credentials": False}
        assert agentrun["with"]["build"] == slug
        assert agentrun["with"].get("task") == task
        assert agentrun["with"]["anthropic-api-key"] == "${{ secrets.ANTHROPIC_API_KEY }}"
        assert int(agentrun["with"]["timeout-minutes"]) < int(job["timeout-minutes"])


def test_every_action_used_is_pinned_by_commit_with_its_version() -> None:
    found = {}
    for path in (ACTION, EXAMPLE):
        for line in uses_lines(path):
            if "OWNER/agentrun@" in line:
                continue  # the placeholder a user replaces (see the next test)
            match = PINNED.match(line)
            assert match, f"{path.name}: {line.strip()!r} is not pinned by commit # version"
            found[match.group(1)] = (match.group(2), match.group(3))
    assert found == {
        "actions/setup-python": ("e797f83bcb11b83ae66e0230d6156d7c80228e7c", "v6.0.0"),
        "actions/cache": ("0057852bfaa89a56745cba8c7296529d2fc39830", "v4.3.0"),
        "actions/checkout": ("08c6903cd8c0fde910a37f88322edcfb5dd907a8", "v5.0.0"),
    }


def test_the_example_says_how_to_pin_agentrun_itself() -> None:
    found = [line.strip() for line in uses_lines(EXAMPLE) if "agentrun@" in line]
    # The agentrun job's step (with its id first), the tasks job's and the integrate job's.
    assert found == ["uses: OWNER/agentrun@v0"] + ["- uses: OWNER/agentrun@v0"] * 2
    text = EXAMPLE.read_text()
    assert "`OWNER/agentrun@<commit> # v0.1.0`" in text
    assert "`OWNER/agentrun@<commit> # v0.1.0`" in (ROOT / "README.md").read_text()


def lint(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def zizmor(*files: Path) -> subprocess.CompletedProcess[str]:
    config = ROOT / "zizmor.yml"
    return lint(str(BIN / "zizmor"), "--offline", "--config", str(config), *map(str, files))


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    shellcheck = f"--shellcheck={BIN / 'shellcheck'}"
    return lint(str(BIN / "jactionlint"), "--profile", "correctness", shellcheck, *map(str, files))


def test_zizmor_and_actionlint_find_nothing() -> None:
    found = zizmor(ACTION, EXAMPLE)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "No findings to report" in found.stdout
    found = actionlint(ACTION, EXAMPLE)
    assert (found.returncode, found.stdout) == (0, ""), found.stdout + found.stderr
    assert "shellcheck was not found" not in found.stderr  # the run: steps were checked


@pytest.mark.parametrize(
    ("old", "new", "tool", "said"),
    [
        # An input spliced into the script: code injection for whoever sets the input.
        (
            'set -- action --config "$AGENTRUN_CONFIG"',
            "set -- action --config ${{ inputs.config }}",
            "zizmor",
            "template-injection",
        ),
        ("# v6.0.0", "# v6.0.0\n      with: {python-version: [3]}", "actionlint", "python-version"),
        ("unset AGENTRUN_TOKEN", "unset AGENTRUN_TOKEN; echo $UNQUOTED", "actionlint", "SC2086"),
    ],
)
def test_the_linters_catch_what_they_are_here_for(
    tmp_path: Path, old: str, new: str, tool: str, said: str
) -> None:
    broken = tmp_path / "action.yml"
    text = ACTION.read_text()
    assert old in text
    broken.write_text(text.replace(old, new, 1))
    found = zizmor(broken) if tool == "zizmor" else actionlint(broken)
    assert found.returncode != 0
    assert said in found.stdout, found.stdout + found.stderr
