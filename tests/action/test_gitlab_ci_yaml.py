"""examples/gitlab/.gitlab-ci.yml: valid for GitLab CI, and the job it describes is the one
the tests run (full history, the webhook's body or a schedule, one job at a time, no
token left in the origin URL, `action --forge gitlab`)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gitlab" / ".gitlab-ci.yml"
BIN = Path(sys.executable).parent  # the test venv, where the test extra put check-jsonschema


def job() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text())
    assert isinstance(data, dict)
    found: dict[str, Any] = data["agentrun"]
    return found


def test_the_example_validates_against_gitlab_cis_published_schema() -> None:
    done = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_example_is_refused_by_that_schema(tmp_path: Path) -> None:
    broken = tmp_path / ".gitlab-ci.yml"
    broken.write_text(
        EXAMPLE.read_text().replace("resource_group: agentrun", "resource_group: [1]")
    )
    done = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout


def test_the_job_runs_on_webhooks_and_schedules_one_at_a_time_with_full_history() -> None:
    found = job()
    rules = [rule["if"] for rule in found["rules"]]
    assert '$CI_PIPELINE_SOURCE == "trigger" && $TRIGGER_PAYLOAD' in rules
    assert '$CI_PIPELINE_SOURCE == "schedule"' in rules
    push = '$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_BRANCH && '
    push += "$CI_COMMIT_BRANCH !~ /^agentrun\\//"
    assert push in rules  # goals from a push, never from a build's own branch
    assert found["variables"]["GIT_DEPTH"] == "0"
    assert found["resource_group"] == "agentrun"
    assert found["artifacts"]["reports"]["dotenv"] == found["variables"]["AGENTRUN_OUTPUT"]


def test_the_origin_loses_the_job_token_before_agentrun_runs() -> None:
    steps = job()["before_script"]
    set_url = [s for s in steps if s.startswith("git remote set-url origin")]
    assert set_url == ['git remote set-url origin "${CI_SERVER_URL}/${CI_PROJECT_PATH}.git"']
    assert "CI_JOB_TOKEN" not in yaml.safe_dump(job())  # no step hands it to anything


def test_the_script_is_a_command_agentrun_has(tmp_path: Path) -> None:
    (line,) = job()["script"]
    words = shlex.split(line.split("git agentrun", 1)[1])
    assert words[:3] == ["action", "--forge", "gitlab"]
    # The options exist: `--help` with them parses (a wrong option is a usage error, 2).
    done = subprocess.run(
        [str(BIN / "git-agentrun"), *words, "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_a_build_branchs_own_pipeline_ends_with_the_job_that_continues_its_build() -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    checks, main = data["agentrun-checks"], job()
    assert checks["stage"] == ".post"  # after every job of the pipeline, failed or not
    assert checks["rules"] == [
        {
            "if": '$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_BRANCH =~ /^agentrun\\//',
            "when": "always",
        }
    ]
    assert (checks["script"], checks["resource_group"]) == (main["script"], "agentrun")
    assert checks["variables"]["GIT_DEPTH"] == "0"
    ref = "${CI_DEFAULT_BRANCH}"
    fetch = f'git fetch -q origin "+refs/heads/{ref}:refs/remotes/origin/{ref}"'
    assert fetch in checks["before_script"]  # a branch pipeline fetches its own branch only
    assert [s for s in checks["before_script"] if s.startswith("git remote set-url")] == [
        'git remote set-url origin "${CI_SERVER_URL}/${CI_PROJECT_PATH}.git"'
    ]
