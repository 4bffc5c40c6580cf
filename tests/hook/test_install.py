"""`git agentrun hook install|uninstall`: the hooks folder git uses, and nobody's hook lost."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hook.hookrepo import Clone, make_clone
from runner.helpers import cli_env, git

from agentrun.cli.main import cli
from agentrun.hook.install import template

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = "#!/bin/sh\necho 'their own checks'\n"
ODD = b"#!/bin/sh\n# not UTF-8: \xff\xfe, and no newline at the end\nexit 0"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["hook", *args], catch_exceptions=False)


def executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


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


def test_a_foreign_hook_is_chained_and_put_back_byte_for_byte(here: Path) -> None:
    hooks = here / ".git" / "hooks"
    hook, chained = hooks / "pre-push", hooks / "pre-push.agentrun-chained"
    hook.write_bytes(ODD)
    hook.chmod(0o750)

    result = invoke("install")
    assert (result.exit_code, result.stdout) == (
        0,
        f"installed the agentrun pre-push hook at {hook}; the earlier hook runs first, "
        f"from {chained}\n",
    )
    assert hook.read_text() == template()
    assert (chained.read_bytes(), mode(chained)) == (ODD, 0o750)

    # Installing again (an upgrade) replaces only our shim: nothing is chained twice.
    result = invoke("install")
    assert (result.exit_code, result.stdout) == (
        0,
        f"installed the agentrun pre-push hook at {hook}\n",
    )
    assert hook.read_text() == template()
    assert (chained.read_bytes(), mode(chained)) == (ODD, 0o750)

    result = invoke("uninstall")
    assert (result.exit_code, result.stdout) == (
        0,
        f"removed the agentrun pre-push hook; put back the earlier hook {hook}\n",
    )
    assert (hook.read_bytes(), mode(hook)) == (ODD, 0o750)
    assert not chained.exists()


def test_a_symlinked_hook_is_chained_as_a_symlink(here: Path, tmp_path: Path) -> None:
    target = tmp_path / "their-hook"
    target.write_text(FOREIGN)
    hook = here / ".git" / "hooks" / "pre-push"
    hook.symlink_to(target)

    assert invoke("install").exit_code == 0
    assert (here / ".git" / "hooks" / "pre-push.agentrun-chained").readlink() == target
    assert invoke("uninstall").exit_code == 0
    assert hook.readlink() == target


def test_nothing_is_lost_when_a_chained_hook_is_already_there(here: Path) -> None:
    hooks = here / ".git" / "hooks"
    hook, chained = hooks / "pre-push", hooks / "pre-push.agentrun-chained"
    hook.write_text(FOREIGN)  # e.g. `git lfs install --force` over agentrun's shim
    chained.write_text("#!/bin/sh\n# the hook agentrun chained before\n")

    result = invoke("install")

    assert result.exit_code == 1
    assert result.stderr == (
        f"agentrun: {hook} is not agentrun's hook, and {chained} already holds the hook "
        "agentrun chains: move one of them away first, so that neither is lost\n"
    )
    assert hook.read_text() == FOREIGN
    assert chained.read_text() == "#!/bin/sh\n# the hook agentrun chained before\n"


def test_a_hook_an_older_install_set_aside_is_chained_then_put_back(here: Path) -> None:
    hooks = here / ".git" / "hooks"
    hook, backup = hooks / "pre-push", hooks / "pre-push.agentrun-backup"
    chained = hooks / "pre-push.agentrun-chained"
    hook.write_text(template())  # as `install --force` of agentrun 0.1.0 left them
    backup.write_text(FOREIGN)
    backup.chmod(0o755)

    result = invoke("install")

    assert result.stdout == (
        f"installed the agentrun pre-push hook at {hook}; the hook an earlier install set "
        f"aside runs first again, from {chained}\n"
    )
    assert (chained.read_text(), backup.exists()) == (FOREIGN, False)
    assert invoke("uninstall").exit_code == 0
    assert hook.read_text() == FOREIGN


def test_uninstall_leaves_a_foreign_hook_alone(here: Path) -> None:
    hook = here / ".git" / "hooks" / "pre-push"
    hook.write_text(FOREIGN)

    result = invoke("uninstall")

    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"agentrun: {hook} is not agentrun's pre-push hook; left as it is\n"
    assert hook.read_text() == FOREIGN


def test_pre_commit_s_own_hook_is_chained_with_a_hint(here: Path) -> None:
    hook = here / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n")

    result = invoke("install")

    assert result.exit_code == 0
    assert result.stdout.endswith(
        "pre-push.agentrun-chained. It looks like pre-commit's: you may rather add "
        "agentrun's hook to .pre-commit-config.yaml (see the README)\n"
    )


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


# --- the chained hook under real pushes ----------------------------------------------

SYSTEM_PATH = "/usr/bin:/bin"  # git and sh, and no git-agentrun
ZERO = "0" * 40


def chain(clone: Clone, script: str) -> Path:
    """``script`` installed as the pre-push hook first, then agentrun's over it."""
    hook = clone.path / ".git" / "hooks" / "pre-push"
    hook.write_text(script)
    hook.chmod(0o755)
    clone.git("agentrun", "hook", "install")
    assert hook.read_text() == template()
    return hook.with_name("pre-push.agentrun-chained")


