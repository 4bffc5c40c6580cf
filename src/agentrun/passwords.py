"""Whether a password or token found where credentials stand (a URL's userinfo, an
``Authorization`` header) is a real one, or a placeholder.

A shape with a prefix of its own (``ghp_``) is a secret by its shape; a password in
``scheme://user:password@host`` or the credentials after ``Authorization: Bearer`` are
secrets by where they stand, and documentation, tests and templates put placeholders
there (``password``, ``${DB_PASSWORD}``, ``<token>``, ``Basic dXNlcjpwYXNz``). These
checks tell the two apart by entropy, after undoing the encoding the value stands in:
percent-encoding in a URL, base64 in a Basic header. The rules that use them are data,
``data/shapes.toml`` (``check = …``); a placeholder is one the rule's allow lists find.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections import Counter
from collections.abc import Callable, Mapping
from urllib.parse import unquote

# A shorter password is a PIN or a placeholder ("1234", "pass", "s3cret").
MIN_PASSWORD = 8
# An opaque token shorter than this is a test value ("Token 123", "abc"); real ones
# (OAuth access tokens, API keys, UUIDs) are longer.
MIN_TOKEN = 16
# The entropy floor of a password of n characters is MARGIN bits below the most n
# characters can have (log2 n, all distinct), and at most CEILING: a random password of
# 8 characters from 62 has 2.5 bits or more in 19 draws of 20, one of 16 has 3.5. Words
# repeat letters and fall below it ("postgres" 2.75 of 3.0 at most, "s3cr3tP4ss" 2.65
# of 3.32).
MARGIN = 0.5
CEILING = 3.0
# A password of one kind of character (lower-case letters, capitals or digits, with or
# without punctuation) is a word or words more often than not ("passdiff",
# "apples/oranges"): it must reach what a random one of 16 letters has.
ONE_KIND_FLOOR = 3.5
# An opaque token must exceed this many bits per character (a random one of 16
# characters, base62 or hex, has over 3.2 in 99 draws of 100).
TOKEN_FLOOR = 3.0

Placeholder = Callable[[str], bool]


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character."""
    counts = Counter(text).values()
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts) if text else 0.0


def password_floor(length: int) -> float:
    """The entropy a password of ``length`` characters must reach to count as one."""
    return min(CEILING, math.log2(length) - MARGIN) if length else CEILING


def is_password(value: str, placeholder: Placeholder) -> bool:
    """Whether ``value``, a password as it is met (percent-encoded in a URL), is a real
    one: long enough, no placeholder, and random enough for its length."""
    plain = unquote(value)
    if len(plain) < MIN_PASSWORD or placeholder(value) or placeholder(plain):
        return False
    floor = password_floor(len(plain))
    kinds = (str.islower, str.isupper, str.isdigit)
    if sum(any(map(kind, plain)) for kind in kinds) < 2:
        floor = max(floor, ONE_KIND_FLOOR)
    return entropy(plain) >= floor


def is_token(value: str, placeholder: Placeholder) -> bool:
    """Whether ``value``, the credentials of a Bearer, Token or other header, is a token."""
    return len(value) >= MIN_TOKEN and not placeholder(value) and entropy(value) > TOKEN_FLOOR


def is_basic(value: str, placeholder: Placeholder) -> bool:
    """Whether ``value``, the credentials of a Basic header (RFC 7617: base64 of
    ``user:password``), holds a real password; with none, whether the user is a token
    (an API key sent as the user name, as Stripe's and Twilio's are)."""
    plain = _unbase64(value)
    if plain is None or ":" not in plain:
        return is_token(value, placeholder)
    user, password = plain.split(":", 1)
    if password:
        return is_password(password, placeholder)
    return is_token(user, placeholder)


CHECKS: Mapping[str, Callable[[str, Placeholder], bool]] = {
    "password": is_password,
    "token": is_token,
    "basic": is_basic,
}


def _unbase64(value: str) -> str | None:
    """``value`` decoded from base64 as text (UTF-8, else Latin-1), or None."""
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return text if text.isprintable() else None
