"""The installed pre-push hook under real ``git push`` to a bare remote on ``file://``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner
from hook.hookrepo import EVERY_TOKEN, GITHUB, SECRET_VALUE, SHAPES, Clone, make_clone
from runner.helpers import cli_env, configure, git

from agentrun.cli.main import cli
from agentrun.commands.build import create_build, run_build
from agentrun.config import parse_config
from agentrun.events import BuildCreated, ObservationRecorded
from agentrun.kernel.draft import Draft
from agentrun.store.archive import archive
from agentrun.store.log import EventLog, Tip
from agentrun.store.notes import NOTES_REF

PROTECT = '[protect]\npaths = ["tests/acceptance/**", ".github/workflows/*.yml"]\n'
LOG = "refs/agentrun/builds/"
BRANCH = "refs/heads/agentrun/"
SYSTEM_PATH = "/usr/bin:/bin"  # git and sh, and no git-agentrun


@pytest.fixture
def clone(tmp_path: Path) -> Clone:
    """main pushed to a bare remote on ``file://`` (named ``origin``), the hook installed."""
    return make_clone(tmp_path)


def protect(clone: Clone, text: str = PROTECT) -> None:
    """The config on main, pushed, so that every build starts from it."""
    clone.commit({".agentrun.toml": text}, "protect the acceptance tests")
    clone.git("push", "-q", "--no-verify", "origin", "main")


