"""Glob patterns over repository paths, as verify steps' ``paths`` conditions use them.

``*`` matches within one path segment, ``**`` across segments, ``?`` one character.
As in .gitignore: a pattern without a slash matches at any depth, a leading slash
anchors it at the repository root, and a trailing slash matches everything below
that folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("/"):
        pattern += "**"
    if pattern.startswith("/"):
        pattern = pattern[1:]
    elif "/" not in pattern:
        pattern = "**/" + pattern
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def matches(pattern: str, path: str) -> bool:
    return _compile(pattern).match(path) is not None


def any_matches(patterns: Iterable[str], paths: Iterable[str]) -> bool:
    pats = list(patterns)
    return any(matches(p, path) for path in paths for p in pats)
