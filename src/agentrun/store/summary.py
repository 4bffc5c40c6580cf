"""The summary index: ``.git/agentrun/summary.idx``, what ``status`` lists without reading
a single log (derived and disposable like the state cache, DESIGN §2).

A record is a JSON line ``[KEY, kind, ..., n, crc]`` and then ``n`` characters and a
newline. ``KEY`` is the agentrun release and this file's format (a record another
release wrote is never used); ``crc`` the CRC-32 of the record's UTF-8 but for itself,
so that a torn or edited record is never used either.

- ``[KEY, "build", slug, tip, entry, n, crc]`` and the text:
  build ``slug``'s summary (kernel/summary.py) at the log's tip ``tip``. ``entry`` holds
  the table's cells and what the live values are computed from; the text is the build's
  ``status --json`` object already encoded, with a NUL character (which JSON text never
  holds raw) where each value read live goes (``SLOTS``), so that ``status`` neither
  decodes nor encodes it. A record is used only while the build's ref, or the archive,
  still names that tip: a moved, rewritten or deleted log misses and is read again.
- ``[KEY, "archive", tip, [[slug, tip], ...], 0, crc]``: the archived builds as the archive ref
  at ``tip`` lists them, in ``store.archive.archived``'s order.
- ``[KEY, "base", size, 0, crc]``: the first record of a rewritten file, and its size then.

Later records win. Whoever moves a log appends its record (``O_APPEND``, one write: the
cost does not grow with the number of builds); ``status`` rewrites the file with only
what it listed when it had to read a log, and an appender does once the file has grown
well past its last rewrite. Writers race freely: a record lost to a rewrite or torn by
another writer costs one log read later, never wrong data, since a summary is only used
for its own tip. Nothing here imports pydantic or pygit2: ``status`` reads this file on
its fast path.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from typing import Any

from agentrun import __version__

FORMAT = 1  # bump when a summary's shape changes
KEY = f"{__version__}/{FORMAT}"
NAME = "summary.idx"
GROWTH_SLACK = 256 * 1024  # characters appended past twice the last rewrite, then rewrite
SLOTS = ("state", "runner", "archived")  # a row's live values; then each task's two
TASK_SLOTS = ("state", "runner")
SLOT = "\0"
INDENT = "    "  # a build's object sits in ``builds`` of the ``status --json`` document

Entry = dict[str, Any]
Archived = list[tuple[str, str]]  # (slug, tip of its log), as the archive lists them
Build = tuple[str, str, Entry]  # slug, tip, entry (with its "json" text)


class Index:
    """What the file holds: entries by (slug, tip), the archived set by archive tip."""

    def __init__(self) -> None:
        self.builds: dict[tuple[str, str], Entry] = {}
        self.archive_tip: str | None = None
        self.archived: Archived | None = None
        self.records = 0  # records read, used or not

    def entry(self, slug: str, tip: str) -> Entry | None:
        return self.builds.get((slug, tip))

    def archived_at(self, tip: str | None) -> Archived | None:
        """The archived set when the archive ref is at ``tip`` (None: no archive ref)."""
        if tip is None:
            return []
        return self.archived if self.archive_tip == tip else None


def path(folder: str) -> str:
    """The index of the repository whose agentrun folder (``.git/agentrun``) is ``folder``."""
    return os.path.join(folder, NAME)


def load(folder: str) -> Index:
    """The index as far as it can be read: an absent, unreadable or foreign file is empty."""
    found = Index()
    try:
        with open(path(folder), "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return found
    decode = json.JSONDecoder().raw_decode  # in place: no slice, no whitespace scan
    at, size = 0, len(data)
    while at < size:
        try:
            item, end = decode(data, at)
        except ValueError:
            item, end = None, at
        if not isinstance(item, list) or not item or data[end : end + 1] != "\n":
            at = _resync(data, at + 1)  # torn by a racing writer, or damaged: read again
            continue
        start, at = at, end + 1
        n, crc = item[-2:] if len(item) >= 4 else (-1, None)
        if not isinstance(n, int) or n < 0:
            at = _resync(data, at)
            continue
        text, at = data[at : at + n], at + n + 1
        if data[at - 1 : at] != "\n" or crc != _crc(data[start:end], text):
            at = _resync(data, end + 1)  # torn or edited: what follows may be whole
            continue
        found.records += 1
        if item[0] == KEY and item[1] == "build" and len(item) == 7:
            _take_build(found, item[2:5], text)
        elif item[0] == KEY and item[1] == "archive" and len(item) == 6:
            _take_archive(found, item[2], item[3])
    return found


def _crc(head: str, text: str) -> int:
    """The CRC-32 of a record but for its own crc field (the header's last item)."""
    return zlib.crc32(f"{head[: head.rfind(',')]}\n{text}".encode())


def _resync(data: str, at: int) -> int:
    """Where the next record starts: a record's line starts with ``[``, a line of a row's
    text never does (it starts with ``{`` or with its indentation)."""
    found = data.find("\n[", at - 1 if at else 0)
    return len(data) if found < 0 else found + 1


def _take_build(index: Index, item: list[Any], text: str) -> None:
    slug, tip, entry = item
    # A whole record of this release has the shape entry() gave it; the slots are counted
    # all the same, for the text is filled from them.
    tasks = entry.get("tasks") if isinstance(entry, dict) else None
    if isinstance(tasks, list) and text.count(SLOT) == len(SLOTS) + 2 * len(tasks):
        entry["json"] = text
        index.builds[(slug, tip)] = entry


def _take_archive(index: Index, tip: object, pairs: object) -> None:
    if isinstance(tip, str) and isinstance(pairs, list) and all(_pair(p) for p in pairs):
        index.archive_tip, index.archived = tip, [(p[0], p[1]) for p in pairs]


def _pair(item: object) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], str)
    )


