"""Secrets: the known token shapes, and scrubbing them out of what agentrun writes.

Transcripts, artifacts and event payloads pass through ``scrub`` before they become
git objects (DESIGN §11): a token an agent printed never reaches the log. Scrubbed
are the known token shapes and the values this process was told are secret
(``remember``: the variables ``secrets.env`` names, the runtimes' API keys, forge
tokens). The pre-push hook and the runner's guards find the same shapes in diffs.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrun.config import Config

# A shorter value would match ordinary text ("1", "true", a port number).
MIN_SECRET_LENGTH = 8
REDACTED = "[redacted]"

_NOT_WORD = r"(?<![A-Za-z0-9_-])"
_MIXED = r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"

# Most specific first: the first shape that matches names the finding.
TOKEN_SHAPES: tuple[tuple[str, str], ...] = (
    ("a private key", r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
    ("a GitHub token", _NOT_WORD + r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
    ("a GitHub token", r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{36,}"),
    ("a GitLab token", _NOT_WORD + r"glpat-[A-Za-z0-9_-]{20,}"),
    ("an AWS access key id", r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
    ("a Slack token", _NOT_WORD + r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("an Anthropic key", _NOT_WORD + r"sk-ant-[A-Za-z0-9_-]{32,}"),
    # OpenAI keys are random: require digits and both cases, so `sk-some-long-name`
    # in prose or code is not taken for one.
    (
        "an OpenAI key",
        _NOT_WORD + r"sk-(?:proj-|svcacct-|admin-)?" + _MIXED + r"[A-Za-z0-9_-]{20,}",
    ),
)
SHAPES = re.compile("|".join(f"(?P<s{i}>{rx})" for i, (_, rx) in enumerate(TOKEN_SHAPES)))
# When scrubbing, a private key goes whole, from its BEGIN line to its END line.
_KEY_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY"
    r"(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# Forge tokens are secret wherever they are set, whatever the config says.
ALWAYS_SECRET = ("GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", "GL_TOKEN", "CI_JOB_TOKEN")

_lock = threading.Lock()
_values: frozenset[str] = frozenset()
_values_rx: re.Pattern[str] | None = None


def shape_in(line: str) -> str | None:
    """The kind of the first known token shape in ``line`` ("a GitHub token"), if any."""
    found = SHAPES.search(line)
    if found is None or found.lastgroup is None:
        return None
    return TOKEN_SHAPES[int(found.lastgroup[1:])][0]


def values_of(names: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """The values of the named variables, of the forge tokens and of every variable whose
    name says it is a credential (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``:
    the provider variables a runtime is given, such as ``AWS_SECRET_ACCESS_KEY`` or
    ``GEMINI_API_KEY``), when long enough to be told from text."""
    from agentrun.runner.environment import CREDENTIAL_SUFFIXES

    credentials = (name for name in environ if name.endswith(CREDENTIAL_SUFFIXES))
    return [
        environ[name]
        for name in dict.fromkeys((*names, *ALWAYS_SECRET, *credentials))
        if len(environ.get(name, "")) >= MIN_SECRET_LENGTH
    ]


def variables(config: Config) -> list[str]:
    """What must never reach git: the variables marked secret and every runtime's key."""
    from agentrun.runtimes.base import key_variable

    entries = {entry for listed in config.roles.values() for entry in listed}
    runtimes = [*config.runtimes.values(), *filter(None, map(config.runtime, entries))]
    keys = [key_variable(runtime) for runtime in runtimes]
    return [*config.secrets.env, *(key for key in keys if key)]


def remember_config(config: Config, environ: Mapping[str, str]) -> None:
    """Remember the values of ``config``'s secret variables, the runtimes' credentials
    and the forge tokens, as ``environ`` holds them.

    The values a runtime's ``env`` table writes literally are remembered when a session
    is given them (``runner.sessions``): the build's config snapshot must keep them.
    """
    remember(values_of(variables(config), environ))


def remember(values: Iterable[str]) -> None:
    """Add values that this process must never write into git."""
    global _values, _values_rx
    with _lock:
        new = _values | {v for v in values if len(v) >= MIN_SECRET_LENGTH}
        if new == _values:
            return
        # A value appears as itself, or escaped inside JSON (quotes, backslashes).
        forms = {v for v in new} | {json.dumps(v)[1:-1] for v in new}
        ordered = sorted(forms, key=len, reverse=True)
        _values = new
        _values_rx = re.compile("|".join(re.escape(f) for f in ordered))


def scrub(text: str) -> str:
    """``text`` with every known token shape and remembered value replaced."""
    text = _KEY_BLOCK.sub(REDACTED, text)
    text = SHAPES.sub(REDACTED, text)
    pattern = _values_rx
    return pattern.sub(REDACTED, text) if pattern is not None else text


def scrub_bytes(data: bytes) -> bytes:
    """``scrub`` for artifacts; bytes that are not UTF-8 pass through unchanged."""
    text = data.decode("utf-8", "surrogateescape")
    cleaned = scrub(text)
    return data if cleaned == text else cleaned.encode("utf-8", "surrogateescape")
