"""``git agentrun``: parse, call one core function, render. Heavy imports stay inside.

This module holds the group and its global options; the commands live by family
(builds.py, steering.py, maintenance.py, action.py, pulls.py, agent.py, hook.py, help.py)
and are registered here. The exit codes (errors.py, and the README's table) are chosen
in exits.py and nowhere else; main.py is the entry point.
"""

from __future__ import annotations

from typing import Any

import click

from agentrun import __version__
from agentrun.cli import builds, maintenance, steering, tasks
from agentrun.cli.action import action
from agentrun.cli.agent import agent
from agentrun.cli.exits import failure
from agentrun.cli.help import completion, help_command
from agentrun.cli.hook import hook
from agentrun.cli.mcp import mcp
from agentrun.cli.memory import memory
from agentrun.cli.pulls import pulls


class AgentrunGroup(click.Group):
    """Maps errors to the fixed exit codes, for the console script and CliRunner alike."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            ctx.exit(failure(exc))


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
