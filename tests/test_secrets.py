"""Secrets never become git objects: scrubbing shapes and remembered values."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure

from agentrun import secrets
from agentrun.commands.build import create_build, run_build
from agentrun.commands.inspect import transcript
from agentrun.events import BuildCreated, ObservationRecorded, SessionStarted
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
ANTHROPIC = "sk-ant-" + "api03-" + "x" * 40
KEY_BLOCK = "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\ndef\n-----END RSA PRIVATE KEY-----"


def every_object(repo_path: Path) -> bytes:
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo_path,
        capture_output=True,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("token", [GITHUB, ANTHROPIC, "AKIA" + "ABCDEFGHIJKLMNOP"])
def test_known_shapes_are_scrubbed(token: str) -> None:
    assert secrets.scrub(f"the token is {token}.") == "the token is [redacted]."


def test_a_private_key_goes_whole() -> None:
    assert secrets.scrub(f"key:\n{KEY_BLOCK}\nafter") == "key:\n[redacted]\nafter"


def test_ordinary_text_is_left_alone() -> None:
    text = "sk-some-long-descriptive-name and ghp_short"
    assert secrets.scrub(text) == text


def test_remembered_values_are_scrubbed_also_inside_json() -> None:
    value = 'p@ss"w\\ord-1234'
    secrets.remember([value])
    assert secrets.scrub(f"x {value} y") == "x [redacted] y"
    escaped = 'p@ss\\"w\\\\ord-1234'
    assert secrets.scrub(f'{{"v": "{escaped}"}}') == '{"v": "[redacted]"}'


def test_short_values_are_not_remembered() -> None:
    secrets.remember(["1", "true"])
    assert secrets.scrub("1 true") == "1 true"


def test_values_of_reads_named_and_forge_variables() -> None:
    env = {"MY_SECRET": "s3cr3t-value", "GITHUB_TOKEN": "gh-token-value", "SHORT": "x"}
    assert secrets.values_of(["MY_SECRET", "SHORT"], env) == ["s3cr3t-value", "gh-token-value"]


def test_appended_events_and_artifacts_are_scrubbed(
    repo: pygit2.Repository, repo_path: Path
) -> None:
    log = EventLog(repo)
    created = BuildCreated(goal="g", base_ref="main", base_sha="0" * 40, branch="agentrun/s")
    tip, _ = log.append("s", [Draft(created)], None)
    note = ObservationRecorded(phase="implement", text=f"leaked {GITHUB}")
    artifact = {"transcript.txt": f"agent said {ANTHROPIC}\n".encode()}
    _, stored = log.append("s", [Draft(note, artifacts=artifact)], tip)
    assert isinstance(stored[0].event.payload, ObservationRecorded)
    assert stored[0].event.payload.text == "leaked [redacted]"
    assert log.text(stored[0].oid, "transcript.txt") == "agent said [redacted]\n"
    objects = every_object(repo_path)
    assert GITHUB.encode() not in objects
    assert ANTHROPIC.encode() not in objects


def test_a_token_an_agent_prints_never_reaches_git(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import subprocess, sys\n"
        "sys.stdin.read()\n"
        f"print('debug: my token is {GITHUB}', flush=True)\n"
        "phase = __import__('os').environ['AGENTRUN_PHASE'].split('@')[0]\n"
        "verbs = {'plan-review': ['approve'], 'code-review': ['approve'], 'implement': ['done']}\n"
        "if phase == 'plan':\n"
        "    open('.agentrun/run/plan.md', 'w').write('a plan')\n"
        "    args = ['plan', '.agentrun/run/plan.md']\n"
        "else:\n"
        "    args = verbs[phase]\n"
        "subprocess.run(['git', 'agentrun', 'agent', *args], check=True)\n"
    )
    base = (
        '[roles]\ndefault = ["agent"]\n\n[runtimes.agent]\nkind = "command"\n'
        f'command = ["python3", "{agent}"]\n'
    )
    configure(repo_path, base=base)
    created = create_build(repo, "leak nothing", allow_empty=True)  # about secrets, not code
    outcome = run_build(repo, created.slug)
    assert outcome.state.state_name == "complete"
    sessions = [
        stored.event.payload.session
        for stored in EventLog(repo).read(created.slug)
        if isinstance(stored.event.payload, SessionStarted)
    ]
    shown = [transcript(repo, created.slug, session).decode() for session in sessions]
    assert shown and all("my token is [redacted]" in text for text in shown)
    assert GITHUB.encode() not in every_object(repo_path)


def test_a_key_an_agent_reports_with_its_verbs_never_reaches_git(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent holds its own key (it needs it) and echoes it into its reports."""
    value = "zq9V" + "secretvalue1234"
    monkeypatch.setenv("MYKEY", value)
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import os, subprocess, sys\n"
        "sys.stdin.read()\n"
        "key = os.environ['MYKEY']\n"
        "phase = os.environ['AGENTRUN_PHASE'].split('@')[0]\n"
        "if phase == 'plan':\n"
        "    open('.agentrun/run/plan.md', 'w').write(f'plan with {key}')\n"
        "    args = ['plan', '.agentrun/run/plan.md']\n"
        "elif phase == 'implement':\n"
        "    args = ['done', '--summary', f'key={key}']\n"
        "else:\n"
        "    args = ['approve']\n"
        "subprocess.run(['git', 'agentrun', 'agent', *args], check=True)\n"
    )
    base = (
        '[roles]\ndefault = ["agent"]\n\n[runtimes.agent]\nkind = "command"\n'
        f'command = ["python3", "{agent}"]\napi_key_env = "MYKEY"\n\n'
        '[secrets]\nenv = ["MYKEY"]\n'
    )
    configure(repo_path, base=base)
    created = create_build(repo, "leak nothing", allow_empty=True)  # about secrets, not code
    assert run_build(repo, created.slug).state.state_name == "complete"
    assert value.encode() not in every_object(repo_path)
