"""The scripted model server's prompt cache: which input tokens a provider bills as read
from its cache, written to it, or at the full rate.

Two rules, as the providers document them:

- **Anthropic (Messages)**: caching is opt-in per request. A block carrying
  ``cache_control`` is a breakpoint (at most four; more is a 400); the prefix up to it,
  in the order tools → system → messages, is written to the cache. A request reads the
  longest prefix written before that ends at a breakpoint or at one of the 20 block
  boundaries before one, byte-identical; what lies between that and the last breakpoint
  is written (``cache_creation_input_tokens``), what follows the last breakpoint is
  billed in full (``input_tokens``). A prefix under ``minimum`` tokens is not cached.
- **OpenAI (chat completions, Responses)**: automatic. The longest prefix shared with an
  earlier request of the same model is read from the cache once it has 1,024 tokens, in
  steps of 128 (``cached_tokens``, which the prompt's total includes).

Tokens are approximated as four characters of the request's JSON each. With
``honour=False`` the server counts the same tokens but never caches: the baseline a
benchmark compares against, in the same run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from dataclasses import dataclass
from typing import Any

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
MINIMUM_TOKENS = 1024  # Claude Sonnet's and OpenAI's smallest cacheable prefix
OPENAI_STEP = 128


class CacheRequestError(ValueError):
    """A request the provider refuses (HTTP 400), as its message."""


@dataclass(frozen=True)
class Billed:
    """A request's input tokens: at the full rate, read from the cache, written to it."""

    tokens_in: int
    cache_read: int = 0
    cache_write: int = 0


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class PromptCache:
    def __init__(self, honour: bool = True, minimum: int = MINIMUM_TOKENS) -> None:
        self.honour, self.minimum = honour, minimum
        self._written: set[str] = set()  # digests of Anthropic prefixes
        self._prompts: list[tuple[str, str]] = []  # OpenAI (model, prompt) seen
        self._lock = threading.Lock()

    def anthropic(self, body: dict[str, Any]) -> Billed:
        blocks, marked = check_breakpoints(body)
        ends = list(_running_sum(tokens(b) for b in blocks))  # tokens up to block i
        total = ends[-1] if ends else 0
        if not self.honour:
            return Billed(total)
        digests = list(_prefix_digests(str(body.get("model")), blocks))
        cacheable = [i for i in marked if ends[i] >= self.minimum]
        with self._lock:
            near = {j for i in cacheable for j in range(max(i - LOOKBACK_BLOCKS + 1, 0), i + 1)}
            hits = [j for j in near if digests[j] in self._written]
            read = ends[max(hits)] if hits else 0
            written = ends[cacheable[-1]] if cacheable else 0
            self._written.update(digests[i] for i in cacheable)
        write = max(written - read, 0)
        return Billed(total - read - write, cache_read=read, cache_write=write)

    def openai(self, body: dict[str, Any]) -> Billed:
        model, prompt = str(body.get("model")), _openai_prompt(body)
        total = tokens(prompt)
        if not self.honour:
            return Billed(total)
        with self._lock:
            earlier = [p for m, p in self._prompts if m == model]
            # Character by character is the point here: a prompt is not a path.
            common = (os.path.commonprefix([prompt, p]) for p in earlier)  # noqa: RUF071
            shared = max((len(c) for c in common), default=0)
            self._prompts.append((model, prompt))
        same = shared // 4
        cached = 0 if same < MINIMUM_TOKENS else same - (same - MINIMUM_TOKENS) % OPENAI_STEP
        return Billed(total - cached, cache_read=cached)


def check_breakpoints(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The request's blocks and breakpoints (:func:`_anthropic_blocks`), or the API's
    refusal of them."""
    blocks, marked = _anthropic_blocks(body)
    if len(marked) > MAX_BREAKPOINTS:
        raise CacheRequestError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marked)}."
        )
    return blocks, marked


def _running_sum(values: Any) -> Any:
    total = 0
    for value in values:
        total += value
        yield total


def _anthropic_blocks(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """The request as blocks in cache order, each as its JSON without ``cache_control``,
    and the indexes of the marked ones."""
    blocks: list[str] = []
    marked: list[int] = []

    def add(where: str, block: Any) -> None:
        if isinstance(block, dict) and "cache_control" in block:
            control = block["cache_control"]
            if not isinstance(control, dict) or control.get("type") != "ephemeral":
                raise CacheRequestError(f"cache_control: unknown value {control!r}")
            marked.append(len(blocks))
            block = {k: v for k, v in block.items() if k != "cache_control"}
        blocks.append(where + json.dumps(block, sort_keys=True))

    for tool in body.get("tools") or []:
        add("tool:", tool)
    for block in _as_blocks(body.get("system")):
        add("system:", block)
    for message in body.get("messages") or []:
        for block in _as_blocks(message.get("content")):
            add(f"{message.get('role')}:", block)
    return blocks, marked


def _as_blocks(content: Any) -> list[Any]:
    """A string is the API's short form of one text block: the same prompt either way."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _prefix_digests(model: str, blocks: list[str]) -> Any:
    digest = hashlib.sha256(model.encode())
    for block in blocks:
        digest.update(b"\0" + block.encode())
        yield digest.copy().hexdigest()


def _openai_prompt(body: dict[str, Any]) -> str:
    """The prompt as the provider sees it, stable parts first: tools, instructions, then
    the conversation one item at a time (chat ``messages`` or Responses ``input``)."""
    parts = [json.dumps(body.get("tools") or [], sort_keys=True)]
    parts.append(json.dumps(body.get("instructions") or "", sort_keys=True))
    items = body.get("messages") or body.get("input") or []
    items = [items] if isinstance(items, str) else items
    parts += [json.dumps(item, sort_keys=True) for item in items]
    return "\n".join(parts)
