"""The two guards over real diffs: protected paths and secrets on added lines."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest
from hook.hookrepo import GITHUB, SECRET_VALUE, SHAPES
from runner.helpers import git

from agentrun.config import parse_config
from agentrun.errors import ConfigError
from agentrun.runner.guards import (
    Finding,
    Rules,
    check_commit,
    check_workdir,
    protected_by,
    secret_in,
    summary,
)

PROTECTED = ("tests/acceptance/**", ".github/workflows/*.yml", "/Makefile")


def commit(path: Path, files: dict[str, str | None], message: str = "change") -> pygit2.Commit:
    for name, text in files.items():
        target = path / name
        if text is None:
            git(path, "rm", "-q", name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "--allow-empty", "-m", message)
    repo = pygit2.Repository(str(path))
    return repo.head.peel(pygit2.Commit)


def findings(path: Path, rules: Rules) -> list[Finding]:
    repo = pygit2.Repository(str(path))
    return check_commit(repo, repo.head.peel(pygit2.Commit), rules)


def every_object(path: Path) -> bytes:
    argv = ["git", "cat-file", "--batch-all-objects", "--batch"]
    return subprocess.run(argv, cwd=path, capture_output=True, check=True).stdout


# --- lines and paths ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "token"), [(kind, token) for kind, tokens in SHAPES.items() for token in tokens]
)
def test_each_known_token_shape_is_named(kind: str, token: str) -> None:
    assert secret_in(f"    key = {token!r},  # set by hand\n") == kind
    assert secret_in(f"export KEY={token}") == kind


@pytest.mark.parametrize(
    "line",
    [
        "sk-some-long-descriptive-name-in-prose",
        "task-management-Thing1-abcdefghijklmnop",
        "ghp_short and github_pat_token_pattern_for_the_tests",
        "AKIA is how AWS key ids start; xoxo-hugs",
        "-----BEGIN PUBLIC KEY-----",
        "glpat-",
    ],
)
def test_lookalikes_are_not_secrets(line: str) -> None:
    assert secret_in(line) is None


def test_configured_values_are_named_by_their_variable() -> None:
    rules = Rules.of(
        parse_config('[secrets]\nenv = ["DEPLOY_TOKEN", "SHORT", "UNSET", "PEM"]\n', "t"),
        {"DEPLOY_TOKEN": SECRET_VALUE, "SHORT": "abc", "PEM": "line-one-xyz\nab\nline-three-q"},
    )
    assert rules.secret_values == (
        ("DEPLOY_TOKEN", SECRET_VALUE),
        ("PEM", "line-one-xyz"),
        ("PEM", "line-three-q"),
    )
    assert secret_in(f"url = 'https://x:{SECRET_VALUE}@host'", rules.secret_values) == (
        "the value of $DEPLOY_TOKEN"
    )
    assert secret_in("abc", rules.secret_values) is None


def test_forge_tokens_count_without_being_configured() -> None:
    rules = Rules.of(parse_config("", "t"), {"GITHUB_TOKEN": "v1.0123456789abcdef"})
    assert secret_in("token: v1.0123456789abcdef", rules.secret_values) == (
        "the value of $GITHUB_TOKEN"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[protect]\npaths = [""]\n',
            'a protected path is a glob pattern such as "tests/acceptance/**"',
        ),
        ("[protect]\npaths = 3\n", "Input should be a valid tuple"),
        ('[secrets]\nenv = ["9LIVES"]\n', "'9LIVES' is not an environment variable name"),
        ('[secrets]\nvalues = ["x"]\n', "unknown key"),
    ],
)
def test_bad_guard_config_is_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, ".agentrun.toml")
    assert str(caught.value).startswith(".agentrun.toml at `")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("tests/acceptance/test_login.py", "tests/acceptance/**"),
        ("tests/acceptance/deep/er/data.json", "tests/acceptance/**"),
        (".github/workflows/ci.yml", ".github/workflows/*.yml"),
        ("Makefile", "/Makefile"),
        ("src/Makefile", None),
        ("tests/unit/test_x.py", None),
        (".github/workflows/sub/ci.yml", None),
    ],
)
def test_protected_paths_use_the_verify_glob_rules(path: str, pattern: str | None) -> None:
    assert protected_by([PROTECTED], path) == pattern


@pytest.mark.parametrize(
    ("patterns", "path", "pattern"),
    [
        (("tests",), "tests/unit/test_x.py", "tests"),
        (("tests",), "src/tests/conftest.py", "tests"),
        (("tests", "!tests/scratch/"), "tests/scratch/notes.txt", None),
        (("tests", "!tests/scratch/"), "tests/unit/test_x.py", "tests"),
        (("[Mm]akefile",), "makefile", "[Mm]akefile"),
        (("[Mm]akefile",), "[Mm]akefile", None),
    ],
)
def test_protected_paths_read_as_gitignore_does(
    patterns: tuple[str, ...], path: str, pattern: str | None
) -> None:
    assert protected_by([patterns], path) == pattern


def test_protect_tests_guards_a_commit_deep_under_tests(repo_path: Path) -> None:
    config = parse_config('[protect]\npaths = ["tests"]\n', ".agentrun.toml")
    commit(repo_path, {"tests/unit/test_login.py": "def test_x():\n    assert True\n"})
    assert findings(repo_path, Rules.of(config, {})) == [
        Finding("tests/unit/test_login.py", None, "tests")
    ]


def test_one_configs_negation_cannot_free_what_another_protects() -> None:
    base = parse_config('[protect]\npaths = ["tests"]\n', "base")
    build = parse_config('[protect]\npaths = ["!tests/**"]\n', "build")
    rules = Rules.of(build, {}) | Rules.of(base, {})
    assert protected_by(rules.protected, "tests/test_x.py") == "tests"


# --- commits -----------------------------------------------------------------------


def test_a_commit_is_judged_by_what_it_adds(repo_path: Path) -> None:
    commit(repo_path, {"keep.py": f"OLD = {GITHUB!r}\nA = 1\n", "Makefile": "all:\n"})
    commit(
        repo_path,
        {
            "keep.py": f"OLD = {GITHUB!r}\nA = 2\n",  # the token was there before
            "Makefile": None,  # deleting a protected file touches it
            "new.py": f"# new\n\nNEW = {GITHUB!r}\n",
        },
    )
    rules = Rules((PROTECTED,))

    assert findings(repo_path, rules) == [
        Finding("Makefile", None, "/Makefile"),
        Finding("new.py", 3, "a GitHub token"),
    ]
    assert [f.text() for f in findings(repo_path, rules)] == [
        "changes Makefile, a protected path (protect.paths: '/Makefile')",
        "adds a GitHub token in new.py at line 3",
    ]


def test_a_root_commit_adds_everything(tmp_path: Path) -> None:
    path = tmp_path / "fresh"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit(path, {"tests/acceptance/a.py": "x\n", "k.txt": f"{GITHUB}\n"})

    assert findings(path, Rules((PROTECTED,))) == [
        Finding("k.txt", 1, "a GitHub token"),
        Finding("tests/acceptance/a.py", None, "tests/acceptance/**"),
    ]


def test_a_merge_answers_only_for_its_own_changes(repo_path: Path) -> None:
    """What the merged branch brought is that branch's; the resolution is the merge's."""
    commit(repo_path, {"shared.txt": "base\n"})
    git(repo_path, "checkout", "-q", "-b", "side")
    commit(repo_path, {"tests/acceptance/a.py": "theirs\n", "side.txt": f"{GITHUB}\n"})
    git(repo_path, "checkout", "-q", "main")
    commit(repo_path, {"mine.txt": "mine\n"})
    git(repo_path, "merge", "-q", "--no-edit", "side")
    assert findings(repo_path, Rules((PROTECTED,))) == []

    git(repo_path, "reset", "-q", "--hard", "HEAD~1")
    git(repo_path, "merge", "-q", "--no-commit", "side")
    (repo_path / "resolution.txt").write_text(f"fixed up\n{GITHUB}\n")
    git(repo_path, "add", "-A")
    git(repo_path, "commit", "-q", "--no-edit")
    assert findings(repo_path, Rules((PROTECTED,))) == [
        Finding("resolution.txt", 2, "a GitHub token")
    ]


def test_binary_files_are_not_read_line_by_line(repo_path: Path) -> None:
    (repo_path / "blob.bin").write_bytes(b"\x00\x01" + GITHUB.encode() + b"\x00")
    git(repo_path, "add", "-A")
    git(repo_path, "commit", "-q", "-m", "binary")
    assert findings(repo_path, Rules()) == []


# --- the working tree ----------------------------------------------------------------


def test_the_working_tree_is_judged_without_writing_objects(repo_path: Path) -> None:
    (repo_path / "notes").mkdir()
    (repo_path / "notes" / "new.txt").write_text(f"hello\n{SECRET_VALUE}\n")
    (repo_path / "scratch").mkdir()
    (repo_path / "scratch" / "tmp.txt").write_text(f"{GITHUB}\n")
    (repo_path / "README.md").unlink()
    repo = pygit2.Repository(str(repo_path))
    rules = Rules((("README.md",),), (("DEPLOY_TOKEN", SECRET_VALUE),))

    found = check_workdir(repo, repo.head.peel(pygit2.Tree), rules, skip=("scratch/",))

    assert found == [
        Finding("README.md", None, "README.md"),
        Finding("notes/new.txt", 2, "the value of $DEPLOY_TOKEN"),
    ]
    assert SECRET_VALUE.encode() not in every_object(repo_path)


def test_a_summary_names_a_few_and_counts_the_rest() -> None:
    many = [Finding(f"f{i}.py", 1, "a GitHub token") for i in range(7)]
    line = summary("the worktree", [Finding("Makefile", None, "/Makefile"), *many])
    assert line == (
        "the worktree changes Makefile, a protected path (protect.paths: '/Makefile'); "
        "adds a GitHub token in f0.py at line 1; adds a GitHub token in f1.py at line 1; "
        "adds a GitHub token in f2.py at line 1; adds a GitHub token in f3.py at line 1; "
        "and 3 more: leave protected paths as they are and remove the secret (and treat it "
        "as leaked if it was real)"
    )
