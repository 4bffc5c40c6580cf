"""Running a hostile ``command`` agent in a real ``git agentrun run``, as CI would.

The runner is started from ``sh -c`` with the forge token exported, so the token sits in
the runner's environment, its parent shell's and git's; the repository's config holds it
too, persisted the way actions/checkout does (``http.<url>.extraheader``).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from agentrun.store.log import EventLog

HERE = Path(__file__).parent
VENV_BIN = Path(sys.executable).parent
AGENT = "tools/hostile_agent.py"
IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}
SCRIPT = ""  # the scripted roles use their defaults: plan, approve, pass


def fake_token() -> str:
    alphabet = string.ascii_letters + string.digits
    return "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))


def token_forms(token: str) -> list[bytes]:
    """The token as an agent could find it: plain, base64, and checkout's basic-auth header."""
    plain = token.encode()
    return [
        plain,
        base64.b64encode(plain),
        base64.b64encode(b"x-access-token:" + plain),
    ]


@dataclass
class Run:
    root: Path  # everything of this run: the repository, HOME, the marker
    repo_path: Path
    slug: str
    code: int
    output: str
    token: str
    marker: Path
    mode: str

    @property
    def repo(self) -> pygit2.Repository:
        return open_repo(self.repo_path)

    @property
    def worktree(self) -> Path:
        (folder,) = (self.root / "worktrees").iterdir()
        return folder / self.slug

    @property
    def loot(self) -> Path:
        return self.worktree / ".agentrun" / "run" / "loot"

    def payloads(self) -> list[Any]:
        return [stored.event.payload for stored in EventLog(self.repo).read(self.slug)]

    def found(self, name: str) -> bytes:
        return (self.loot / name).read_bytes()

    def attacks(self) -> dict[str, dict[str, object]]:
        data: dict[str, dict[str, object]] = json.loads(self.found("attacks.json"))
        return data


def open_repo(path: Path) -> pygit2.Repository:
    """The run's repository, also when another account (the sudo runner) owns it."""
    before = pygit2.settings.owner_validation
    pygit2.settings.owner_validation = False
    try:
        return pygit2.Repository(str(path))
    finally:
        pygit2.settings.owner_validation = before


def git(cwd: Path, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def prepare(root: Path, mode: str, hunt_only: bool = False) -> tuple[Path, dict[str, str], str]:
    """A repository with the hostile agent, a HOME holding the token, the runner's env."""
    token = fake_token()
    home = root / "home"
    (home / ".config" / "gh").mkdir(parents=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test Author\n\temail = author@example.com\n"
        "[init]\n\tdefaultBranch = main\n[credential]\n\thelper = store\n"
    )
    for name, text in (
        (".git-credentials", f"https://x-access-token:{token}@github.com\n"),
        (".config/gh/hosts.yml", f"github.com:\n    oauth_token: {token}\n"),
    ):
        (home / name).write_text(text)
        (home / name).chmod(0o600)
    repo_path = root / "repo"
    (repo_path / "tools").mkdir(parents=True)
    shutil.copyfile(HERE / "hostile_agent.py", repo_path / AGENT)
    marker = root / "marker"
    agent_env = {
        "REAL_HOME": str(home),
        "MARKER": str(marker),
        "USER_TREE": str(repo_path),
        **({"HUNT_ONLY": "1"} if hunt_only else {}),
    }
    (repo_path / ".agentrun.toml").write_text(
        f"""\
[roles]
default = ["scripted"]
implement = ["hostile"]

[runtimes.scripted]
kind = "script"
script = "agent-script.toml"

[runtimes.hostile]
kind = "command"
command = [{json.dumps(sys.executable)}, "{AGENT}"]
env = {json.dumps(agent_env).replace('": ', '" = ')}

[pipeline]
plan_review = false

[isolation]
mode = "{mode}"
"""
    )
    (repo_path / "agent-script.toml").write_text(SCRIPT)
    env = {
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "AGENTRUN_WORKTREES": str(root / "worktrees"),
        **IDENTITY,
    }
    git(repo_path, "init", "-q", "-b", "main", env=env)
    git(repo_path, "add", "-A", env=env)
    git(repo_path, "commit", "-q", "-m", "initial", env=env)
    header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    git(
        repo_path,
        "config",
        "--local",
        "http.https://github.com/.extraheader",
        f"AUTHORIZATION: basic {header}",
        env=env,
    )
    return repo_path, env | {"GITHUB_TOKEN": token, "GITHUB_ACTIONS": "true"}, token


# The token comes from the shell's environment, never its argv (argv is public).
SHELL = 'export GITHUB_TOKEN; git agentrun run "$0"; echo "runner exited $?"'


def run_build(root: Path, mode: str, hunt_only: bool = False, as_user: str | None = None) -> Run:
    repo_path, env, token = prepare(root, mode, hunt_only)
    return launch(root, repo_path, env, token, mode, as_user)


def launch(
    root: Path, repo_path: Path, env: dict[str, str], token: str, mode: str, as_user: str | None
) -> Run:
    """``git agentrun run`` in a prepared repository, as CI starts it."""
    argv = ["sh", "-c", SHELL, "add a feature"]
    if as_user is not None:
        subprocess.run(["chown", "-R", f"{as_user}:{as_user}", str(root)], check=True)
        # Through the environment, not argv: every process's argv is public.
        keep = f"--preserve-env={','.join([*env, 'TEST_PATH'])}"
        env["TEST_PATH"] = env["PATH"]
        argv = ["sudo", "-n", "-u", as_user, keep, "--", "sh", "-c", f'PATH="$TEST_PATH"; {SHELL}']
        argv.append("add a feature")
    done = subprocess.run(argv, cwd=repo_path, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    slugs = list(EventLog(open_repo(repo_path)).slugs())
    assert len(slugs) == 1, output
    return Run(root, repo_path, slugs[0], done.returncode, output, token, root / "marker", mode)