def recorder(folder: Path) -> str:
    """A hook that writes down each run: its arguments, one a line, and its input."""
    return (
        "#!/bin/sh\n"
        f"echo run >>{folder}/runs\n"
        f'printf "%s\\n" "$@" >{folder}/args\n'
        f"cat >{folder}/stdin\n"
    )


def test_the_chained_hook_gets_what_git_gave_and_runs_once(tmp_path: Path) -> None:
    clone = make_clone(tmp_path)
    chain(clone, recorder(tmp_path))
    clone.git("agentrun", "hook", "install")  # twice: still chained once
    clone.git("checkout", "-q", "-b", "feature")
    sha = clone.commit({"a.txt": "a\n"})
    clone.git("tag", "v1")

    done = clone.push("origin", "feature", "v1")

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs").read_text() == "run\n"
    assert (tmp_path / "args").read_text() == f"origin\n{clone.url}\n"
    assert (tmp_path / "stdin").read_text() == (
        f"refs/heads/feature {sha} refs/heads/feature {ZERO}\n"
        f"refs/tags/v1 {sha} refs/tags/v1 {ZERO}\n"
    )
    assert clone.remote_refs()["refs/heads/feature"] == sha


def test_agentrun_checks_after_the_chained_hook_passed(tmp_path: Path) -> None:
    clone = make_clone(tmp_path)
    chain(clone, recorder(tmp_path))
    clone.start_build("b-1", {"a.txt": "a\n"})

    # Without git-agentrun on PATH, agentrun's shim refuses a build branch itself.
    done = clone.push("origin", "agentrun/b-1", env={**cli_env(), "PATH": SYSTEM_PATH})

    assert done.returncode == 1
    assert "agentrun: this push updates a build branch or brings an Agentrun-Goal" in done.stderr
    assert (tmp_path / "runs").read_text() == "run\n"  # the chained hook ran, first
    assert "refs/heads/agentrun/b-1" in (tmp_path / "stdin").read_text()


def test_a_failing_chained_hook_stops_the_push_before_agentrun_runs(tmp_path: Path) -> None:
    clone = make_clone(tmp_path)
    chain(clone, "#!/bin/sh\ncat >/dev/null\necho 'lfs: object missing' >&2\nexit 2\n")
    clone.start_build("b-1", {"a.txt": "a\n"})
    bindir = tmp_path / "fake-bin"  # a git-agentrun that records that it ran
    bindir.mkdir()
    (bindir / "git-agentrun").write_text(f"#!/bin/sh\ntouch {tmp_path}/agentrun-ran\n")
    (bindir / "git-agentrun").chmod(0o755)
    env = {**cli_env(), "PATH": f"{bindir}{os.pathsep}{SYSTEM_PATH}"}

    for branch in ("main", "agentrun/b-1"):
        done = clone.push("origin", f"{branch}:refs/heads/{branch}-copy", env=env)
        assert done.returncode == 1, done.stderr
        assert "lfs: object missing" in done.stderr
        assert "agentrun:" not in done.stderr  # every line of agentrun's starts so
        assert f"refs/heads/{branch}-copy" not in clone.remote_refs()
    assert not (tmp_path / "agentrun-ran").exists()


def test_a_chained_hook_that_is_not_executable_is_left_out_as_git_would(
    tmp_path: Path,
) -> None:
    clone = make_clone(tmp_path)
    chained = chain(clone, "#!/bin/sh\nexit 1\n")
    chained.chmod(0o644)  # git itself ignores a hook that is not executable

    assert clone.push("origin", "main:refs/heads/other").returncode == 0
