"""The forge token lives in the runner's memory and its own git processes only (item 1).

Real ``git agentrun`` processes against a remote served over smart HTTP on 127.0.0.1,
which refuses every request without an ``Authorization`` header and records the ones
it gets. The ``command`` agent that implements dumps what it can see of git's config.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from conftest import git
from runner.helpers import VENV_BIN, WAIT_SECONDS, cli_env, configure, wait_for
from security.hostile import hostile_agent
from support.smart_http import SmartHttp, smart_http

TOKEN = "ghs_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
GOAL = "add a feature"
SYNC = '[sync]\nremote = "origin"\n'
TAKEN = "agentrun: took the credential persisted in "


def basic(user: str, password: str) -> str:
    return "basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def server(tmp_path: Path, repo_path: Path) -> Iterator[SmartHttp]:
    served = tmp_path / "served"
    served.mkdir()
    git(served, "clone", "-q", "--bare", str(repo_path), "remote.git")
    with smart_http(served) as found:
        found.require_auth = True
        yield found


def agentrun(
    repo_path: Path, *args: str, env: dict[str, str], fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "git-agentrun"), *args],
        cwd=repo_path,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=120,
        pass_fds=fds,
    )


def authorizations(server: SmartHttp, what: str) -> set[str | None]:
    return {s.authorization for s in server.seen if what in s.path or what in s.query}


def persist(repo_path: Path, server: SmartHttp, how: str, tmp_path: Path) -> list[Path]:
    """Persist the token the way a CI job does; the config files it touched."""
    url = server.url("remote.git")
    prefix = url.rsplit("/", 1)[0] + "/"
    header = "AUTHORIZATION: " + basic("x-access-token", TOKEN)
    config = repo_path / ".git" / "config"
    if how == "extraheader":  # actions/checkout up to v4
        git(repo_path, "remote", "add", "origin", url)
        git(repo_path, "config", "--local", f"http.{prefix}.extraheader", header)
        return [config]
    if how == "included":  # newer actions/checkout: an included file
        git(repo_path, "remote", "add", "origin", url)
        included = tmp_path / "runner-temp" / "git-credentials-1.config"
        included.parent.mkdir()
        included.write_text(f'[http "{prefix}"]\n\textraheader = {header}\n')
        gitdir = f"includeIf.gitdir:{repo_path / '.git'}.path"
        git(repo_path, "config", "--local", gitdir, str(included))
        return [config, included]
    # GitLab: the job token in the remote's URL
    with_token = url.replace("http://", f"http://gitlab-ci-token:{TOKEN}@")
    git(repo_path, "remote", "add", "origin", with_token)
    return [config]


@pytest.mark.parametrize(
    ("how", "ci"),
    [("extraheader", "GITHUB_ACTIONS"), ("included", "GITHUB_ACTIONS"), ("url", "GITLAB_CI")],
)
def test_a_persisted_credential_is_out_of_the_config_while_agents_run(
    tmp_path: Path, repo_path: Path, server: SmartHttp, how: str, ci: str
) -> None:
    files = persist(repo_path, server, how, tmp_path)
    base, state = hostile_agent(tmp_path, "dump")
    configure(repo_path, base=base, extra=SYNC)
    before = {path: path.read_bytes() for path in files}

    done = agentrun(repo_path, "run", GOAL, env={ci: "true"})

    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("agentrun:")]
    assert line.startswith(TAKEN) and "put back at exit" in line
    seen = (state / "config.txt").read_text() + (state / "environ.txt").read_text()
    assert TOKEN not in seen and basic("x-access-token", TOKEN).split()[1] not in seen
    assert "gitlab-ci-token" not in seen
    user = "gitlab-ci-token" if how == "url" else "x-access-token"
    pushes = authorizations(server, "git-receive-pack")
    assert {a.lower() for a in pushes if a} == {basic(user, TOKEN).lower()}
    assert None not in pushes
    assert {path: path.read_bytes() for path in files} == before
    remote = pygit2.Repository(str(server.root / "remote.git"))
    assert [r for r in remote.references if r.startswith("refs/agentrun/builds/")]


def test_outside_actions_and_gitlab_ci_the_config_is_left_alone(
    tmp_path: Path, repo_path: Path, server: SmartHttp
) -> None:
    persist(repo_path, server, "extraheader", tmp_path)
    base, state = hostile_agent(tmp_path, "dump")
    configure(repo_path, base=base, extra=SYNC)

    done = agentrun(repo_path, "run", GOAL, env={"CI": "true", "GITHUB_ACTIONS": "false"})

    assert done.returncode == 0, done.stdout + done.stderr
    assert TAKEN not in done.stderr
    assert basic("x-access-token", TOKEN).split()[1] in (state / "config.txt").read_text()


def test_the_token_on_a_file_descriptor_reaches_only_the_runners_push(
    tmp_path: Path, repo_path: Path, server: SmartHttp
) -> None:
    git(repo_path, "remote", "add", "origin", server.url("remote.git"))
    base, state = hostile_agent(tmp_path, "dump")
    configure(repo_path, base=base, extra=SYNC)
    read, write = os.pipe()
    os.write(write, (TOKEN + "\n").encode())
    os.close(write)
    env = {
        "AGENTRUN_TOKEN_FD": str(read),
        "GITHUB_SERVER_URL": f"http://127.0.0.1:{server.port}",
        "GITHUB_ACTIONS": "true",
    }
    try:
        done = agentrun(repo_path, "run", GOAL, env=env, fds=(read,))
    finally:
        os.close(read)

    assert done.returncode == 0, done.stdout + done.stderr
    pushes = authorizations(server, "git-receive-pack")
    assert {a.lower() for a in pushes if a} == {basic("x-access-token", TOKEN).lower()}
    seen = (state / "config.txt").read_text() + (state / "environ.txt").read_text()
    assert TOKEN not in seen and basic("x-access-token", TOKEN).split()[1] not in seen


def test_a_token_file_descriptor_that_cannot_be_read_is_one_clear_line(
    tmp_path: Path, repo_path: Path
) -> None:
    done = agentrun(repo_path, "run", GOAL, env={"AGENTRUN_TOKEN_FD": "57"})

    assert done.returncode == 1
    assert done.stderr.startswith("agentrun: AGENTRUN_TOKEN_FD=57 names no readable file")
    assert len(done.stderr.splitlines()) == 1


def test_the_credential_goes_back_when_the_command_fails(
    tmp_path: Path, repo_path: Path, server: SmartHttp
) -> None:
    [config] = persist(repo_path, server, "extraheader", tmp_path)
    before = config.read_bytes()

    done = agentrun(repo_path, "resume", "no-such-build", env={"GITHUB_ACTIONS": "true"})

    assert done.returncode == 1
    assert TAKEN in done.stderr and "no build named 'no-such-build'" in done.stderr
    assert config.read_bytes() == before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_credential_goes_back_on_ctrl_c_and_sigterm(
    tmp_path: Path, repo_path: Path, server: SmartHttp, signum: int
) -> None:
    [config] = persist(repo_path, server, "extraheader", tmp_path)
    base, state = hostile_agent(tmp_path, "hang")
    configure(repo_path, base=base, extra=SYNC)
    before = config.read_bytes()
    proc = subprocess.Popen(
        [str(VENV_BIN / "git-agentrun"), "run", GOAL],
        cwd=repo_path,
        env=cli_env({"GITHUB_ACTIONS": "true"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (state / "config.txt").exists(), "the agent's session")
        during = config.read_bytes()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()

    assert TOKEN not in during.decode() and during != before
    assert proc.returncode == 130, err  # SIGTERM is taken as Ctrl-C
    assert config.read_bytes() == before
