"""Every line of ``cases.toml``: each secret found, named and scrubbed to the word, each
line that only looks like one left alone, and every rule of ``shapes.toml`` exercised."""

from __future__ import annotations

import base64
import json
import random
import re
import string
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentrun import secrets

CASES = Path(__file__).with_name("cases.toml")
SEED = 27
ALPHABETS = {
    "alnum": string.ascii_letters + string.digits,
    "letters": string.ascii_letters,
    "hex": "0123456789abcdef",
    "lower": string.ascii_lowercase,
    "upper": string.ascii_uppercase,
    "digits": string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "b64url": string.ascii_letters + string.digits + "-_",
}
FIELD = re.compile(r"\{\{([^{}]+)\}\}")


@dataclass(frozen=True)
class Case:
    kind: str
    line: str
    scrubbed: str
    drawn: tuple[str, ...]  # the secret parts drawn, none of which may be left


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _draw(rng: random.Random, spec: str) -> str:
    """One field's value: ``alphabet:n``, ``basic:user:n``, ``basic:n``, ``jwt``, ``pem:LABEL``."""
    name, _, rest = spec.partition(":")
    if name in ALPHABETS:
        return "".join(rng.choice(ALPHABETS[name]) for _ in range(int(rest)))
    if name == "basic":
        user, _, n = rest.rpartition(":")
        if not user:  # a key as the user name, no password
            user, n = _draw(rng, f"alnum:{n}"), "0"
        return base64.b64encode(f"{user}:{_draw(rng, f'alnum:{n}')}".encode()).decode()
    if name == "jwt":
        header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        claims = _b64url(json.dumps({"sub": _draw(rng, "digits:10"), "iat": 1700000000}).encode())
        return f"{header}.{claims}.{_b64url(rng.randbytes(32))}"
    if name == "pem":  # the label is written here, so that the file holds no key header
        body = base64.b64encode(rng.randbytes(300)).decode()
        lines = [body[i : i + 70] for i in range(0, len(body), 70)]
        label = f"{rest} PRIVATE KEY"
        return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])
    raise ValueError(f"no such field: {spec}")


def _expanded(raw: dict[str, Any], rng: random.Random) -> Case:
    named: dict[str, str] = {}
    drawn: list[str] = []

    def field(found: re.Match[str]) -> str:
        label, equals, spec = found.group(1).rpartition("=")
        value = _draw(rng, spec)
        if equals:
            named[label] = value
        else:
            drawn.append(value)
        return value

    line = FIELD.sub(field, raw["line"])
    scrubbed = FIELD.sub(lambda found: named[found.group(1)], raw["scrubbed"])
    return Case(raw["kind"], line, scrubbed, tuple(drawn))


def _load() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data = tomllib.loads(CASES.read_text("utf-8"))
    return data["secret"], data["not_secret"]


RAW_SECRETS, NOT_SECRETS = _load()
SECRETS = [_expanded(raw, random.Random(f"{SEED}:{n}")) for n, raw in enumerate(RAW_SECRETS)]


def _id(case: Case) -> str:
    return f"{case.kind}: {case.scrubbed[:40]}"


@pytest.mark.parametrize("case", SECRETS, ids=_id)
def test_each_secret_is_named_and_only_it_is_scrubbed(case: Case) -> None:
    assert secrets.shape_in(case.line) == case.kind
    assert secrets.scrub(case.line) == case.scrubbed
    assert secrets.scrub(case.scrubbed) == case.scrubbed  # what is left reads as it is
    assert secrets.shape_in(case.scrubbed) is None


@pytest.mark.parametrize("case", SECRETS, ids=_id)
def test_each_secret_is_scrubbed_inside_json(case: Case) -> None:
    cleaned = secrets.scrub(json.dumps({"text": case.line, "lines": [case.line, "more"]}))
    left = [part for part in case.drawn if len(part) >= 8 and part in cleaned]
    assert left == []
    assert json.loads(cleaned)["text"] == case.scrubbed


@pytest.mark.parametrize("raw", NOT_SECRETS, ids=lambda raw: raw["why"])
def test_what_only_looks_like_a_secret_is_left_alone(raw: dict[str, str]) -> None:
    line = raw["line"]
    assert secrets.shape_in(line) is None
    assert secrets.scrub(line) == line
    encoded = json.dumps({"text": line})
    assert secrets.scrub(encoded) == encoded


def test_every_rule_finds_one_of_the_secrets() -> None:
    shapes, _ = secrets._loaded()
    idle = [
        f"{shape.kind}: {shape.pattern[:50]}"
        for shape in shapes
        if not any(next(shape.spans(case.line), None) for case in SECRETS)
    ]
    assert idle == []
    assert all(shape.check in ("", *secrets.CHECKS) for shape in shapes)


def test_the_cases_file_itself_holds_no_secret() -> None:
    """Its secrets are drawn when the test runs: the file can be committed and pushed."""
    text = CASES.read_text("utf-8")
    assert [line for line in text.splitlines() if secrets.shape_in(line)] == []
    assert len(RAW_SECRETS) >= 40 and len(NOT_SECRETS) >= 40
