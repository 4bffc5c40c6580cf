"""The names of the branches agentrun writes, and commit ids: light enough for the
pre-push hook.

A build publishes from its own branch, ``agentrun/<slug>`` (DESIGN §2); the refs under
``refs/agentrun/`` are named beside the stores that write them (``store/``).
"""

from __future__ import annotations

import re

BRANCH_PREFIX = "agentrun/"
BUILD_BRANCHES = f"refs/heads/{BRANCH_PREFIX}"


def carries_goals(ref: str) -> bool:
    """Only branches other than builds' start builds from goals (not tags, not
    ``agentrun/*``): the shim's rule too."""
    return ref.startswith("refs/heads/") and not ref.startswith(BUILD_BRANCHES)


_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def is_sha(text: str) -> bool:
    """Whether ``text`` is a full commit id (SHA-1 or SHA-256)."""
    return bool(_SHA.match(text))


def is_zero(sha: str) -> bool:
    """The all-zero id git gives for a ref that is created or deleted."""
    return bool(sha) and set(sha) == {"0"}
