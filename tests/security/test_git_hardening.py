"""The runner's git never runs what an agent planted in the repository (issue 9, item 3).

The attacker writes hooks into the shared ``.git/hooks``, programs into the repository's
config (and a file it includes) and a ``.gitattributes`` into the worktree; every one
of them leaves a mark if it runs. Real git does the work: the runner's worktree
operations, sync's fetch and push, a remote that names its own programs, ``ext::`` and
SSH URLs, credential helpers.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pygit2
import pytest
from conftest import git, make_repo
from runner.helpers import configure, run_cli, tip, types
from security.hostile import hostile_agent
from security.planted import ATTRIBUTES, evil_script, fired, plant, plant_remote_programs
from support.smart_http import smart_http

from agentrun import gitcli
from agentrun.config import Config
from agentrun.events import BuildCreated, BuildPauseRequested, HumanActor
from agentrun.gitrepo import signature
from agentrun.kernel.draft import Draft
from agentrun.runner.workspace import PhaseMark, Workspace
from agentrun.store.log import EventLog
from agentrun.store.sync import sync
from agentrun.store.transport import SyncError

TOKEN = "ghs_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SECRET = "s3cret-value-of-a-variable"
SLUG = "b-1"


@pytest.fixture(autouse=True)
def _secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("MY_SECRET", SECRET)
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/nowhere'")


def commit_file(repo: pygit2.Repository, branch: str, name: str, text: str) -> str:
    """A commit made with pygit2 (no git process: nothing planted may run here)."""
    parent = repo.references[f"refs/heads/{branch}"].target
    base = repo[parent].tree
    builder = repo.TreeBuilder(base)
    builder.insert(name, repo.create_blob(text.encode()), pygit2.GIT_FILEMODE_BLOB)
    sig = signature()
    oid = repo.create_commit(f"refs/heads/{branch}", sig, sig, name, builder.write(), [parent])
    return str(oid)


def mark(phase: str) -> PhaseMark:
    return PhaseMark(SLUG, phase, 1, "s1", "work")


def test_the_workspace_runs_nothing_an_agent_planted(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    head = commit_file(repo, "main", "f.txt", "one\ntwo\nthree\n")
    # The user's own filter (git-lfs, say) keeps working, and sees no secret.
    user_marks = tmp_path / "user-marks"
    user_filter = evil_script(user_marks)
    with (Path(os.environ["HOME"]) / ".gitconfig").open("a") as config:
        config.write(f'[filter "userlfs"]\n\tclean = {user_filter} user-filter filter\n')
    workspace = Workspace(repo, SLUG, f"agentrun/{SLUG}")
    path = workspace.prepare(head)

    marks = tmp_path / "marks"
    plant(Path(repo.path), marks)
    (path / ".gitattributes").write_text(ATTRIBUTES + "*.dat filter=userlfs\n")
    (path / "f.txt").write_text("one\ntwo\nthree\nfour\n")
    (path / "x.p").write_text("process me\n")
    (path / "x.h").write_text("hidden driver\n")
    (path / "big.dat").write_text("large\n")
    first = workspace.commit_phase(head, mark("implement"), config=Config())
    workspace.prepare(first)
    # The base moves with a change to the same file: the merge would call the driver.
    base = commit_file(repo, "main", "f.txt", "zero\none\ntwo\nthree\n")
    conflicted = workspace.start_merge(base)

    assert fired(marks) == []
    assert conflicted == ()
    assert (path / "f.txt").read_text() == "zero\none\ntwo\nthree\nfour\n"
    tree = repo[first].tree
    assert tree["x.p"].data == b"process me\n"  # stored as written: no filter ran
    assert fired(user_marks) == ["user-filter"]
    seen = (user_marks / "user-filter").read_text()
    assert TOKEN not in seen and SECRET not in seen
    assert "GITHUB_TOKEN" not in seen and "MY_SECRET" not in seen
    assert "GIT_CONFIG_PARAMETERS" not in seen  # nor any other config from our environment


def test_a_merge_driver_of_the_repository_is_replaced_by_a_text_merge(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    head = commit_file(repo, "main", "f.txt", "one\n")
    workspace = Workspace(repo, SLUG, f"agentrun/{SLUG}")
    path = workspace.prepare(head)
    marks = tmp_path / "marks"
    plant(Path(repo.path), marks)
    (path / ".gitattributes").write_text(ATTRIBUTES)
    (path / "f.txt").write_text("ours\n")
    first = workspace.commit_phase(head, mark("implement"), config=Config())
    workspace.prepare(first)
    base = commit_file(repo, "main", "f.txt", "theirs\n")

    conflicted = workspace.start_merge(base)

    assert fired(marks) == []
    assert conflicted == ("f.txt",)
    text = (path / "f.txt").read_text()
    assert "<<<<<<<" in text and "ours" in text and "theirs" in text


def remote_pair(tmp_path: Path) -> tuple[Path, pygit2.Repository, Path]:
    """A bare remote holding a build log, and a clone of it with the log fetched."""
    seed = make_repo(tmp_path / "seed")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", bare.as_uri(), str(clone))
    return bare, pygit2.Repository(str(clone)), clone


def create_log(repo: pygit2.Repository) -> None:
    head = str(repo.head.target)
    created = BuildCreated(goal="g", base_ref="main", base_sha=head, branch=f"agentrun/{SLUG}")
    EventLog(repo).append(SLUG, [Draft(created, HumanActor(login="t"))], None)


def test_sync_runs_nothing_an_agent_planted(tmp_path: Path) -> None:
    bare, repo, _ = remote_pair(tmp_path)
    marks = tmp_path / "marks"
    evil = plant(Path(repo.path), marks)
    plant_remote_programs(Path(repo.path), evil)
    create_log(repo)

    pushed = sync(repo, "origin")
    # Someone else appends on the remote; the next sync fetches it.
    theirs = EventLog(pygit2.Repository(str(bare)), "elsewhere")
    request = Draft(BuildPauseRequested(), HumanActor(login="t"))
    tip, _ = theirs.append(SLUG, [request], theirs.tip(SLUG))
    pulled = sync(repo, "origin")

    assert fired(marks) == []
    assert pushed.lines() == [f"build {SLUG}: pushed 1 event"]
    assert pulled.lines() == [f"build {SLUG}: pulled 1 event"]
    assert EventLog(repo).tip_oid(SLUG) == tip.oid


@pytest.mark.parametrize(
    "url",
    ["ext::{evil} ext-url", "ssh://git@127.0.0.1:1/remote.git"],
    ids=["ext", "ssh-command"],
)
def test_remote_urls_that_would_run_a_program_run_nothing(tmp_path: Path, url: str) -> None:
    _, repo, _ = remote_pair(tmp_path)
    marks = tmp_path / "marks"
    evil = plant(Path(repo.path), marks)
    repo.remotes.create("evil", url.format(evil=evil))
    create_log(repo)

    with pytest.raises(SyncError, match="with evil failed"):
        sync(repo, "evil")

    assert fired(marks) == []


def test_only_the_users_own_credential_helper_answers(tmp_path: Path) -> None:
    bare, repo, _ = remote_pair(tmp_path)
    marks = tmp_path / "marks"
    plant(Path(repo.path), marks)
    keychain_marks = tmp_path / "keychain"
    keychain = evil_script(keychain_marks)
    helper = tmp_path / "keychain-helper.sh"
    helper.write_text(f"#!/bin/sh\n{keychain} keychain\necho username=me\necho password=pw\n")
    helper.chmod(0o755)
    with (Path(os.environ["HOME"]) / ".gitconfig").open("a") as config:
        config.write(f"[credential]\n\thelper = !{helper}\n")
    create_log(repo)

    with smart_http(bare.parent) as server:
        server.require_auth = True
        repo.remotes.set_url("origin", server.url(bare.name))
        result = sync(repo, "origin")

    assert fired(marks) == []
    assert [line for line in result.lines() if "pushed 1 event" in line]
    expected = "Basic " + base64.b64encode(b"me:pw").decode()
    assert expected in {seen.authorization for seen in server.seen}
    # The GitHub token is for GitHub's server: it never went to this one.
    assert not [s for s in server.seen if s.authorization and "x-access-token" in _basic(s)]
    dump = (keychain_marks / "keychain").read_text()
    assert TOKEN not in dump and SECRET not in dump and "GITHUB_TOKEN" not in dump


def _basic(seen: object) -> str:
    value = str(getattr(seen, "authorization", "")).split()[-1]
    return base64.b64decode(value).decode(errors="replace")


def test_git_gets_only_the_allowed_environment() -> None:
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LC_ALL": "C.UTF-8",
        "GIT_AUTHOR_NAME": "A",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "HTTPS_PROXY": "http://proxy:3128",
        "GITHUB_TOKEN": TOKEN,
        "MY_SECRET": SECRET,
        "GIT_DIR": "/elsewhere/.git",
        "GIT_SSH_COMMAND": "evil",
        "GIT_EXTERNAL_DIFF": "evil",
        "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='evil'",
        "LD_PRELOAD": "/tmp/evil.so",
    }

    local = gitcli.environment(base=base)
    network = gitcli.environment(network=True, base=base)

    allowed = {"PATH", "HOME", "LC_ALL", "GIT_AUTHOR_NAME", *gitcli.FIXED}
    assert set(local) == allowed
    assert set(network) == allowed | {"SSH_AUTH_SOCK", "HTTPS_PROXY"}


def test_a_build_whose_agent_plants_everything_completes_and_runs_none_of_it(
    tmp_path: Path, repo_path: Path, repo: pygit2.Repository
) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo_path), str(bare))
    git(repo_path, "remote", "add", "origin", bare.as_uri())
    marks = tmp_path / "marks"
    base, _ = hostile_agent(tmp_path, "plant", marks)
    configure(repo_path, base=base, extra='[sync]\nremote = "origin"\n')

    # From here on only pygit2 and `git agentrun` touch the repository.
    done = run_cli(repo_path, "run", "add a feature", timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert fired(marks) == []
    assert (Path(repo.path) / "hooks" / "post-checkout").exists()  # the agent did plant
    (slug,) = EventLog(repo).slugs()
    assert types(repo, slug)[-1] == "build.completed"
    remote = pygit2.Repository(str(bare))
    assert str(remote.references[f"refs/agentrun/builds/{slug}"].target) == tip(repo, slug)
    head = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Commit)
    assert head.tree["x.p"].data == b"process me\n"
    assert head.tree["feature.txt"].data == b"made by the hostile agent\n"


def test_the_users_own_ssh_command_is_kept_and_the_repositorys_is_not(tmp_path: Path) -> None:
    _, repo, _ = remote_pair(tmp_path)
    marks = tmp_path / "marks"
    plant(Path(repo.path), marks)
    user_marks = tmp_path / "user-marks"
    user_ssh = evil_script(user_marks)
    with (Path(os.environ["HOME"]) / ".gitconfig").open("a") as config:
        config.write(f"[core]\n\tsshCommand = {user_ssh} user-ssh\n")
    repo.remotes.create("viassh", "ssh://git@127.0.0.1:1/remote.git")

    with pytest.raises(SyncError, match="with viassh failed"):
        sync(repo, "viassh")

    assert fired(marks) == []
    assert fired(user_marks) == ["user-ssh"]
    seen = (user_marks / "user-ssh").read_text()
    assert TOKEN not in seen and SECRET not in seen and "GITHUB_TOKEN" not in seen
