"""The structure holds its shape: no module of the package over 400 lines (STYLE habit 1).

scripts/check also runs the layer contracts (lint-imports) and pylint's duplicate-code;
this test is the one for sizes, so that `pytest` alone fails on a module grown too big.
"""

from __future__ import annotations

from pathlib import Path

import agentrun

LIMIT = 400
PACKAGE = Path(agentrun.__file__).parent


def test_no_module_is_over_400_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert len(sizes) > 100  # the package was found, not an empty folder
    over = {name: lines for name, lines in sizes.items() if lines > LIMIT}
    assert over == {}, f"split these along their seams: {over}"
