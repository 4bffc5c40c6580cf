"""Which build a slug on the command line names: the one resolver every command uses.

An exact slug wins; otherwise a prefix that only one build's slug starts with names
that build (``git agentrun log fix`` for ``fix-login-redirect``). A prefix several
slugs share is refused, listing them. Live and archived builds both count.
"""

from __future__ import annotations

import pygit2

from agentrun.errors import UnknownBuildError
from agentrun.store.archive import archived
from agentrun.store.log import EventLog

SHOWN = 10  # matches named in the refusal; the rest are counted


def resolve_slug(repo: pygit2.Repository, given: str) -> str:
    """The slug ``given`` names. An unknown one is returned as it is, so the command
    says what it says of a build that does not exist (or is no longer live)."""
    known = set(EventLog(repo).slugs()) | set(archived(repo))
    if given in known or not given:
        return given
    found = sorted(slug for slug in known if slug.startswith(given))
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        shown = ", ".join(found[:SHOWN])
        more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        raise UnknownBuildError(
            f"{given!r} is the start of {len(found)} builds' slugs ({shown}{more}): "
            "write more of the slug"
        )
    return given
