"""``git agentrun``: parse, call one core function, render. Heavy imports stay inside.

This module holds the group, its global options and the error handling; the commands live
by family (builds.py, steering.py, maintenance.py, action.py, pulls.py, agent.py, hook.py,
help.py) and are registered here. The exit codes (errors.py, and the README's table) are
chosen here and nowhere else.
"""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import click

from agentrun import __version__
from agentrun.cli import builds, maintenance, steering, tasks
from agentrun.cli.action import action
from agentrun.cli.agent import agent
from agentrun.cli.help import COMPLETE_VAR, completion, help_command
from agentrun.cli.hook import hook
from agentrun.cli.mcp import mcp
from agentrun.cli.memory import memory
from agentrun.cli.pulls import pulls
from agentrun.errors import EXIT_BUG, EXIT_INTERRUPT, EXIT_USER

if TYPE_CHECKING:
    from pathlib import Path


class AgentrunGroup(click.Group):
    """Maps errors to the fixed exit codes, for the console script and CliRunner alike."""

    def invoke(self, ctx: click.Context) -> Any:
        from agentrun.errors import AgentrunError

        try:
            return super().invoke(ctx)
        except AgentrunError as exc:
            _say_error(f"agentrun: {exc}")
            ctx.exit(EXIT_USER)
        except KeyboardInterrupt:
            _say_error("agentrun: interrupted")
            ctx.exit(EXIT_INTERRUPT)
        except BrokenPipeError:
            # The reader went away (`git agentrun log X | head`): not an error of ours.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception:
            import traceback

            path = _crash_file()
            path.write_text(traceback.format_exc())
            _say_error(f"agentrun: internal error (a bug); the trace is in {path}")
            ctx.exit(EXIT_BUG)


def _say_error(line: str) -> None:
    if os.environ.get("GITHUB_ACTIONS") == "true":  # an error may quote what an agent wrote
        from agentrun.commands.action_log import escape_text

        line = escape_text(line)
    with suppress(OSError):  # a stderr nobody reads must not turn an error into a crash
        click.echo(line, err=True)


def _crash_file() -> Path:
    """A new file for a bug's trace, never one an earlier crash wrote."""
    import tempfile
    from datetime import UTC, datetime
    from pathlib import Path

    stamp = f"{datetime.now(UTC):%Y%m%d-%H%M%S}"
    fd, name = tempfile.mkstemp(prefix=f"agentrun-crash-{stamp}-", suffix=".txt", dir=_crash_dir())
    os.close(fd)
    return Path(name)


def _crash_dir() -> Path:
    """Where a bug's trace goes: the temp folder, or, inside an agent's session, its scratch
    folder (a sandbox may make the temp folder the worktree, and a trace must not be
    committed with the agent's work)."""
    import tempfile
    from pathlib import Path

    scratch = Path(".agentrun") / "run"
    if os.environ.get("AGENTRUN_SESSION") and scratch.is_dir():
        return scratch
    return Path(tempfile.gettempdir())


@click.group(cls=AgentrunGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "--version", prog_name="agentrun", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Turn a goal into a reviewed, verified draft proposal, with all state in git."""


for command in (
    *builds.COMMANDS,
    *steering.COMMANDS,
    *maintenance.COMMANDS,
    *tasks.COMMANDS,
    action,
    pulls,
    memory,
    agent,
    mcp,
    hook,
    help_command,
    completion,
):
    cli.add_command(command)


def main() -> None:
    cli.main(prog_name="git agentrun", complete_var=COMPLETE_VAR)


if __name__ == "__main__":
    main()
    sys.exit(0)