def refused(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The findings the hook named; the push must have failed."""
    assert done.returncode == 1, done.stderr
    assert re.search(
        r"^agentrun: push refused: commits going to \S+ break a guard$", done.stderr, re.M
    )
    assert "error: failed to push some refs" in done.stderr
    return [line.strip() for line in done.stderr.splitlines() if line.startswith("  commit ")]


def fake_agentrun(tmp_path: Path) -> tuple[str, Path]:
    """A PATH whose git-agentrun only records that it ran, its arguments and its input."""
    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    record = tmp_path / "fake-record"
    script = bindir / "git-agentrun"
    script.write_text(f'#!/bin/sh\necho "$@" >> {record}\ncat >> {record}\n')
    script.chmod(0o755)
    return f"{bindir}{os.pathsep}{SYSTEM_PATH}", record


# --- pushes that touch no build branch -----------------------------------------------


def test_other_pushes_pass_without_starting_python(clone: Clone, tmp_path: Path) -> None:
    """The shim alone decides: no git-agentrun runs for branches, tags or deletions."""
    path, record = fake_agentrun(tmp_path)
    env = {**cli_env(), "PATH": path}
    protect(clone, "this is not toml")  # the config is not even read
    clone.git("checkout", "-q", "-b", "feature")
    clone.commit({"tests/acceptance/test_login.py": f"TOKEN = {GITHUB!r}\n"})
    clone.git("tag", "v1")
    pushes = [
        ("origin", "feature"),
        ("origin", "v1"),
        ("--tags", "origin"),
        ("origin", "feature:main"),
        ("origin", "--delete", "feature"),
        (clone.url, "HEAD:refs/heads/other"),
    ]
    for args in pushes:
        done = clone.push(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        assert "agentrun:" not in done.stderr
    assert not record.exists()
    assert clone.remote_refs()["refs/tags/v1"] == clone.local("v1")


def test_the_shim_hands_build_pushes_over_with_arguments_and_input(
    clone: Clone, tmp_path: Path
) -> None:
    path, record = fake_agentrun(tmp_path)
    clone.git("checkout", "-q", "-b", "agentrun/b-1")
    head = clone.commit({"a.txt": "a\n"})

    done = clone.push("origin", "agentrun/b-1", env={**cli_env(), "PATH": path})

    assert done.returncode == 0, done.stderr
    lines = record.read_text().splitlines()
    assert lines[0] == f"hook pre-push origin {clone.url}"
    assert lines[1] == f"refs/heads/agentrun/b-1 {head} refs/heads/agentrun/b-1 {'0' * 40}"


def test_without_git_agentrun_a_build_push_says_how_to_install_it(clone: Clone) -> None:
    assert shutil.which("git-agentrun", path=SYSTEM_PATH) is None
    clone.git("checkout", "-q", "-b", "agentrun/b-1")
    clone.commit({"a.txt": "a\n"})
    env = {**cli_env(), "PATH": SYSTEM_PATH}

    done = clone.push("origin", "agentrun/b-1", env=env)
    assert done.returncode == 1
    assert "pipx install git-agentrun" in done.stderr and "AGENTRUN_HOOK_OPTIONAL=1" in done.stderr
    assert f"{BRANCH}b-1" not in clone.remote_refs()

    done = clone.push("origin", "agentrun/b-1", env={**env, "AGENTRUN_HOOK_OPTIONAL": "1"})
    assert done.returncode == 0, done.stderr
    assert "agentrun: warning: git-agentrun is not on PATH" in done.stderr
    assert clone.remote_refs()[f"{BRANCH}b-1"] == clone.local("HEAD")


# --- the guards -----------------------------------------------------------------------


def test_a_protected_path_is_refused_naming_commit_and_path(clone: Clone) -> None:
    protect(clone)
    clone.start_build("b-1", {"src/app.py": "VALUE = 1\n"})
    bad = clone.commit({"tests/acceptance/test_login.py": "def test(): assert True\n"})
    clone.commit({".github/workflows/ci.yml": "on: push\n"})
    moved = clone.git("rev-parse", "HEAD")

    findings = refused(clone.push("origin", "agentrun/b-1"))

    assert findings == [
        f"commit {moved[:10]} changes .github/workflows/ci.yml, a protected path "
        "(protect.paths: '.github/workflows/*.yml')",
        f"commit {bad[:10]} changes tests/acceptance/test_login.py, a protected path "
        "(protect.paths: 'tests/acceptance/**')",
    ]
    assert f"{BRANCH}b-1" not in clone.remote_refs()
    assert f"{LOG}b-1" not in clone.remote_refs()


def test_deleting_or_renaming_a_protected_file_is_refused_too(clone: Clone) -> None:
    protect(clone)
    clone.start_build("b-1")
    clone.git("mv", "tests/acceptance/test_login.py", "tests/test_login.py")
    clone.git("commit", "-q", "-m", "move it")
    findings = refused(clone.push("origin", "agentrun/b-1"))
    assert [f.split(" ", 2)[2] for f in findings] == [
        "changes tests/acceptance/test_login.py, a protected path "
        "(protect.paths: 'tests/acceptance/**')"
    ]


def test_every_token_shape_is_refused_by_file_and_line_never_shown(clone: Clone) -> None:
    protect(clone, '[secrets]\nenv = ["DEPLOY_TOKEN"]\n')
    clone.start_build("b-1")
    files = {f"config/{i}.py": f"# setting\nKEY = {t!r}\n" for i, t in enumerate(EVERY_TOKEN)}
    files["deploy.sh"] = f"#!/bin/sh\ncurl -H 'auth: {SECRET_VALUE}' x\n"
    head = clone.commit(files, "add settings")
    env = cli_env({"DEPLOY_TOKEN": SECRET_VALUE})

    done = clone.push("origin", "agentrun/b-1", env=env)

    findings = refused(done)
    kinds = {t: kind for kind, tokens in SHAPES.items() for t in tokens}
    expected = [
        f"commit {head[:10]} adds {kinds[t]} in config/{i}.py at line 2"
        for i, t in enumerate(EVERY_TOKEN)
    ]
    expected.append(f"commit {head[:10]} adds the value of $DEPLOY_TOKEN in deploy.sh at line 2")
    assert sorted(findings) == sorted(expected)
    for secret in [*EVERY_TOKEN, SECRET_VALUE]:
        assert secret not in done.stderr + done.stdout
    assert f"{BRANCH}b-1" not in clone.remote_refs()


def test_only_added_lines_count(clone: Clone) -> None:
    """A secret already on main, kept or removed by the build, is not the build's doing."""
    clone.commit({"old.py": f"KEY = {GITHUB!r}\nOTHER = 1\n", "gone.py": f"K = {GITHUB!r}\n"})
    clone.git("push", "-q", "--no-verify", "origin", "main")
    clone.start_build("b-1", {"old.py": f"KEY = {GITHUB!r}\nOTHER = 2\n", "gone.py": ""})
    clone.git("mv", "old.py", "renamed.py")
    clone.git("commit", "-q", "-m", "rename")
    lookalikes = "sk-some-long-descriptive-name = 'ghp_short'\nAKIA = 'xoxo-hugs'\n"
    clone.commit({"prose.md": lookalikes})

    done = clone.push("origin", "agentrun/b-1")
    assert done.returncode == 0, done.stderr
    assert clone.remote_refs()[f"{BRANCH}b-1"] == clone.local("HEAD")


def test_a_clean_build_branch_passes_and_its_state_travels(clone: Clone) -> None:
    protect(clone)
    clone.start_build("b-1", {"src/app.py": "VALUE = 1\n"})
    clone.git("notes", "--ref", "agentrun", "add", "-m", '{"phase": "implement"}', "HEAD")

    done = clone.push("origin", "agentrun/b-1")

    assert done.returncode == 0, done.stderr
    assert f"agentrun: pushed the log of build b-1 and {NOTES_REF} to origin" in done.stderr
    remote = clone.remote_refs()
    for ref in (f"{BRANCH}b-1", f"{LOG}b-1", NOTES_REF):
        assert remote[ref] == clone.local(ref), ref
    # Pushed again with nothing new: the state is already there, and nothing is said.
    clone.commit({"src/app.py": "VALUE = 2\n"})
    done = clone.push("origin", "agentrun/b-1")
    assert done.returncode == 0, done.stderr
    assert "agentrun:" not in done.stderr


def test_a_real_build_pushes_its_log_and_notes(clone: Clone) -> None:
    """A build the runner made (scripted agent), pushed by its branch."""
    configure(clone.path, [{"phase": "implement", "write": {"src/app.py": "VALUE = 1\n"}}])
    repo = pygit2.Repository(str(clone.path))
    slug = create_build(repo, "Add the app").slug
    assert run_build(repo, slug).state.state_name == "complete"

    done = clone.push("origin", f"agentrun/{slug}")

    assert done.returncode == 0, done.stderr
    remote = clone.remote_refs()
    for ref in (f"{BRANCH}{slug}", f"{LOG}{slug}", NOTES_REF):
        assert remote[ref] == clone.local(ref), ref
    assert not any(ref.startswith("refs/agentrun/leases/") for ref in remote)


def test_a_builds_facts_travel_with_its_branch(clone: Clone) -> None:
    """A verify command that passed is an accepted fact in refs/agentrun/memory: the push
    of the build's branch carries the memory too."""
    verify = '[[verify]]\nname = "tests"\ncommand = "true"\n'
    configure(clone.path, [{"phase": "implement", "write": {"src/app.py": "VALUE = 1\n"}}], verify)
    repo = pygit2.Repository(str(clone.path))
    slug = create_build(repo, "Add the app").slug
    assert run_build(repo, slug).state.state_name == "complete"

    done = clone.push("origin", f"agentrun/{slug}")

    assert done.returncode == 0, done.stderr
    assert "the memory" in done.stderr
    assert clone.remote_refs()["refs/agentrun/memory"] == clone.local("refs/agentrun/memory")


def test_a_remote_log_with_events_this_clone_lacks_is_left_alone(clone: Clone) -> None:
    clone.start_build("b-1", {"a.txt": "1\n"})
    assert clone.push("origin", "agentrun/b-1").returncode == 0
    # Another machine appended to the remote's log; this clone appended its own event.
    for where in (clone.remote, clone.path):
        log = EventLog(pygit2.Repository(str(where)))
        seen = log.tip("b-1")
        log.append("b-1", [_note(f"written in {where.name}")], Tip(seen.oid, seen.seq))
    theirs = clone.remote_refs()[f"{LOG}b-1"]
    clone.commit({"a.txt": "2\n"})

    done = clone.push("origin", "agentrun/b-1")

    assert done.returncode == 0, done.stderr
    assert (
        "agentrun: origin has entries in the log of build b-1 that this clone lacks, so it "
        "was left as it is (nothing overwritten); `git agentrun sync origin` merges them"
    ) in done.stderr
    remote = clone.remote_refs()
    assert remote[f"{LOG}b-1"] == theirs
    assert remote[f"{BRANCH}b-1"] == clone.local("HEAD")


def test_state_the_remote_refuses_does_not_block_the_branch(clone: Clone) -> None:
    hook = clone.remote / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nif grep -q ' refs/agentrun/'; then echo 'no logs here' >&2; exit 1; fi\n"
    )
    hook.chmod(0o755)
    clone.start_build("b-1", {"a.txt": "1\n"})

    done = clone.push("origin", "agentrun/b-1")

    assert done.returncode == 0, done.stderr
    pattern = r"agentrun: the log of build b-1 not pushed \(.+\); the branch push goes on"
    assert re.search(pattern, done.stderr), done.stderr
    assert clone.remote_refs()[f"{BRANCH}b-1"] == clone.local("HEAD")
    assert f"{LOG}b-1" not in clone.remote_refs()


