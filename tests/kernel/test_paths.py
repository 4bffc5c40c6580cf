"""Glob patterns of verify steps' ``paths`` conditions (``agentrun.kernel.paths``)."""

from __future__ import annotations

import pytest

from agentrun.kernel.paths import any_matches, matches

CASES = [
    # `*` stays within one segment
    ("src/*.py", "src/app.py", True),
    ("src/*.py", "src/pkg/app.py", False),
    ("src/*.py", "src/app.pyc", False),
    ("src/*", "src/app.py", True),
    ("src/*", "src/pkg/app.py", False),
    ("src/a*.py", "src/.py", False),
    ("src/a*.py", "src/a.py", True),
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
    # a pattern without a slash matches the file name at any depth
    ("*.py", "app.py", True),
    ("*.py", "src/pkg/app.py", True),
    ("*.py", "src/app.py.txt", False),
    ("Makefile", "Makefile", True),
    ("Makefile", "tools/Makefile", True),
    ("Makefile", "Makefile.am", False),
    # a pattern with a slash is anchored at the root
    ("src/app.py", "src/app.py", True),
    ("src/app.py", "lib/src/app.py", False),
    # a leading slash anchors at the root too (as in .gitignore)
    ("/src/*.py", "src/app.py", True),
    ("/src/*.py", "lib/src/app.py", False),
    ("/README.md", "README.md", True),
    ("/README.md", "docs/README.md", False),
    # a trailing slash names a directory: everything under it (as in .gitignore)
    ("docs/", "docs/guide.md", True),
    ("docs/", "docs/api/index.md", True),
    ("src/pkg/", "src/pkg/app.py", True),
    ("src/pkg/", "src/pkgs/app.py", False),
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
    assert matches(pattern, path) is expected


def test_any_matches_needs_one_pattern_to_match_one_path() -> None:
    assert any_matches(["src/**", "*.toml"], ["docs/guide.md", "pyproject.toml"])
    assert not any_matches(["src/**", "*.toml"], ["docs/guide.md", "README.md"])


def test_nothing_changed_matches_nothing() -> None:
    assert not any_matches(["**"], [])


def test_no_patterns_match_nothing() -> None:
    assert not any_matches([], ["src/app.py"])


def test_any_matches_takes_one_shot_iterables() -> None:
    assert any_matches(iter(["*.py"]), iter(["docs/a.md", "src/app.py"]))
