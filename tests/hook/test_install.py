"""`git agentrun hook install|uninstall`: the hooks folder git uses, and nobody's hook lost."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from runner.helpers import git

from agentrun.cli.main import cli
from agentrun.hook.install import template

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = "#!/bin/sh\necho 'their own checks'\n"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["hook", *args], catch_exceptions=False)


def executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


@pytest.fixture
def here(repo_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(repo_path)
    return repo_path


def test_the_shim_in_the_repository_is_the_one_installed() -> None:
    shipped = ROOT / "hooks" / "pre-push"
    assert shipped.read_text() == template()
    assert executable(shipped)
    assert template().startswith("#!/bin/sh\n")


def test_install_writes_an_executable_hook_and_uninstall_removes_it(here: Path) -> None:
    hook = here / ".git" / "hooks" / "pre-push"

    result = invoke("install")
    assert (result.exit_code, result.stdout) == (
        0,
        f"installed the agentrun pre-push hook at {hook}\n",
    )
    assert hook.read_text() == template()
    assert executable(hook)
    # Installing again replaces our own hook without asking (an upgrade).
    hook.write_text(template() + "# an older copy\n")
    assert invoke("install").exit_code == 0
    assert hook.read_text() == template()

    result = invoke("uninstall")
    assert (result.exit_code, result.stdout) == (
        0,
        f"removed the agentrun pre-push hook from {hook}\n",
    )
    assert not hook.exists()
    result = invoke("uninstall")
    assert (result.exit_code, result.stdout) == (
        0,
        f"no pre-push hook at {hook}; nothing to remove\n",
    )


def test_core_hooks_path_is_honoured_also_from_a_subfolder(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(here, "config", "core.hooksPath", ".githooks")
    (here / "src").mkdir()
    monkeypatch.chdir(here / "src")

    assert invoke("install").exit_code == 0

    assert (here / ".githooks" / "pre-push").read_text() == template()
    assert not (here / ".git" / "hooks" / "pre-push").exists()
    assert invoke("uninstall").exit_code == 0
    assert not (here / ".githooks" / "pre-push").exists()


def test_a_linked_worktree_installs_into_the_shared_hooks(
    here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other-worktree"
    git(here, "worktree", "add", "-q", "-b", "side", str(other))
    monkeypatch.chdir(other)

    assert invoke("install").exit_code == 0

    assert (here / ".git" / "hooks" / "pre-push").read_text() == template()


def test_a_foreign_hook_is_refused_then_kept_and_put_back(here: Path) -> None:
    hooks = here / ".git" / "hooks"
    hook, backup = hooks / "pre-push", hooks / "pre-push.agentrun-backup"
    hook.write_text(FOREIGN)

    result = invoke("install")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"agentrun: {hook} is a pre-push hook that is not agentrun's; left as it is. "
        "Rerun with --force to replace it (it is kept as pre-push.agentrun-backup)\n"
    )
    assert hook.read_text() == FOREIGN

    result = invoke("install", "--force")
    assert result.exit_code == 0
    assert result.stdout == (
        f"installed the agentrun pre-push hook at {hook}; the previous hook is kept as {backup}\n"
    )
    assert (hook.read_text(), backup.read_text()) == (template(), FOREIGN)

    result = invoke("uninstall")
    assert (result.exit_code, result.stdout) == (
        0,
        f"removed the agentrun pre-push hook; put back the earlier hook {hook}\n",
    )
    assert hook.read_text() == FOREIGN
    assert not backup.exists()


def test_nothing_is_lost_when_a_backup_is_already_there(here: Path) -> None:
    hooks = here / ".git" / "hooks"
    hook, backup = hooks / "pre-push", hooks / "pre-push.agentrun-backup"
    hook.write_text(FOREIGN)
    backup.write_text("#!/bin/sh\n# an even older hook\n")

    result = invoke("install", "--force")

    assert result.exit_code == 1
    assert result.stderr == (
        f"agentrun: {backup} already holds an earlier hook; move it away first, so that "
        "neither hook is lost\n"
    )
    assert hook.read_text() == FOREIGN


def test_uninstall_leaves_a_foreign_hook_alone(here: Path) -> None:
    hook = here / ".git" / "hooks" / "pre-push"
    hook.write_text(FOREIGN)

    result = invoke("uninstall")

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"agentrun: {hook} is not agentrun's pre-push hook; left as it is\n"
    assert hook.read_text() == FOREIGN


def test_pre_commit_s_own_hook_gets_a_hint(here: Path) -> None:
    hook = here / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n")

    result = invoke("install")

    assert result.exit_code == 1
    assert "add agentrun's hook to .pre-commit-config.yaml instead" in result.stderr


def test_outside_a_repository_install_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))

    result = invoke("install")

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"agentrun: {tmp_path} is not inside a git repository: run this in the repository "
        "to protect\n"
    )