# --- the shapes of a push ---------------------------------------------------------------


def test_a_force_push_checks_only_what_the_remote_lacks(clone: Clone) -> None:
    clone.start_build("b-1", {"a.txt": "1\n"})
    assert clone.push("origin", "agentrun/b-1").returncode == 0
    clone.git("reset", "-q", "--hard", "HEAD~1")
    bad = clone.commit({"a.txt": f"{GITHUB}\n"}, "rewritten")

    findings = refused(clone.push("--force", "origin", "agentrun/b-1"))
    assert findings == [f"commit {bad[:10]} adds a GitHub token in a.txt at line 1"]

    (clone.path / "a.txt").write_text("clean\n")
    clone.git("commit", "-q", "--amend", "-am", "rewritten again")
    done = clone.push("--force-with-lease", "origin", "agentrun/b-1")
    assert done.returncode == 0, done.stderr
    assert clone.remote_refs()[f"{BRANCH}b-1"] == clone.local("HEAD")


def test_a_force_push_over_commits_this_clone_never_saw(clone: Clone, tmp_path: Path) -> None:
    clone.start_build("b-1", {"a.txt": "1\n"})
    assert clone.push("origin", "agentrun/b-1").returncode == 0
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", "-b", "agentrun/b-1", clone.url, str(other))
    (other / "b.txt").write_text("theirs\n")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", "agentrun/b-1")
    bad = clone.commit({"c.txt": f"{GITHUB}\n"}, "ours")

    findings = refused(clone.push("--force", "origin", "agentrun/b-1"))
    assert findings == [f"commit {bad[:10]} adds a GitHub token in c.txt at line 1"]


