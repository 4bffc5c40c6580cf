"""Path patterns as ``.gitignore`` reads them (``agentrun.kernel.paths``)."""

from __future__ import annotations

import pytest

from agentrun.kernel.paths import any_matches, matches, matching_pattern

CASES = [
    # `*` stays within one segment
    ("src/*.py", "src/app.py", True),
    ("src/*.py", "src/pkg/app.py", False),
    ("src/*.py", "src/app.pyc", False),
    ("src/*", "src/app.py", True),
    ("src/a*.py", "src/.py", False),
    ("src/a*.py", "src/a.py", True),
    # ... but a pattern that matches a folder matches everything in it
    ("src/*", "src/pkg/app.py", True),
    # `**` crosses segments
    ("src/**", "src/app.py", True),
    ("src/**", "src/pkg/deep/app.py", True),
    ("src/**", "lib/src/app.py", False),
    ("src/**", "srcs/app.py", False),
    ("**/test_*.py", "test_app.py", True),
    ("**/test_*.py", "tests/unit/test_app.py", True),
    ("**/test_*.py", "tests/unit/app_test.py", False),
    ("docs/**/*.md", "docs/index.md", True),
    ("docs/**/*.md", "docs/a/b/index.md", True),
    ("docs/**/*.md", "docs/a/b/index.rst", False),
    ("**", "any/path/at/all.txt", True),
    # `?` is one character, never a slash
    ("?.md", "a.md", True),
    ("?.md", "ab.md", False),
    ("?.md", ".md", False),
    ("a?b", "a/b", False),
    ("src/?/x.py", "src/k/x.py", True),
    # a pattern without a slash matches a file or folder name at any depth
    ("*.py", "app.py", True),
    ("*.py", "src/pkg/app.py", True),
    ("*.py", "src/app.py.txt", False),
    ("Makefile", "Makefile", True),
    ("Makefile", "tools/Makefile", True),
    ("Makefile", "Makefile.am", False),
    ("tests", "tests/unit/test_app.py", True),
    ("tests", "lib/tests/data.json", True),
    ("tests", "tests.py", False),
    # a pattern with a slash in the middle is anchored at the root
    ("src/app.py", "src/app.py", True),
    ("src/app.py", "lib/src/app.py", False),
    ("src/pkg", "src/pkg/app.py", True),
    # a leading slash anchors at the root too
    ("/src/*.py", "src/app.py", True),
    ("/src/*.py", "lib/src/app.py", False),
    ("/README.md", "README.md", True),
    ("/README.md", "docs/README.md", False),
    # a trailing slash names a folder: everything under it
    ("docs/", "docs/guide.md", True),
    ("docs/", "docs/api/index.md", True),
    ("src/pkg/", "src/pkg/app.py", True),
    ("src/pkg/", "src/pkgs/app.py", False),
    # `[...]` is a character class
    ("[abc].txt", "b.txt", True),
    ("[abc].txt", "d.txt", False),
    ("file[0-9].py", "file7.py", True),
    ("[!a]*.md", "b.md", True),
    ("[!a]*.md", "a.md", False),
    # everything else is literal
    ("a.py", "axpy", False),
    ("a+b.txt", "a+b.txt", True),
    ("(x)|y", "(x)|y", True),
    ("(x)|y", "y", False),
]


@pytest.mark.parametrize(
    ("pattern", "path", "expected"), CASES, ids=[f"{p} {q}" for p, q, _ in CASES]
)
def test_matches(pattern: str, path: str, expected: bool) -> None:
    assert matches([pattern], path) is expected


def test_a_negation_takes_paths_back_out() -> None:
    patterns = ["tests/**", "!tests/fixtures/**"]
    assert matches(patterns, "tests/unit/test_app.py")
    assert not matches(patterns, "tests/fixtures/data.json")
    assert matching_pattern(patterns, "tests/unit/test_app.py") == "tests/**"
    assert matching_pattern(patterns, "tests/fixtures/data.json") is None


def test_the_last_pattern_that_applies_decides() -> None:
    patterns = ["*.md", "!docs/*.md", "docs/API.md"]
    assert matching_pattern(patterns, "README.md") == "*.md"
    assert matching_pattern(patterns, "docs/guide.md") is None
    assert matching_pattern(patterns, "docs/API.md") == "docs/API.md"


def test_comments_and_blank_lines_match_nothing() -> None:
    assert not matches(["# tests", ""], "# tests")
    assert not any_matches(["# src/**"], ["src/app.py"])


def test_any_matches_needs_one_pattern_to_match_one_path() -> None:
    assert any_matches(["src/**", "*.toml"], ["docs/guide.md", "pyproject.toml"])
    assert not any_matches(["src/**", "*.toml"], ["docs/guide.md", "README.md"])


def test_nothing_changed_matches_nothing() -> None:
    assert not any_matches(["**"], [])


def test_no_patterns_match_nothing() -> None:
    assert not any_matches([], ["src/app.py"])


def test_any_matches_takes_one_shot_iterables() -> None:
    assert any_matches(iter(["*.py"]), iter(["docs/a.md", "src/app.py"]))
