"""Codex and aider complete a whole build under isolation, as Claude Code does.

Under ``[isolation]`` agentrun's sandbox holds the agent; Codex's own sandbox (bubblewrap)
cannot start inside it, so agentrun runs Codex with ``-s danger-full-access`` there. The
repository lives outside the system temp folder, as a user's does: Codex will not set up
its helpers under /tmp.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from conftest import make_repo
from runtimes.test_cli_runtimes import (
    AIDER_REPLIES,
    ModelServer,
    Request,
    Turn,
    aider_table,
    assert_whole_build,
    build_script,
    codex_shell,
    codex_write,
    latest_prompt,
    phase_of,
    run_with,
    tool_agent,
)
from runtimes.test_cli_runtimes import codex_table as codex_runtime

MODES = ("namespace", "user")


@pytest.fixture
def repo_outside_tmp() -> Iterator[tuple[Path, pygit2.Repository]]:
    root = Path(tempfile.mkdtemp(prefix="agentrun-isolated-", dir="/var/tmp"))
    try:
        repo_path = make_repo(root / "repo")
        root.chmod(0o755)  # mkdtemp's 0700 would shut the agent's account out
        yield repo_path, pygit2.Repository(str(repo_path))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def roles(kind: str, mode: str) -> str:
    return f'roles.default = ["{kind}"]\n[isolation]\nmode = "{mode}"\n'


@pytest.mark.parametrize("mode", MODES)
def test_codex_runs_a_whole_build_isolated(
    mode: str, repo_outside_tmp: tuple[Path, pygit2.Repository], tmp_path: Path
) -> None:
    repo_path, repo = repo_outside_tmp
    with ModelServer(tool_agent(build_script(codex_shell, codex_write))) as server:
        table = codex_runtime(server.url, tmp_path / "unused")
        del table["env"]["CODEX_HOME"]  # the per-build HOME holds Codex's own
        slug, outcome = run_with(repo_path, repo, {"codex": table}, roles("codex", mode))
    assert_whole_build(repo_path, repo, slug, outcome)


@pytest.mark.parametrize("mode", MODES)
def test_aider_runs_a_whole_build_isolated(
    mode: str, repo_outside_tmp: tuple[Path, pygit2.Repository]
) -> None:
    repo_path, repo = repo_outside_tmp

    def respond(request: Request) -> Turn:
        phase = phase_of(latest_prompt(request)[1])
        return Turn(text=AIDER_REPLIES.get(phase, "?"), tokens_in=80, tokens_out=20)

    with ModelServer(respond) as server:
        tables = {"aider": aider_table(server.url)}
        slug, outcome = run_with(repo_path, repo, tables, roles("aider", mode))
    assert_whole_build(repo_path, repo, slug, outcome)