def test_deleting_a_build_branch_passes_and_leaves_its_log(clone: Clone) -> None:
    clone.start_build("b-1", {"a.txt": "1\n"})
    assert clone.push("origin", "agentrun/b-1").returncode == 0
    protect(clone, "broken = [")  # a deletion checks nothing, so not even the config

    done = clone.push("origin", "--delete", "agentrun/b-1")

    assert done.returncode == 0, done.stderr
    assert f"{BRANCH}b-1" not in clone.remote_refs()
    assert clone.remote_refs()[f"{LOG}b-1"] == clone.local(f"{LOG}b-1")


def test_a_new_branch_pushed_by_url_and_to_another_name(clone: Clone) -> None:
    """No remote-tracking refs to go by: the remote's refs (ls-remote) bound the check."""
    clone.start_build("b-1", {"a.txt": "1\n"})
    clone.commit({"secret.txt": f"{GITHUB}\n"})

    findings = refused(clone.push(clone.url, "agentrun/b-1:refs/heads/review"))
    assert [f.split(" ", 2)[2] for f in findings] == ["adds a GitHub token in secret.txt at line 1"]
    findings = refused(clone.push(clone.url, "main:refs/heads/agentrun/b-2", "agentrun/b-1"))
    assert len(findings) == 1


def test_a_broken_config_blocks_only_build_branches(clone: Clone) -> None:
    (clone.path / ".agentrun.toml").write_text("[protect]\npaths = 3\n")

    done = clone.push("origin", "main:refs/heads/feature")
    assert done.returncode == 0, done.stderr

    clone.git("checkout", "-q", "-b", "agentrun/b-1")
    done = clone.push("origin", "agentrun/b-1")
    assert done.returncode == 1
    config = clone.path / ".agentrun.toml"
    assert (
        f"agentrun: {config} at `protect.paths`: Input should be a valid tuple (pushes of "
        "build branches are checked against it; fix it and push again)"
    ) in done.stderr
    assert f"{BRANCH}b-1" not in clone.remote_refs()


