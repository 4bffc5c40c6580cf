"""Path patterns, read as ``.gitignore`` reads them: one rule for every glob in agentrun.

Verify steps' ``paths``, and ``[protect] paths`` are lists of
``.gitignore`` lines, matched by ``pathspec``'s ``GitIgnoreSpec``: a pattern without a
slash matches at any depth, a leading slash anchors it at the repository root, a name
matches a folder and everything below it (``tests`` protects ``tests/unit/a.py``),
``*`` stays within a segment, ``**`` crosses them, ``[abc]`` is a character class and
a later ``!pattern`` takes paths back out. Pure: no file is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from pathspec import GitIgnoreSpec


@lru_cache(maxsize=4096)
def spec(patterns: tuple[str, ...]) -> GitIgnoreSpec:
    """The compiled patterns (cached: configs repeat the same few lists, and every prompt
    of a build matches the same facts' globs of refs/agentrun/memory, one list each)."""
    return GitIgnoreSpec.from_lines(patterns)


def matching_pattern(patterns: Iterable[str], path: str) -> str | None:
    """The pattern that decides ``path`` is matched (the last one that applies), or None."""
    pats = tuple(patterns)
    found = spec(pats).check_file(path)
    return pats[found.index] if found.include and found.index is not None else None


def matches(patterns: Iterable[str], path: str) -> bool:
    """Whether the patterns, taken together, match ``path``."""
    return spec(tuple(patterns)).match_file(path)


def any_matches(patterns: Iterable[str], paths: Iterable[str]) -> bool:
    """Whether the patterns match at least one of ``paths``."""
    compiled = spec(tuple(patterns))
    return any(compiled.match_file(path) for path in paths)
