"""When a lease protects nothing any more (DESIGN §2, §12), and a lease commit read
without pydantic or pygit2.

A lease is live unless it expired (allowing ``skew_seconds`` for clocks that disagree)
or its holder died on this very machine: same host and boot id, and its pid gone or
reused (liveness.py). store/lease.py judges its ``LeaseInfo`` with these, and
``status`` judges the lease commits ``git cat-file`` gives it (``read_claim``).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from agentrun import liveness
from agentrun.errors import ConfigError

TTL_SECONDS = 120.0
SKEW_SECONDS = 30.0
TTL_VARIABLE = "AGENTRUN_LEASE_TTL"
FIELDS = {"holder", "host", "boot_id", "pid", "pid_start", "agent_pgid", "generation"}
REQUIRED = FIELDS - {"agent_pgid"} | {"expires_at"}
# An aware ISO 8601 time as pydantic writes one; any other form pydantic is asked about.
WRITTEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)", re.ASCII)


def lease_ttl() -> float:
    """The TTL a runner claims with: ``AGENTRUN_LEASE_TTL`` seconds (for tests), or 120."""
    value = os.environ.get(TTL_VARIABLE, "").strip()
    if not value:
        return TTL_SECONDS
    try:
        ttl = float(value)
    except ValueError:
        ttl = 0.0
    if not ttl > 0:
        raise ConfigError(f"{TTL_VARIABLE}={value!r}: expected a number of seconds above 0")
    return ttl


def skew_seconds() -> float:
    """The clock-skew allowance: 30 s, or a quarter of a shorter TTL set for tests."""
    return min(SKEW_SECONDS, lease_ttl() / 4)


class Claim(Protocol):
    """What the rule reads of a lease (store/lease.py's ``LeaseInfo`` is one)."""

    @property
    def host(self) -> str: ...
    @property
    def boot_id(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def pid_start(self) -> float: ...
    @property
    def expires_at(self) -> datetime: ...


def expired(claim: Claim, now: datetime) -> bool:
    return now > claim.expires_at + timedelta(seconds=skew_seconds())


def dead_here(claim: Claim) -> bool:
    """The holder ran on this very machine (same boot) and is gone."""
    if claim.host != liveness.host() or claim.boot_id != liveness.boot_id():
        return False
    return not liveness.is_alive(claim.pid, claim.pid_start)


def is_stale(claim: Claim, now: datetime) -> bool:
    """Nobody holds this lease any more: it expired, or its holder died on this machine."""
    return expired(claim, now) or dead_here(claim)


@dataclass(frozen=True)
class Seen:
    """A lease as ``read_claim`` read it: what ``status`` shows and the rule reads."""

    holder: str
    host: str
    boot_id: str
    pid: int
    pid_start: float
    expires_at: datetime


class Unsure(Exception):
    """A lease commit only pydantic can judge (store/lease.py's ``lease_info``)."""


def read_claim(kind: str, raw: bytes | None) -> Seen | None:
    """The lease an object holds (``kind``: its git type, ``raw``: its bytes, None when
    missing); None: it is unreadable and protects nothing, as ``lease_info`` says.

    Only what pydantic surely reads the same way is read here: the form a lease is
    written in, and what is surely no lease. Anything else raises ``Unsure``.
    """
    if kind != "commit" or raw is None:
        return None  # a missing object, a tree, a blob, a tag: no commit, no lease
    head, _, message = raw.partition(b"\n\n")
    if b"\nencoding " in b"\n" + head:
        raise Unsure("a commit in another encoding")
    try:
        text = message.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_no_twice)
    except UnicodeDecodeError:
        raise Unsure("not UTF-8") from None
    except ValueError:
        if "NaN" in text or "Infinity" in text:
            raise Unsure("JSON only json.loads rejects") from None
        return None
    if not isinstance(value, dict) or not REQUIRED <= value.keys() <= FIELDS | REQUIRED:
        return None  # no object, or a field missing or unknown: pydantic refuses it too
    strings = [value[k] for k in ("holder", "host", "boot_id", "expires_at")]
    ints = [value[k] for k in ("pid", "generation")]
    pgid, start = value.get("agent_pgid"), value["pid_start"]
    if not (
        all(_utf8(s) for s in strings)
        and all(type(n) is int and abs(n) < 2**63 for n in [*ints, 0 if pgid is None else pgid])
        and ((type(start) is float and math.isfinite(start)) or type(start) is int)
        and abs(start) < 2**53
        and WRITTEN.fullmatch(value["expires_at"])
    ):
        raise Unsure("a lease in a form it is not written in")
    try:
        expires_at = datetime.fromisoformat(value["expires_at"])
    except ValueError:
        raise Unsure("a time pydantic may read") from None
    return Seen(
        value["holder"], value["host"], value["boot_id"], value["pid"], float(start), expires_at
    )


def _utf8(value: object) -> bool:
    """A string of characters only (no lone surrogate a ``\\u`` escape can make)."""
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _no_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise Unsure("a key given twice")
    return found