def test_no_verify_skips_the_hook(clone: Clone) -> None:
    protect(clone)
    clone.start_build("b-1", {"tests/acceptance/test_login.py": f"{GITHUB}\n"})

    done = clone.push("--no-verify", "origin", "agentrun/b-1")

    assert done.returncode == 0, done.stderr
    assert clone.remote_refs()[f"{BRANCH}b-1"] == clone.local("HEAD")
    assert f"{LOG}b-1" not in clone.remote_refs()


# --- the command itself -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (
            ["origin", "url"],
            "refs/heads/agentrun/x abc refs/heads/agentrun/x 0\n",
            "line 1 of the pre-push input is not `<local ref> <local sha> <remote ref> "
            "<remote sha>`: 'refs/heads/agentrun/x abc refs/heads/agentrun/x 0'",
        ),
        (
            [],
            "",
            "`git agentrun hook pre-push REMOTE URL` is run by git's pre-push hook "
            "(`git agentrun hook install`) or by pre-commit's pre-push stage",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    clone: Clone, monkeypatch: pytest.MonkeyPatch, args: list[str], stdin: str, message: str
) -> None:
    monkeypatch.chdir(clone.path)
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    result = CliRunner().invoke(cli, ["hook", "pre-push", *args], input=stdin)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"agentrun: {message}\n"


def test_pre_commit_outside_a_push_has_nothing_to_check(
    clone: Clone, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pre-commit run --hook-stage pre-push` in CI: no refs, so nothing to refuse."""
    monkeypatch.chdir(clone.path)
    monkeypatch.setenv("PRE_COMMIT", "1")
    result = CliRunner().invoke(cli, ["hook", "pre-push"], input="")
    assert (result.exit_code, result.output) == (0, "")


def _note(text: str) -> Draft:
    return Draft(ObservationRecorded(phase="implement", text=text))


def test_an_archived_build_answers_only_for_its_own_commits(clone: Clone) -> None:
    """The base of an archived build is still known: history before it is not the build's."""
    clone.commit({"notes.txt": f"token {GITHUB}\n"}, "someone's old mistake, never pushed")
    clone.start_build("b-1", {"src/app.py": "VALUE = 1\n"})
    archive(pygit2.Repository(str(clone.path)), "b-1", "complete")

    done = clone.push("origin", "agentrun/b-1")

    assert done.returncode == 0, done.stderr


def test_the_build_snapshot_s_rules_hold_when_the_working_tree_config_drops_them(
    clone: Clone,
) -> None:
    """An agent (or anyone) rewriting .agentrun.toml cannot loosen a build's guards."""
    repo = pygit2.Repository(str(clone.path))
    snapshot = parse_config(PROTECT, "test").model_dump(mode="json")
    base = clone.local("HEAD")
    created = BuildCreated(
        goal="g", base_ref="main", base_sha=base, branch="agentrun/b-1", config=snapshot
    )
    EventLog(repo).append("b-1", [Draft(created)], None)
    clone.git("checkout", "-q", "-b", "agentrun/b-1")
    (clone.path / ".agentrun.toml").write_text("")  # no protection in the working tree
    bad = clone.commit({"tests/acceptance/test_login.py": "def test(): assert True\n"})

    findings = refused(clone.push("origin", "agentrun/b-1"))

    assert findings == [
        f"commit {bad[:10]} changes tests/acceptance/test_login.py, a protected path "
        "(protect.paths: 'tests/acceptance/**')"
    ]
