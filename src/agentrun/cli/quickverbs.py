"""``git agentrun agent context|done|approve|revise|pass|fail``, without click.

Only the plain forms are read here (``done [--summary TEXT]``, ``revise --finding TEXT
…``, ``fail --reason TEXT``, each option also as ``--option=TEXT``); anything else —
``--help``, an unknown or repeated option, a value that starts with ``-`` — returns to
the click application untouched, which parses it, helps or refuses as it always did.
A verb this path settles exits as the click command would: its line on stdout and 0, or
a refusal through :func:`agentrun.cli.exits.failure` (1, nothing queued).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agentrun.kernel.rules import VerbReport

NO_OPTION = ("context", "approve", "pass")
ONE_OPTION = {"done": "--summary", "fail": "--reason", "revise": "--finding"}


def parse(args: list[str]) -> VerbReport | None:
    """The report ``args`` (after ``agent``) ask for, ``VerbReport("context")`` for the
    context; None: not a plain form, for click."""
    if not args:
        return None
    verb, rest = args[0], args[1:]
    if verb in NO_OPTION:
        return None if rest else VerbReport(verb)
    option = ONE_OPTION.get(verb)
    if option is None:
        return None
    values: list[str] = []
    while rest:
        if rest[0] == option and len(rest) > 1 and not rest[1].startswith("-"):
            values.append(rest[1])
            rest = rest[2:]
        elif rest[0].startswith(option + "="):
            values.append(rest[0][len(option) + 1 :])
            rest = rest[1:]
        else:
            return None
    if verb == "revise":
        return VerbReport(verb, findings=tuple(values)) if values else None
    if verb == "fail":
        return VerbReport(verb, values[0]) if len(values) == 1 else None
    return VerbReport(verb, values[0] if values else "") if len(values) <= 1 else None


def run_quick(args: list[str]) -> None:
    """Settle the verb ``args`` ask for and exit; return when the click application must."""
    rep = parse(args)
    if rep is None:
        return
    from agentrun.agent.quick import quick_context, quick_submit
    from agentrun.cli.exits import failure

    try:
        cwd = Path.cwd()
        if rep.verb == "context":
            written = quick_context(cwd, os.environ)
            said = None if written is None else str(written)
        else:
            said = quick_submit(rep, cwd, os.environ)
        if said is None:
            return
        sys.stdout.write(f"{said}\n")
        sys.stdout.flush()
    except (Exception, KeyboardInterrupt) as exc:
        sys.exit(failure(exc))
    sys.exit(0)
