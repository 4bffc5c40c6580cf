"""The hook through the pre-commit framework, from this repository's .pre-commit-hooks.yaml.

pre-commit clones the hook repository at a revision and installs it (``language:
python``) into an environment of its own; the push below runs with a PATH that holds no
other git-agentrun. The hook gets no standard input there, only ``PRE_COMMIT_*``
variables for the pushed ref.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hook.hookrepo import GITHUB, Clone, make_clone
from runner.helpers import VENV_BIN, cli_env, git

ROOT = Path(__file__).resolve().parents[2]
# What pre-commit needs to install and run the hook, as it is in the working tree now.
# (flit_core refuses to build without the licence files and the data/ folder it names.)
SHIPPED = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "NOTICE",
    ".pre-commit-hooks.yaml",
    "hooks",
    "data",
    "src",
)
SYSTEM_PATH = "/usr/bin:/bin"


def hook_repository(tmp_path: Path) -> tuple[str, str]:
    """A git repository holding this working tree's files (HEAD may lag behind them)."""
    path = tmp_path / "agentrun-src"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    listed = git(ROOT, "ls-files", "-co", "--exclude-standard", "-z", "--", *SHIPPED)
    for name in filter(None, listed.split("\0")):
        source, target = ROOT / name, path / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "agentrun as it is now")
    return path.as_uri(), git(path, "rev-parse", "HEAD")


@pytest.fixture
def clone(tmp_path: Path) -> Clone:
    url, rev = hook_repository(tmp_path)
    made = make_clone(tmp_path)
    made.git("agentrun", "hook", "uninstall")
    config = f"repos:\n- repo: {url}\n  rev: {rev}\n  hooks:\n  - id: agentrun\n"
    made.commit({".pre-commit-config.yaml": config}, "use agentrun's hook")
    made.git("push", "-q", "origin", "main")
    subprocess.run(
        [str(VENV_BIN / "pre-commit"), "install", "--hook-type", "pre-push"],
        cwd=made.path,
        env=cli_env(),
        check=True,
        capture_output=True,
    )
    return made


@pytest.mark.slow
def test_pre_commit_runs_the_hook_from_the_manifest(clone: Clone, tmp_path: Path) -> None:
    env = cli_env({"PATH": SYSTEM_PATH, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")})
    clone.start_build("b-1", {"app.py": "VALUE = 1\n"})
    bad = clone.commit({"settings.py": f"# settings\nKEY = {GITHUB!r}\n"})

    done = clone.push("origin", "agentrun/b-1", env=env)

    assert done.returncode == 1, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "- hook id: agentrun" in output
    assert f"commit {bad[:10]} adds a GitHub token in settings.py at line 2" in output
    assert GITHUB not in output
    assert "refs/heads/agentrun/b-1" not in clone.remote_refs()

    clone.git("reset", "-q", "--hard", "HEAD~1")
    done = clone.push("origin", "agentrun/b-1", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    remote = clone.remote_refs()
    for ref in ("refs/heads/agentrun/b-1", "refs/agentrun/builds/b-1"):
        assert remote[ref] == clone.local(ref), ref

    clone.git("checkout", "-q", "-b", "feature")
    clone.commit({"settings.py": f"KEY = {GITHUB!r}\n"})  # not a build branch: not checked
    done = clone.push("origin", "feature", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
