"""Where GitLab things are: the instance and the project (from GitLab CI's variables, the
config's ``[forge] url`` and the ``origin`` URL), and issues and merge requests apart.

GitLab numbers issues and merge requests apart (issue #7 and merge request !7 are two
things), while the forge protocol has one ``number`` for both. A merge request's number
is ``PROPOSALS + iid`` (``proposal_number``): every GitLab iid is below it, so the two
never meet, and the iid is read off the end of the number. A draft is the ``Draft:``
title prefix, as GitLab's REST API has no draft flag to set.

No python-gitlab here: ``forge_kind`` asks ``on_gitlab`` without loading it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from urllib.parse import urlsplit

import pygit2

from agentrun.errors import ConfigError, ForgeError

DEFAULT_URL = "https://gitlab.com"
PROPOSALS = 10**10  # above every iid GitLab gives (a 32-bit integer)
DRAFT_PREFIX = "Draft: "
# GitLab's own test of a draft title (Gitlab::Regex.merge_request_draft; WIP: is gone).
_DRAFT = re.compile(r"^\s*(?:\[draft\]|\(draft\)|draft:)\s*", re.IGNORECASE)
# scheme://user@host:port/path, or scp-like user@host:path
_ORIGIN = re.compile(r"^(?:[\w+.-]+://)?(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?[:/]+(?P<path>.+)$")


def instance_url(environ: dict[str, str] | os._Environ[str], configured: str | None) -> str:
    """The instance's web URL: GitLab CI's variables win over ``[forge] url``."""
    api = environ.get("CI_API_V4_URL", "").strip().rstrip("/")
    if api:
        return api.removesuffix("/api/v4")
    server = environ.get("CI_SERVER_URL", "").strip()
    if server:
        return server.rstrip("/")
    url = (configured or DEFAULT_URL).strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"[forge] url = {configured!r}: expected the GitLab instance's web URL, "
            "such as https://gitlab.example.com"
        )
    return url


def project_from(
    environ: dict[str, str] | os._Environ[str], origin: str | None, instance: str
) -> str:
    """``group/…/name``: ``CI_PROJECT_PATH``, else the path of the ``origin`` URL."""
    named = environ.get("CI_PROJECT_PATH", "").strip().strip("/")
    if named:
        return named
    origin = origin or ""
    found = _ORIGIN.match(origin)
    path = found.group("path") if found else ""
    prefix = urlsplit(instance).path.strip("/")  # an instance under a path: example.com/gitlab
    if prefix and path.startswith(prefix + "/"):
        path = path[len(prefix) + 1 :]
    path = path.strip("/").removesuffix(".git")
    if not found or "/" not in path or origin.startswith("file:"):
        raise ForgeError(
            f"cannot tell the GitLab project from origin {origin or '(none)'!r}: "
            "set CI_PROJECT_PATH=group/name"
        )
    return path


def on_gitlab(origin: str, configured: Callable[[], str | None]) -> bool:
    """Whether ``origin`` is on gitlab.com or on the host of ``[forge] url`` (read only
    for an origin on another host: a local or a gitlab.com origin needs no config)."""
    found = _ORIGIN.match(origin)
    if found is None or origin.startswith("file:") or origin.startswith("/"):
        return False
    host = found.group("host").lower()
    return host == "gitlab.com" or host == (urlsplit(configured() or "").hostname or "")


def configured_url(repo: pygit2.Repository) -> str | None:
    """``[forge] url`` of the repository's config (its working tree, as commands read it)."""
    from pathlib import Path

    from agentrun.config import load_config

    return load_config(Path(repo.workdir)).forge.url if repo.workdir else None


def proposal_number(iid: int) -> int:
    """The forge number of merge request ``!iid``."""
    return PROPOSALS + iid


def is_draft(title: str) -> bool:
    return _DRAFT.match(title) is not None


def draft_title(title: str) -> str:
    return title if is_draft(title) else f"{DRAFT_PREFIX}{title}"


def ready_title(title: str) -> str:
    while (found := _DRAFT.match(title)) is not None and found.end() > 0:
        title = title[found.end() :]
    return title


def split(number: int) -> tuple[str, int]:
    """``("merge_requests", iid)`` for a merge request's number, else ``("issues", number)``."""
    if number > PROPOSALS:
        return "merge_requests", number - PROPOSALS
    return "issues", number


def ref(number: int) -> str:
    kind, iid = split(number)
    return f"!{iid}" if kind == "merge_requests" else f"#{iid}"
