"""What the GitHub Marketplace asks of action.yml, the README's table generated from it,
and the GitHub App token a maintainer can swap in so their CI runs on build PRs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from test_action_yaml import ACTION, EXAMPLE, PINNED, ROOT, actionlint, load, zizmor

README = ROOT / "README.md"
TABLE = ROOT / "scripts" / "action_table.py"
# The colours action.yml's `branding` may take (GitHub's metadata syntax).
COLORS = {"white", "black", "yellow", "blue", "green", "orange", "red", "purple", "gray-dark"}
APP_STEP = "#   uses: actions/create-github-app-token@"


def test_the_action_has_what_the_marketplace_lists() -> None:
    action = load(ACTION)
    assert action["name"] == "git-agentrun"
    assert 0 < len(action["description"]) < 125
    assert "\n" not in action["description"]
    # A Feather icon on GitHub's list of the ones an action may use (some, such as the
    # brands' logos, are not), in a colour the Marketplace offers.
    assert action["branding"] == {"icon": "git-pull-request", "color": "blue"}
    assert action["branding"]["color"] in COLORS
    for kind in ("inputs", "outputs"):
        assert all(spec.get("description") for spec in action[kind].values()), kind


def test_the_readme_table_is_the_one_action_yml_gives() -> None:
    done = subprocess.run(
        [sys.executable, str(TABLE), "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout
    text = README.read_text()
    for name, spec in load(ACTION)["inputs"].items():
        default = f"`{spec['default']}`" if spec["default"] else "(empty)"
        assert f"| `{name}` | {default} | {' '.join(spec['description'].split())} |" in text
    for name in load(ACTION)["outputs"]:
        assert f"| `{name}` | " in text


def test_a_changed_input_makes_the_table_out_of_date(tmp_path: Path) -> None:
    # The script reads the files next to it: run a copy on a changed action.yml.
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / TABLE.name).write_text(TABLE.read_text())
    (tmp_path / "README.md").write_text(README.read_text())
    action = ACTION.read_text().replace("The issue label that starts", "The label that starts")
    (tmp_path / "action.yml").write_text(action)
    script = [sys.executable, str(tmp_path / "scripts" / TABLE.name)]

    stale = subprocess.run([*script, "--check"], capture_output=True, text=True, timeout=60)
    subprocess.run(script, check=True, timeout=60)
    fresh = subprocess.run([*script, "--check"], capture_output=True, text=True, timeout=60)

    assert stale.returncode == 1
    assert "out of date" in stale.stdout
    assert fresh.returncode == 0
    assert "| `label` | (empty) | The label that starts" in (tmp_path / "README.md").read_text()


def test_the_app_token_step_works_once_uncommented(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    (line,) = [line for line in text.splitlines() if APP_STEP in line]
    assert PINNED.match(line.replace("#   uses:", "  uses:"))
    assert "# github-token: ${{ steps.app-token.outputs.token }}" in text
    enabled = re.sub(r"^(\s*)# (- id: app-token|  uses:|  with:|    \S)", r"\1\2", text, flags=re.M)
    enabled = enabled.replace("# github-token:", "github-token:")
    flow = tmp_path / "agentrun.yml"
    flow.write_text(enabled)

    steps = load(flow)["jobs"]["agentrun"]["steps"]

    assert [s.get("id") for s in steps] == [None, "app-token", "agentrun"]
    job = load(EXAMPLE)["jobs"]["agentrun"]
    assert steps[1]["with"] == {
        "app-id": "${{ vars.AGENTRUN_APP_ID }}",
        "private-key": "${{ secrets.AGENTRUN_APP_PRIVATE_KEY }}",
        # The App's token may do what the job's token may, and no more.
        **{f"permission-{scope}": grant for scope, grant in job["permissions"].items()},
    }
    assert steps[2]["with"]["github-token"] == "${{ steps.app-token.outputs.token }}"
    found = zizmor(flow)
    assert found.returncode == 0, found.stdout + found.stderr
    found = actionlint(flow)
    assert (found.returncode, found.stdout) == (0, ""), found.stdout + found.stderr


def test_the_readme_says_how_to_set_up_the_app() -> None:
    text = " ".join(README.read_text().split())
    for needed in (
        "`AGENTRUN_APP_ID`",
        "`AGENTRUN_APP_PRIVATE_KEY`",
        "`actions/create-github-app-token`",
        "keep `timeout-minutes` under 60",
        "Contents, Pull requests, Issues and Commit statuses",
    ):
        assert needed in text, needed
