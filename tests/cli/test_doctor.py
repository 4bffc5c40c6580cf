"""``git agentrun doctor``: which runtimes can run here; and what ``run`` picks with no roles."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner, Result
from runner.helpers import SCRIPT, SCRIPTED, configure, git, payloads
from support.model_server import ModelServer

from agentrun.cli.main import cli
from agentrun.commands.build import create_build
from agentrun.commands.doctor import auto_pick, diagnose
from agentrun.config import Config, parse_config
from agentrun.errors import ConfigError

MISSING = "agentrun-no-such-agent"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def command_runtime(program: str, roles: str = 'default = ["agent"]') -> str:
    return f"""\
[roles]
{roles}

[runtimes.agent]
kind = "command"
command = [{json.dumps(program)}, "agent.py"]
"""


# The last line names the forge, the one before it the isolation level (tests/security checks
# it), and the one before that says what the default role runs on.
def rows(output: str) -> dict[str, list[str]]:
    """The doctor table by runtime name: [KIND, ROLES, RUNS, DETAIL]."""
    lines = output.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["RUNTIME", "KIND", "ROLES", "RUNS", "DETAIL"]
    table = {}
    for line in lines[1:]:
        if line.startswith(("default role", "the default role", "no runtime")):
            break
        name, *rest = re.split(r"\s{2,}", line.strip(), maxsplit=4)
        table[name] = rest
    return table


@pytest.fixture
def here(repo_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(repo_path)
    return repo_path


def write_config(repo_path: Path, text: str) -> None:
    (repo_path / ".agentrun.toml").write_text(text)
    git(repo_path, "add", ".agentrun.toml")
    git(repo_path, "commit", "-q", "-m", "configure agentrun")


def fake_cli(folder: Path, name: str) -> Path:
    """An executable ``name`` in ``folder`` that answers ``--version`` as a CLI would."""
    folder.mkdir(exist_ok=True)
    program = folder / name
    program.write_text('#!/bin/sh\necho "2.1.0 (Claude Code)"\n')
    program.chmod(0o755)
    return program


# --- configured runtimes ---------------------------------------------------------------------


def test_a_command_runtime_that_can_run(here: Path) -> None:
    write_config(
        here, command_runtime(sys.executable, 'default = ["agent"]\ncode-review = ["agent"]')
    )
    result = invoke("doctor")

    assert result.exit_code == 0, result.output
    assert rows(result.stdout) == {
        "agent": ["command", "default,code-review", "ok", f"{sys.executable} at {sys.executable}"],
    }
    assert result.stdout.splitlines()[-3] == "default role runs on: agent (configured)"


def test_a_missing_program_fails_the_default_role(here: Path) -> None:
    write_config(here, command_runtime(MISSING))
    result = invoke("doctor")

    assert result.exit_code == 1
    assert rows(result.stdout) == {"agent": ["command", "default", "no", f"{MISSING} not found"]}
    assert result.stdout.splitlines()[-3] == (
        "the default role cannot run: none of agent is usable"
    )


def test_a_script_runtime(here: Path) -> None:
    configure(here, [])
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    assert rows(result.stdout) == {"scripted": ["script", "default", "ok", f"script {SCRIPT}"]}

    (here / SCRIPT).unlink()
    result = invoke("doctor")
    assert result.exit_code == 1
    (kind, roles, runs, detail) = rows(result.stdout)["scripted"]
    assert (kind, roles, runs) == ("script", "default", "no")
    assert detail.startswith(f"script {SCRIPT} not found")


def test_an_alternate_that_can_run_is_enough(here: Path) -> None:
    config = command_runtime(MISSING, 'default = ["agent", "scripted"]') + (
        f'\n[runtimes.scripted]\nkind = "script"\nscript = "{SCRIPT}"\n'
    )
    write_config(here, config)
    (here / SCRIPT).write_text("")
    result = invoke("doctor")

    assert result.exit_code == 0, result.output
    table = rows(result.stdout)
    assert table["agent"][2] == "no"
    assert table["scripted"][2] == "ok"


def test_a_role_routed_to_an_unconfigured_runtime(here: Path) -> None:
    write_config(here, '[roles]\ndefault = ["ghost"]\n')
    result = invoke("doctor")

    # The config itself is refused, at the key written, before any runtime is probed.
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(
        f"agentrun: {here / '.agentrun.toml'} at `roles.default`: no runtime 'ghost' ("
    )


def test_an_unrouted_runtime_is_listed_but_does_not_decide(here: Path) -> None:
    config = SCRIPTED + f'\n[runtimes.spare]\nkind = "command"\ncommand = ["{MISSING}"]\n'
    write_config(here, config)
    (here / SCRIPT).write_text("")
    result = invoke("doctor")

    assert result.exit_code == 0, result.output
    assert rows(result.stdout)["spare"] == ["command", "-", "no", f"{MISSING} not found"]


def test_an_api_runtime_needs_its_key(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(here, '[roles]\ndefault = ["openai:gpt-5"]\n')
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = invoke("doctor")
    assert result.exit_code == 1
    (kind, _, runs, detail) = rows(result.stdout)["openai:gpt-5"]
    assert (kind, runs) == ("openai", "no")
    assert "OPENAI_API_KEY" in detail

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    assert rows(result.stdout)["openai:gpt-5"][2] == "ok"


def test_doctor_says_a_local_model_costs_nothing_unless_priced(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCK_KEY", "k-test")
    with ModelServer() as server:
        local = f'kind = "openai"\nbase_url = "{server.url}/v1"\napi_key_env = "MOCK_KEY"\n'
        write_config(
            here,
            '[roles]\ndefault = ["local"]\nplan = ["proxy", "cloud"]\n\n'
            f'[runtimes.local]\n{local}model = "qwen3"\n\n'
            f'[runtimes.proxy]\n{local}model = "gpt-5"\n\n'
            '[runtimes.cloud]\nkind = "openai"\nbase_url = "https://llm.example.com/v1"\n'
            'model = "qwen3"\napi_key_env = "MOCK_KEY"\n',
        )
        result = invoke("doctor")

    lines = result.stdout.splitlines()
    assert rows(result.stdout)["local"][2] == "ok"
    # After what the default role runs on, before the isolation and forge lines.
    assert lines[-5:-2] == [
        "default role runs on: local (configured)",
        f"price: local runs qwen3 on this machine ({server.url}/v1): "
        'it costs $0 unless [prices."qwen3"] prices it',
        f"price: proxy runs gpt-5 on this machine ({server.url}/v1): "
        "priced at $1.25 in, $10 out per million tokens",
    ]


# --- picking a runtime when none is routed -----------------------------------------------------


def no_keys(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.setenv("PATH", str(path))
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_auto_pick_finds_the_claude_cli_on_path(tmp_path: Path) -> None:
    claude = fake_cli(tmp_path / "bin", "claude")
    config, said = auto_pick(Config(), {"PATH": str(claude.parent)})

    assert config.roles == {"default": ("claude",)}
    assert said == f"claude (2.1.0 (Claude Code) at {claude})"


def test_auto_pick_by_api_key_without_any_cli(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    config, said = auto_pick(Config(), {"PATH": str(empty), "ANTHROPIC_API_KEY": "sk-ant-x"})
    assert config.roles == {"default": ("anthropic",)}
    assert "ANTHROPIC_API_KEY" in said

    with pytest.raises(ConfigError, match="none can run here"):
        auto_pick(Config(), {"PATH": str(empty)})


def test_doctor_without_a_config(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    no_keys(monkeypatch, bin_dir)
    result = invoke("doctor")
    assert result.exit_code == 1
    table = rows(result.stdout)
    assert list(table) == ["claude", "codex", "anthropic", "openai", "aider"]
    assert all(row[2] == "no" for row in table.values())
    assert result.stdout.splitlines()[-3] == (
        "no runtime can run here: configure one (`git agentrun init`)"
    )

    claude = fake_cli(bin_dir, "claude")
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    assert rows(result.stdout)["claude"] == [
        "claude",
        "-",
        "ok",
        f"2.1.0 (Claude Code) at {claude}",
    ]
    assert result.stdout.splitlines()[-3] == (
        "default role runs on: claude (picked, none is configured)"
    )


# claude, codex and aider as configured command runtimes: probed by whether their program
# is on PATH (no runtime module of theirs is needed); anthropic and openai by their key.
AS_COMMANDS_TOML = "\n".join(
    f'[runtimes.{name}]\nkind = "command"\ncommand = ["{name}"]\n'
    for name in ("claude", "codex", "aider")
)
AS_COMMANDS = parse_config(AS_COMMANDS_TOML, "test.toml")


def test_auto_pick_takes_the_first_that_can_run(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    claude = fake_cli(bin_dir, "claude")
    fake_cli(bin_dir, "aider")
    config, said = auto_pick(AS_COMMANDS, {"PATH": str(bin_dir), "OPENAI_API_KEY": "sk-x"})

    assert config.roles == {"default": ("claude",)}
    assert said == f"claude (claude at {claude})"
    assert config.runtimes == AS_COMMANDS.runtimes


def test_auto_pick_by_api_key(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    environ = {"PATH": str(empty), "ANTHROPIC_API_KEY": "sk-ant-x"}
    config, said = auto_pick(AS_COMMANDS, environ)

    assert config.roles == {"default": ("anthropic",)}
    assert said.startswith("anthropic (")
    assert "ANTHROPIC_API_KEY" in said
    found = diagnose(AS_COMMANDS, environ)
    assert (found.default, found.default_ok, found.picked) == (("anthropic",), True, True)


def test_auto_pick_says_how_to_configure_when_nothing_can_run(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError) as raised:
        auto_pick(AS_COMMANDS, {"PATH": str(empty)})
    message = str(raised.value)
    assert message.startswith("no agent runtime is configured and none can run here")
    assert "ANTHROPIC_API_KEY is not set" in message
    assert "git agentrun init" in message
    assert "git agentrun doctor" in message
    assert diagnose(AS_COMMANDS, {"PATH": str(empty)}).default_ok is False


def test_auto_pick_keeps_configured_roles_alone(tmp_path: Path) -> None:
    """With roles configured nothing is picked: the default role is what the config says."""
    config = Config.model_validate(
        {**AS_COMMANDS.model_dump(mode="json"), "roles": {"default": ["codex"]}}
    )
    found = diagnose(config, {"PATH": str(fake_cli(tmp_path / "bin", "claude").parent)})
    assert (found.default, found.default_ok, found.picked) == (("codex",), False, False)


def test_run_without_roles_picks_and_says_so(
    repo_path: Path,
    repo: pygit2.Repository,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_config(repo_path, AS_COMMANDS_TOML)
    claude = fake_cli(tmp_path / "bin", "claude")
    monkeypatch.setenv("PATH", f"{claude.parent}:/usr/bin:/bin")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    created = create_build(repo, "Add the app module")
    assert created.picked == f"claude (claude at {claude})"
    (snapshot,) = payloads(repo, created.slug, "build.created")
    assert snapshot.config["roles"] == {"default": ["claude"]}

    monkeypatch.chdir(repo_path)
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-3] == (
        "default role runs on: claude (picked, none is configured)"
    )


def test_doctor_names_the_forge_and_why(here: Path) -> None:
    write_config(here, command_runtime(sys.executable))
    assert invoke("doctor").stdout.splitlines()[-1] == (
        "forge: local (auto: origin is on neither github.com nor a GitLab host)"
    )
    git(here, "remote", "add", "origin", "https://github.com/someone/project.git")
    assert invoke("doctor").stdout.splitlines()[-1] == (
        "forge: github (auto: origin is on github.com)"
    )
    write_config(here, command_runtime(sys.executable) + '[forge]\nkind = "local"\n')
    assert invoke("doctor").stdout.splitlines()[-1] == "forge: local (configured)"


def test_doctor_names_a_gitlab_origin_as_the_gitlab_forge(here: Path) -> None:
    git(here, "remote", "add", "origin", "git@git.example.org:team/project.git")
    write_config(here, command_runtime(sys.executable))
    assert invoke("doctor").stdout.splitlines()[-1] == (
        "forge: local (auto: origin is on neither github.com nor a GitLab host)"
    )
    url = '[forge]\nurl = "https://git.example.org"\n'
    write_config(here, command_runtime(sys.executable) + url)
    assert invoke("doctor").stdout.splitlines()[-1] == (
        "forge: gitlab (auto: origin is on gitlab.com or on [forge] url's host)"
    )


# --- budgets a runtime cannot hold --------------------------------------------------------


def test_a_budget_on_a_command_agent_is_named_as_unenforceable(here: Path) -> None:
    roles = 'default = ["claude"]\nimplement = ["agent"]\ncode-review = ["agent"]'
    budget = "\n[budget]\nmax_tokens = 400\nmax_cost_usd = 2.5\n"
    write_config(here, command_runtime(sys.executable, roles) + budget)
    result = invoke("doctor")

    assert result.stdout.splitlines()[-1] == (
        "budget: max_tokens = 400 and max_cost_usd = 2.5 cannot be enforced on runtime agent "
        "(command, roles implement, code-review): its usage is unreported unless the agent "
        "reports it with `git agentrun agent usage`, which makes the budget enforceable"
    )


def test_no_budget_or_no_command_agent_is_nothing_to_name(here: Path) -> None:
    write_config(here, command_runtime(sys.executable))
    assert "budget:" not in invoke("doctor").stdout
    write_config(here, f"{SCRIPTED}\n[budget]\nmax_tokens = 400\n")
    assert "budget:" not in invoke("doctor").stdout


def test_doctor_names_each_rung_of_a_ladder_with_its_role(tmp_path: Path) -> None:
    config = parse_config(
        '[roles]\ndefault = ["codex"]\n[ladder.implement]\nrungs = ["codex", "claude"]\n',
        "x.toml",
    )
    rows = {row.name: row.roles for row in diagnose(config, {"PATH": str(tmp_path)}).rows}
    assert rows["codex"] == ("default", "implement (rung 0)")
    assert rows["claude"] == ("implement (rung 1)",)


# --- the forge's CI as a gate ---------------------------------------------------------------


def test_doctor_says_what_the_ci_gate_waits_for_and_warns_of_the_workflow_token(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = '[forge]\nrequire_checks = ["test", "lint"]\nchecks_timeout_minutes = 30\n'
    write_config(here, command_runtime(sys.executable) + gate)
    assert invoke("doctor").stdout.splitlines()[-1] == (
        "checks: [forge] require_checks (test, lint) needs a hosted forge; this is local"
    )
    git(here, "remote", "add", "origin", "https://github.com/someone/project.git")
    lines = invoke("doctor").stdout.splitlines()
    assert lines[-2] == "checks: ready waits for test, lint on the head (a question after 30 min)"
    assert lines[-1].startswith("checks: note: pushes made with the workflow's own token start")
    monkeypatch.setenv("AGENTRUN_DEFAULT_TOKEN", "true")  # action.yml: github-token's default
    assert invoke("doctor").stdout.splitlines()[-1] == (
        "checks: warning: pushes made with the workflow's own token (github.token) start no "
        "workflows, so your CI does not run on agentrun's pushes and [forge] require_checks "
        "would wait for checks that never come: give the action a GitHub App's token "
        "(github-token; the README's GitHub App section)"
    )
