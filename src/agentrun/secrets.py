"""Secrets: the known token shapes, and scrubbing them out of what agentrun writes.

Transcripts, artifacts and event payloads pass through ``scrub`` before they become
git objects (DESIGN §11): a token an agent printed never reaches the log. Scrubbed
are the known token shapes and the values this process was told are secret
(``remember``: the variables ``secrets.env`` names, the runtimes' API keys, forge
tokens). The pre-push hook and the runner's guards find the same shapes in diffs.

The shapes are data, ``data/shapes.toml``: one rule per token format, each citing the
provider's description. They are read on first use and each rule is compiled only when
text holds one of its keywords, so a process that never meets a secret pays little.
A credential known by where it stands (a URL's password, an ``Authorization`` header's
value) must also pass its rule's check in ``passwords``: real, not a placeholder.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrun.environment import ALWAYS_SECRET, CREDENTIAL_SUFFIXES, key_variable
from agentrun.passwords import CHECKS
from agentrun.passwords import entropy as entropy  # the rules' measure, named here too

if TYPE_CHECKING:
    from agentrun.config import Config

# A shorter value would match ordinary text ("1", "true", a port number).
MIN_SECRET_LENGTH = 8
REDACTED = "[redacted]"

# When scrubbing, a private key goes whole, from its BEGIN line to its END line.
_KEY_BLOCK = re.compile(
    r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9_-]{0,100}"
    r"PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# Forge tokens are secret wherever they are set, whatever the config says.

_lock = threading.Lock()
_values: frozenset[str] = frozenset()
_values_rx: re.Pattern[str] | None = None


@dataclass(frozen=True)
class Shape:
    """One secret shape: a regex, the keywords that must be present, and its checks."""

    kind: str  # what a finding names: "a GitHub token"
    pattern: str
    keywords: tuple[str, ...]  # lower case; the pattern runs only where one is present
    entropy: float = 0.0  # bits per character the secret must exceed
    allowed: tuple[str, ...] = ()  # patterns of values that are not secrets
    anchored: bool = False  # a match starts with a keyword: try only there
    check: str = ""  # a check of passwords.CHECKS the secret must pass too

    @functools.cached_property
    def _rx(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    @functools.cached_property
    def _allowed_rx(self) -> tuple[re.Pattern[str], ...]:
        return tuple(map(re.compile, self.allowed))

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """Where the secrets this shape finds in ``text`` are (the secret, not its context)."""
        for found in self._matches(text):
            start, end = _secret_span(found)
            secret = text[start:end]
            if self.entropy and entropy(secret) <= self.entropy:
                continue
            if self._allowed(secret):
                continue
            if self.check and not CHECKS[self.check](secret, self._allowed):
                continue
            yield start, end

    def _allowed(self, value: str) -> bool:
        """Whether one of this rule's allow lists says ``value`` is not a secret."""
        return any(allowed.search(value) for allowed in self._allowed_rx)

    def _matches(self, text: str) -> Iterator[re.Match[str]]:
        lowered = text.lower()
        if not self.anchored or len(lowered) != len(text):  # (a few letters grow lowered)
            yield from self._rx.finditer(text)
            return
        for keyword in self.keywords:
            at = lowered.find(keyword)
            while at >= 0:
                found = self._rx.match(text, at)
                if found is not None:
                    yield found
                at = lowered.find(keyword, at + 1)


def shape_in(line: str) -> str | None:
    """The kind of the first known token shape in ``line`` ("a GitHub token"), if any."""
    for shape in _candidates(line):
        if next(shape.spans(line), None) is not None:
            return shape.kind
    return None


def values_of(names: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """The values of the named variables, of the forge tokens and of every variable whose
    name says it is a credential (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``:
    the provider variables a runtime is given, such as ``AWS_SECRET_ACCESS_KEY`` or
    ``GEMINI_API_KEY``), when long enough to be told from text."""
    credentials = (name for name in environ if name.endswith(CREDENTIAL_SUFFIXES))
    return [
        environ[name]
        for name in dict.fromkeys((*names, *ALWAYS_SECRET, *credentials))
        if len(environ.get(name, "")) >= MIN_SECRET_LENGTH
    ]


def variables(config: Config) -> list[str]:
    """What must never reach git: the variables marked secret and every runtime's key."""
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
    text = _redact(text, (span for shape in _candidates(text) for span in shape.spans(text)))
    pattern = _values_rx
    return pattern.sub(REDACTED, text) if pattern is not None else text


def scrub_bytes(data: bytes) -> bytes:
    """``scrub`` for artifacts; bytes that are not UTF-8 pass through unchanged."""
    text = data.decode("utf-8", "surrogateescape")
    cleaned = scrub(text)
    return data if cleaned == text else cleaned.encode("utf-8", "surrogateescape")


def _candidates(text: str) -> list[Shape]:
    """The shapes one of whose keywords ``text`` holds, in order (the cheap prefilter)."""
    every, by_keyword = _loaded()
    lowered = text.lower()
    hit = [indices for keyword, indices in by_keyword if keyword in lowered]
    return [every[i] for i in sorted({i for indices in hit for i in indices})]


def _secret_span(found: re.Match[str]) -> tuple[int, int]:
    """The secret's span: the first unnamed group that matched, else the whole match.
    Named groups only help the match (the quote a value opens with)."""
    named = set(found.re.groupindex.values())
    for index in range(1, found.re.groups + 1):
        if index not in named and found.group(index):
            return found.span(index)
    return found.span()


@functools.cache
def _loaded() -> tuple[tuple[Shape, ...], tuple[tuple[str, tuple[int, ...]], ...]]:
    import tomllib
    from importlib import resources

    text = resources.files("agentrun").joinpath("data/shapes.toml").read_text("utf-8")
    data: dict[str, Any] = tomllib.loads(text)
    allowlists = {name: tuple(raw["regexes"]) for name, raw in data["allowlists"].items()}
    every = tuple(
        Shape(
            rule["kind"],
            rule["regex"],
            tuple(rule["keywords"]),
            rule.get("entropy", 0.0),
            tuple(p for name in ("everywhere", *rule.get("allow", ())) for p in allowlists[name]),
            rule.get("anchored", False),
            rule.get("check", ""),
        )
        for rule in data["rule"]
    )
    by_keyword: dict[str, list[int]] = {}
    for index, shape in enumerate(every):
        for keyword in shape.keywords:
            by_keyword.setdefault(keyword, []).append(index)
    return every, tuple((k, tuple(v)) for k, v in by_keyword.items())


def _redact(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with each span (overlapping ones merged) replaced by ``REDACTED``."""
    parts: list[str] = []
    done = 0
    for start, end in sorted(spans):
        if end <= done or start == end:
            continue
        if start > done:
            parts += [text[done:start], REDACTED]
        elif not parts:
            parts.append(REDACTED)
        done = end
    return "".join(parts) + text[done:] if parts else text
