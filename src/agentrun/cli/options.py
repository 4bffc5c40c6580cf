"""What the command families share: the repository, the SLUG argument, the option stacks.

Each family (builds.py, steering.py, maintenance.py, action.py, pulls.py) declares its
commands with these, and main.py registers them onto the group.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click

F = TypeVar("F", bound=Callable[..., Any])


def current_repo() -> Any:
    """The repository of the current directory."""
    from pathlib import Path

    from agentrun.gitrepo import open_repo

    return open_repo(Path.cwd())


def echo_json(data: object) -> None:
    import json

    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _build_slug(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A SLUG argument: an exact slug, or a prefix only one build's slug has."""
    from agentrun.commands.slugs import resolve_slug

    return resolve_slug(current_repo(), value)


slug_argument = click.argument("slug", callback=_build_slug)
"""``SLUG``, resolved to one build's slug before the command runs."""

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Machine-readable output (schema 1)."
)


def time_limit_option(help_text: str) -> Callable[[F], F]:
    """``--time-limit MINUTES`` (a CI job's budget), with the command's own help."""
    return click.option(
        "--time-limit",
        type=click.FloatRange(min=0, min_open=True),
        metavar="MINUTES",
        envvar="AGENTRUN_TIME_LIMIT",
        show_envvar=True,
        help=help_text,
    )


def remote_option(help_text: str) -> Callable[[F], F]:
    """``--remote REMOTE`` (default: [sync] remote), with the command's own help."""
    return click.option(
        "--remote", metavar="REMOTE", envvar="AGENTRUN_REMOTE", show_envvar=True, help=help_text
    )


def runner_options(command: F) -> F:
    """``--remote`` and ``--time-limit``, shared by ``run``, ``resume`` and ``reconcile``."""
    stops = time_limit_option("Stop after MINUTES as Ctrl-C would; the build stays resumable.")
    return remote_option(
        "Claim the build on REMOTE and push it there at every phase boundary "
        "(default: [sync] remote)."
    )(stops(command))


def agents_run(command: F) -> F:
    """A command that runs agents: a credential a CI job persisted in the repository is
    taken out before any agent starts and put back at exit (``credentials.withdrawn``)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from agentrun.credentials import withdrawn
        from agentrun.gitrepo import common_dir

        with withdrawn(common_dir(current_repo()), lambda line: click.echo(line, err=True)):
            return command(*args, **kwargs)

    return cast(F, wrapper)
