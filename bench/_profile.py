"""What the build benchmarks' ``--profile`` prints: a cProfile of the runner, as two short
tables (agentrun's own functions by cumulative time, and anything by its own time)."""

from __future__ import annotations

import pstats
from pathlib import Path

OURS = "/agentrun/"


def _where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name  # a builtin: {method 'set_target' of '_pygit2.Reference' objects}
    short = path.split(OURS, 1)[1] if OURS in path else Path(path).name
    return f"{short}:{line} {name}"


def table(stats: pstats.Stats, top: int = 25) -> list[str]:
    """The profile's two tables, as lines."""
    rows = stats.stats  # type: ignore[attr-defined]  # {func: (cc, nc, tt, ct, callers)}
    total = max((v[3] for v in rows.values()), default=0.0)
    lines = [f"  profile: {total:.2f} s in all", "  by cumulative time (agentrun's own):"]
    lines.append(f"    {'calls':>7} {'cum ms':>9} {'own ms':>8}  function")
    ours = [(f, v) for f, v in rows.items() if OURS in f[0]]
    for func, (_, calls, own, cum, _) in sorted(ours, key=lambda x: -x[1][3])[:top]:
        lines.append(f"    {calls:7d} {cum * 1e3:9.1f} {own * 1e3:8.1f}  {_where(func)}")
    lines.append("  by own time (anything):")
    lines.append(f"    {'calls':>7} {'own ms':>9} {'cum ms':>8}  function")
    for func, (_, calls, own, cum, _) in sorted(rows.items(), key=lambda x: -x[1][2])[:top]:
        lines.append(f"    {calls:7d} {own * 1e3:9.1f} {cum * 1e3:8.1f}  {_where(func)}")
    return lines
