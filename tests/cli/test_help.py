"""Help where people look for it: `git agentrun --help` (man), `help COMMAND`, completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from runner.helpers import VENV_BIN, cli_env

from agentrun.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "data" / "share" / "man" / "man1" / "git-agentrun.1"


def test_the_committed_man_page_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "manpage.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = PAGE.read_text(encoding="utf-8")
    for command in ("run", "resume", "sweep", "status", "help", "completion", "pulls merge"):
        assert f'.SS "git agentrun {command} ' in text
    assert ".SH EXIT STATUS" in text


def test_git_agentrun_help_shows_the_man_page_of_a_venv_install(tmp_path: Path) -> None:
    """A wheel installed into a venv (the pipx layout): man finds its page from PATH alone."""
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(ROOT)], check=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheel = next(wheels.glob("git_agentrun-*.whl"))
    install = [*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps"]
    subprocess.run([*install, str(wheel)], check=True)
    assert (venv / "share" / "man" / "man1" / "git-agentrun.1").is_file()

    env = {k: v for k, v in cli_env().items() if k not in ("MANPATH", "MANPAGER", "PAGER")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env["MANPAGER"] = env["GIT_PAGER"] = "cat"
    where = subprocess.run(
        ["man", "-w", "git-agentrun"], env=env, capture_output=True, text=True, check=False
    )
    assert where.stdout.strip() == str(venv / "share" / "man" / "man1" / "git-agentrun.1")
    shown = subprocess.run(
        ["git", "agentrun", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "No manual entry" not in shown.stderr
    assert "git-agentrun - Turn a goal into a reviewed" in " ".join(shown.stdout.split())
    assert "EXIT STATUS" in shown.stdout


def test_help_prints_a_commands_help() -> None:
    runner = CliRunner()
    for args in ([], ["run"], ["pulls", "merge"]):
        shown = runner.invoke(cli, ["help", *args], catch_exceptions=False)
        direct = runner.invoke(cli, [*args, "--help"], catch_exceptions=False)
        assert (shown.exit_code, shown.stdout) == (0, direct.stdout)
    assert (
        "Usage: git agentrun pulls merge [OPTIONS] NUMBER"
        in runner.invoke(cli, ["help", "pulls", "merge"], prog_name="git agentrun").stdout
    )

    unknown = runner.invoke(cli, ["help", "nosuch"], catch_exceptions=False)
    assert unknown.exit_code == 2
    assert "no command 'nosuch': `git agentrun help` lists them" in unknown.stderr


def _bash(script: str, line: str, tmp_path: Path) -> list[str]:
    """What bash offers for ``line`` with git's own completion and ours loaded."""
    words = line.split(" ")
    program = f"""
source /usr/share/bash-completion/completions/git
eval "$(git agentrun completion bash)"
COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}
COMP_WORDS=({" ".join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}
__git_wrap__git_main
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    done = subprocess.run(
        ["bash", "-c", program],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in done.stdout.splitlines() if word.strip()]


def test_bash_completes_git_agentrun_through_gits_completion(tmp_path: Path) -> None:
    assert _bash("bash", "git agentrun ", tmp_path)[:3] == ["abort", "action", "agent"]
    assert _bash("bash", "git agentrun ru", tmp_path) == ["run"]
    assert _bash("bash", "git agentrun app", tmp_path) == ["approve"]
    assert _bash("bash", "git agentrun pulls m", tmp_path) == ["merge"]
    assert set(_bash("bash", "git agentrun sweep --", tmp_path)) >= {"--remote", "--json"}
    assert _bash("bash", "git agentrun completion ", tmp_path) == ["bash", "fish", "zsh"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_completion_script_asks_the_program_under_a_variable_without_a_space(
    shell: str,
) -> None:
    done = subprocess.run(
        ["git", "agentrun", "completion", shell], env=cli_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    joined = " ".join(done.stdout.replace("\\\n", " ").split())
    assert "_GIT_AGENTRUN_COMPLETE=bash_complete git-agentrun" in joined
    # The variable the script sets is the one the program answers to.
    env = cli_env({"_GIT_AGENTRUN_COMPLETE": "bash_complete", "COMP_WORDS": "git-agentrun st"})
    env["COMP_CWORD"] = "1"
    answered = subprocess.run(
        [str(VENV_BIN / "git-agentrun")], env=env, capture_output=True, text=True
    )
    assert answered.stdout.splitlines() == ["plain,status"]


def test_completion_of_an_unknown_shell_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["completion", "tcsh"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "'tcsh' is not one of 'bash', 'fish', 'zsh'" in result.stderr
