"""Rewrite src/agentrun/data/prices.json from the price table in litellm's wheel.

litellm ships ``model_prices_and_context_window_backup.json`` (MIT), kept up to date by its
maintainers and released several times a week: a flat map from the exact model names the
providers' APIs take to per-token prices. This takes the models that answer text (modes
``chat``, ``completion``, ``responses``) with an input and an output price, and keeps four
figures per model in US dollars per million tokens: ``input``, ``output`` and, where the
table has them, ``cache_read`` and ``cache_write``.

    .venv/bin/python scripts/refresh_prices.py [VERSION]     # the newest when omitted
    .venv/bin/python scripts/refresh_prices.py --wheel FILE  # a wheel already downloaded

The wheel comes from the package index through pip (``pip download --no-deps``). The
snapshot records the package, its version, the wheel's sha256 and the day it was taken. A
wheel whose licence is no longer MIT is refused: NOTICE would no longer be true.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

PACKAGE = "litellm"
TABLE = "litellm/model_prices_and_context_window_backup.json"
LICENCE = "MIT"
MODES = ("chat", "completion", "responses")
# Our name: litellm's per-token key.
FIGURES = {
    "input": "input_cost_per_token",
    "output": "output_cost_per_token",
    "cache_read": "cache_read_input_token_cost",
    "cache_write": "cache_creation_input_token_cost",
}
OUT = Path(__file__).resolve().parent.parent / "src" / "agentrun" / "data" / "prices.json"


def download(version: str | None, into: Path) -> Path:
    """The wheel of ``litellm==version`` (the newest without one), fetched by pip."""
    wanted = f"{PACKAGE}=={version}" if version else PACKAGE
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*pip, "--quiet", "--dest", str(into), wanted], check=True)
    (wheel,) = into.glob(f"{PACKAGE}-*.whl")
    return wheel


def metadata(archive: zipfile.ZipFile) -> dict[str, str]:
    """The wheel's METADATA headers (Name, Version, License-Expression, …)."""
    (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    headers = Parser().parsestr(archive.read(name).decode(), headersonly=True)
    return {key: str(value) for key, value in headers.items()}


def per_million(per_token: object) -> float | None:
    if isinstance(per_token, bool) or not isinstance(per_token, int | float):
        return None
    return round(per_token * 1_000_000, 8)


def trimmed(table: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The text models with both an input and an output price, four figures each."""
    models: dict[str, dict[str, float]] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict) or entry.get("mode") not in MODES:
            continue
        figures = {ours: per_million(entry.get(theirs)) for ours, theirs in FIGURES.items()}
        if figures["input"] is None or figures["output"] is None:
            continue
        models[name] = {k: v for k, v in figures.items() if v is not None}
    return dict(sorted(models.items()))


def render(source: dict[str, str], models: dict[str, dict[str, float]]) -> str:
    """The snapshot as JSON, one model a line, so that a refresh's diff reads per model."""
    lines = [f"    {json.dumps(name)}: {json.dumps(figures)}" for name, figures in models.items()]
    head = json.dumps({"source": source}, indent=2)[:-2]
    return head + ',\n  "models": {\n' + ",\n".join(lines) + "\n  }\n}\n"


def snapshot(wheel: Path, today: datetime.date) -> str:
    with zipfile.ZipFile(wheel) as archive:
        meta = metadata(archive)
        licence = meta.get("License-Expression", meta.get("License", ""))
        if meta.get("Name", "").lower() != PACKAGE or licence != LICENCE:
            raise SystemExit(
                f"{wheel.name}: expected {PACKAGE} under {LICENCE}, "
                f"found {meta.get('Name')!r} under {licence!r}"
            )
        table = json.loads(archive.read(TABLE))
    source = {
        "package": PACKAGE,
        "version": meta["Version"],
        "file": TABLE,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "taken": today.isoformat(),
        "licence": f"{LICENCE} (Copyright (c) 2023 Berri AI; see NOTICE)",
        "unit": "US dollars per million tokens",
    }
    return render(source, trimmed(table))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("version", nargs="?", help=f"the {PACKAGE} version (default: newest)")
    parser.add_argument("--wheel", type=Path, help="a wheel already downloaded")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (%(default)s)")
    args = parser.parse_args(argv)
    today = datetime.datetime.now(datetime.UTC).date()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download(args.version, Path(tmp))
        text = snapshot(wheel, today)
    args.out.write_text(text)
    data = json.loads(text)
    source = data["source"]
    print(f"{args.out}: {len(data['models'])} models from {PACKAGE} {source['version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