def entry(summary: dict[str, Any]) -> Entry:
    """What the index keeps of a summary (kernel/summary.py): the row encoded as ``status
    --json`` prints it (``json.dumps(indent=2)``), with a NUL where each live value goes."""
    row = dict(summary["row"])
    tasks = [dict(t) for t in row["tasks"]]
    row["tasks"] = tasks
    # No text a build holds names a slot by chance. os.urandom, not the secrets module:
    # a script's own folder may hold a secrets.py that shadows it (bench/ does).
    nonce = os.urandom(16).hex()
    slots: list[str] = []
    for holder, names in [(row, SLOTS), *((t, TASK_SLOTS) for t in tasks)]:
        for name in names:
            holder[name] = f"{SLOT}{nonce}:{len(slots)}"
            slots.append(json.dumps(holder[name]))
    rest = json.dumps(row, indent=2, ensure_ascii=False).replace("\n", "\n" + INDENT)
    parts = []
    for slot in slots:
        part, found, rest = rest.partition(slot)
        parts.append(part)
        if not found or nonce in part:
            # The slots are filled in this order (row_text): a row whose keys came in
            # another order would put a value in the wrong place.
            raise AssertionError(f"the live values of a status row are out of order: {slot}")
    parts.append(rest)
    return {
        "status": summary["status"],
        "state": summary["row"]["state"],
        "approval": summary["approval"],
        "created_at": summary["row"]["created_at"],
        "cells": summary["cells"],
        "tasks": summary["tasks"],
        "json": SLOT.join(parts),
    }


def row_text(entry: Entry, values: list[str]) -> str:
    """The row's ``status --json`` text with its slots filled (``values``: JSON text, in
    ``SLOTS`` order, then each task's)."""
    parts = entry["json"].split(SLOT)
    filled = [parts[0]]
    for value, part in zip(values, parts[1:], strict=True):
        filled += (value, part)
    return "".join(filled)


def _record(kind: str, *item: object, text: str = "") -> str:
    head = json.dumps([KEY, kind, *item, len(text), 0], ensure_ascii=False, separators=(",", ":"))
    head = f"{head[: head.rfind(',')]},{_crc(head, text)}]"
    return f"{head}\n{text}\n"


def _build(slug: str, tip: str, item: Entry) -> str:
    meta = {k: v for k, v in item.items() if k != "json"}
    return _record("build", slug, tip, meta, text=item["json"])


def record(folder: str, slug: str, tip: str, summary: dict[str, Any]) -> None:
    """Add build ``slug``'s summary at ``tip`` (the append path, after it moved the log)."""
    add(folder, [(slug, tip, entry(summary))])


def add(folder: str, builds: list[Build]) -> None:
    """Append these entries; rewrite the file once it has grown well past its last
    rewrite."""
    if not builds:
        return
    # A newline first ends whatever a writer that died mid-record left behind.
    data = ("\n" + "".join(_build(*b) for b in builds)).encode()
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(path(folder), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return  # a read-only .git (an agent's sandbox): status reads the log instead
    try:
        os.write(fd, data)
        size = os.fstat(fd).st_size
    except OSError:
        return
    finally:
        os.close(fd)
    if size > 2 * _base_size(folder) + GROWTH_SLACK:
        _compact(folder)


def _base_size(folder: str) -> int:
    """The size the file had when it was last rewritten (0: never, or unreadable)."""
    try:
        with open(path(folder), "rb") as fh:
            first = json.loads(fh.readline())
    except (OSError, ValueError):
        return 0
    if isinstance(first, list) and first[:2] == [KEY, "base"] and isinstance(first[2], int):
        return first[2]
    return 0


def _compact(folder: str) -> None:
    """Keep each build's newest entry and the newest archived set."""
    index = load(folder)
    newest: dict[str, tuple[str, Entry]] = {}
    for (slug, tip), item in index.builds.items():
        newest[slug] = (tip, item)  # dicts keep the order records were read in
    archive = None if index.archive_tip is None else (index.archive_tip, index.archived or [])
    rewrite(folder, [(slug, tip, item) for slug, (tip, item) in newest.items()], archive)


def rewrite(folder: str, builds: list[Build], archive: tuple[str, Archived] | None) -> None:
    """Replace the file (atomically) with these entries and this archived set."""
    body = "".join(_build(*b) for b in builds)
    if archive is not None:
        body += _record("archive", archive[0], [list(pair) for pair in archive[1]])
    data = (_record("base", len(body)) + body).encode()
    tmp = f"{path(folder)}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path(folder))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
