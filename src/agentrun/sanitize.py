"""Untrusted text (issue and comment bodies) made safe to show an agent.

Anyone who can open an issue or write a comment can try to steer an agent with text a
maintainer reading the page does not see: HTML comments, invisible and bidirectional
control characters, tag characters, variation-selector payloads, image alt text. All of
it is removed here, and the text is bounded in length, before any prompt is built.
"""

from __future__ import annotations

import re
import unicodedata

LIMIT = 20_000  # characters an agent gets from one piece of untrusted text

# Characters that render as nothing (or reorder what is shown) but that a model reads.
# Category Cf covers zero-width spaces and joiners, U+200E/F marks, U+202A–202E and
# U+2066–2069 bidi controls, U+2060–2064, U+FEFF and the U+E0000–E007F tag characters.
_INVISIBLE_RANGES = (
    (0xFE00, 0xFE0F),  # variation selectors: enough of them encode a hidden message
    (0xE0100, 0xE01EF),  # variation selectors supplement
    (0xE0000, 0xE007F),  # tag characters (Cf already, named for the reader)
    (0x115F, 0x1160),  # Hangul fillers render blank
    (0x3164, 0x3164),
    (0xFFA0, 0xFFA0),
    (0x2800, 0x2800),  # braille blank
)
_KEEP_CONTROLS = frozenset("\n\t")
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_IMG_TAG = re.compile(r"<img\b[^>]*>?", re.IGNORECASE)
_IMG_TEXT_ATTR = re.compile(
    r"""\s(?:alt|title|aria-label)\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]*)""", re.IGNORECASE
)


def sanitize(text: str, limit: int = LIMIT) -> str:
    """``text`` without hidden content, at most about ``limit`` characters long."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\u2028", "\n").replace("\u2029", "\n\n")
    text = remove_invisible(text)
    text = _HTML_COMMENT.sub("", text)
    text = _IMG_TAG.sub(lambda m: _IMG_TEXT_ATTR.sub("", m.group(0)), text)
    text = remove_image_alt(text)
    return bound(text.strip(), limit)


def is_invisible(char: str) -> bool:
    code = ord(char)
    if any(low <= code <= high for low, high in _INVISIBLE_RANGES):
        return True
    category = unicodedata.category(char)
    if category == "Cf":
        return True
    # Other control characters (NUL, ESC sequences, C1 controls) and unassigned or
    # private-use code points carry nothing a person can read.
    return category in ("Cc", "Co", "Cn", "Cs") and char not in _KEEP_CONTROLS


def remove_invisible(text: str) -> str:
    return "".join(char for char in text if not is_invisible(char))


def remove_image_alt(text: str) -> str:
    """``![alt](url)`` and ``![alt][ref]`` become ``![](url)`` and ``![][ref]``.

    The alt text may hold balanced brackets (CommonMark allows them), so it is scanned
    rather than matched with a pattern a nested ``]`` would end early.
    """
    out: list[str] = []
    i = 0
    while True:
        start = text.find("![", i)
        if start < 0:
            out.append(text[i:])
            return "".join(out)
        end = _closing_bracket(text, start + 1)
        if end < 0:  # an unclosed alt: drop the rest of the line, it never renders
            line_end = text.find("\n", start)
            out.append(text[i:start])
            i = len(text) if line_end < 0 else line_end
            continue
        out.append(text[i:start] + "![]")
        i = end + 1


def _closing_bracket(text: str, open_at: int) -> int:
    depth = 0
    i = open_at
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return i
        elif char == "\n" and text.startswith("\n", i + 1):
            return -1  # a blank line ends a paragraph, and any link text with it
        i += 1
    return -1


def bound(text: str, limit: int = LIMIT) -> str:
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return text[:limit] + f"\n[… {cut} more characters left out]"
