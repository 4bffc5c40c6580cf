"""``git agentrun``'s entry point (the console script ``git-agentrun``).

The agent verbs' quick path runs first, without click or any command family loaded
(:mod:`agentrun.cli.quickverbs`); whatever it does not settle, ``--help`` and every usage
error included, goes to the click application (:mod:`agentrun.cli.app`) as it was typed.
"""

from __future__ import annotations

import os
import sys

from agentrun.cli import COMPLETE_VAR

TYPE_CHECKING = False  # not typing itself: this module must load fast
if TYPE_CHECKING:
    import click


def main() -> None:
    if sys.argv[1:2] == ["agent"] and not os.environ.get(COMPLETE_VAR):
        from agentrun.cli.quickverbs import run_quick

        run_quick(sys.argv[2:])  # exits when it settled the verb
    from agentrun.cli.app import cli

    cli.main(prog_name="git agentrun", complete_var=COMPLETE_VAR)


def __getattr__(name: str) -> click.Group:
    """``from agentrun.cli.main import cli``: the click application, loaded when asked for."""
    if name == "cli":
        from agentrun.cli.app import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
    sys.exit(0)
