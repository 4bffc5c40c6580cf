"""What the hook tests share: a clone with the hook installed, a bare remote, tokens."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pygit2
from runner.helpers import cli_env, git

from agentrun.events import BuildCreated, HumanActor
from agentrun.kernel.draft import Draft
from agentrun.store.log import EventLog

# Token shapes, built at run time so that no literal token sits in this repository.
GITHUB = "ghp_" + "aB3dE5" * 6
GITHUB_FINE = "github_pat_" + "A1b2C3d4E5" * 2 + "Zz" + "_" + "q9W8e7R6t5" * 5 + "y4U3i2O1p"
GITHUB_APP = "ghs_" + "Zy9Xw8" * 6
GITLAB = "glpat-" + "x1Y2z3" * 4
AWS = "AKIA" + "IOSF0DNN7K3Y4B5Q"
SLACK = "xoxb-" + "1234567890-" + "abcDEF123ghi"
OPENAI = "sk-proj-" + "Tq3Lm9Xv2Rb7" * 4
OPENAI_CLASSIC = "sk-" + "Ab9Cd8Ef7Gh6" * 4
ANTHROPIC = "sk-ant-api03-" + "Qw3Er5Ty7Ui9" * 4
PRIVATE_KEY = "-----BEGIN OPENSSH " + "PRIVATE KEY-----"
SHAPES = {
    "a GitHub token": [GITHUB, GITHUB_FINE, GITHUB_APP],
    "a GitLab token": [GITLAB],
    "an AWS access key id": [AWS],
    "a Slack token": [SLACK],
    "an OpenAI key": [OPENAI, OPENAI_CLASSIC],
    "an Anthropic key": [ANTHROPIC],
    "a private key": [PRIVATE_KEY],
}
EVERY_TOKEN = [token for tokens in SHAPES.values() for token in tokens]
SECRET_VALUE = "deploy-" + "Zx81Qm" * 3


@dataclass(frozen=True)
class Clone:
    path: Path
    remote: Path  # the bare repository
    url: str

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def push(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A real ``git push`` (the installed hook runs) with this venv's scripts on PATH."""
        return subprocess.run(
            ["git", "push", *args],
            cwd=self.path,
            env=cli_env() if env is None else dict(env),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def commit(self, files: Mapping[str, str], message: str = "change") -> str:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def remote_refs(self) -> dict[str, str]:
        out = git(self.remote, "for-each-ref", "--format=%(objectname) %(refname)")
        return {name: sha for sha, name in (line.split() for line in out.splitlines())}

    def local(self, ref: str) -> str:
        return self.git("rev-parse", ref)

    def start_build(self, slug: str, files: Mapping[str, str] | None = None) -> str:
        """A build log started from HEAD and its branch checked out, as `run` leaves them."""
        repo = pygit2.Repository(str(self.path))
        base = self.local("HEAD")
        created = BuildCreated(
            goal=f"goal of {slug}", base_ref="main", base_sha=base, branch=f"agentrun/{slug}"
        )
        EventLog(repo).append(slug, [Draft(created, HumanActor(login="test"))], None)
        self.git("checkout", "-q", "-b", f"agentrun/{slug}")
        if files:
            self.commit(files, f"work on {slug}")
        return base


def make_clone(tmp_path: Path) -> Clone:
    """main pushed to a bare remote (named ``origin``), then the hook installed."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    path = tmp_path / "clone"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    url = remote.as_uri()
    git(path, "remote", "add", "origin", url)
    made = Clone(path, remote, url)
    made.commit({"README.md": "hello\n", "tests/acceptance/test_login.py": "def test(): ...\n"})
    git(path, "push", "-q", "origin", "main")
    git(path, "agentrun", "hook", "install")
    return made
