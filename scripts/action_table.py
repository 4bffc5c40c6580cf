"""Write the Action's inputs and outputs, read from action.yml, into README.md between
the ``action-table`` markers (``--check``: is the table current?).

    .venv/bin/python scripts/action_table.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
README = ROOT / "README.md"
START = "<!-- action-table: generated from action.yml by scripts/action_table.py -->"
END = "<!-- /action-table -->"


def cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    return f"`{text}`" if str(text) else "(empty)"


def table(action: dict[str, Any]) -> str:
    lines = ["| input | default | what it is |", "| --- | --- | --- |"]
    for name, spec in action["inputs"].items():
        default = code(spec.get("default", ""))
        lines.append(f"| `{name}` | {cell(default)} | {cell(spec['description'])} |")
    lines += ["", "| output | what it is |", "| --- | --- |"]
    for name, spec in action["outputs"].items():
        lines.append(f"| `{name}` | {cell(spec['description'])} |")
    return "\n".join(lines)


def rewritten(readme: str, action: dict[str, Any]) -> str:
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"README.md has no {START} ... {END} block")
    return f"{head}{START}\n{table(action)}\n{END}{tail}"


def main() -> int:
    action = yaml.safe_load(ACTION.read_text())
    current = README.read_text()
    wanted = rewritten(current, action)
    if "--check" in sys.argv[1:]:
        if wanted != current:
            print("README.md's Action table is out of date: run scripts/action_table.py")
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
