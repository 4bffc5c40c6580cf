"""``git agentrun hook …``: install, remove and run the pre-push hook."""

from __future__ import annotations

import os
import sys

import click

from agentrun.errors import EXIT_USER


@click.group()
def hook() -> None:
    """The pre-push hook: guards for build branches, builds for pushed Agentrun-Goal
    trailers, and their logs pushed along."""


@hook.command("install")
def hook_install() -> None:
    """Install the pre-push hook (honours core.hooksPath).

    A pre-push hook already there (git-lfs's, say) is chained: it runs first, with the
    same arguments and input, and its refusal stops the push. Where git-agentrun is not
    on PATH, the hook refuses pushes of build branches and of commits with an
    Agentrun-Goal trailer unless AGENTRUN_HOOK_OPTIONAL=1.
    """
    from pathlib import Path

    from agentrun.hook.install import install

    click.echo(install(Path.cwd()).message)


@hook.command("uninstall")
def hook_uninstall() -> None:
    """Remove the pre-push hook, putting back the one it chained."""
    from pathlib import Path

    from agentrun.hook.install import uninstall

    click.echo(uninstall(Path.cwd()).message)


@hook.command("pre-push")
@click.argument("remote", required=False)
@click.argument("url", required=False)
@click.pass_context
def hook_pre_push(ctx: click.Context, remote: str | None, url: str | None) -> None:
    """Check a push: git runs this from the hook, with the pushed refs on stdin.

    Under pre-commit (no arguments) the refs come from its PRE_COMMIT_* variables.
    """
    from pathlib import Path

    from agentrun.hook.prepush import pre_push
    from agentrun.hook.push import read_push

    push = read_push(remote, url, sys.stdin, os.environ)
    result = pre_push(push, Path.cwd(), os.environ)
    for line in result.lines:
        click.echo(line, err=True)
    if result.refused:
        ctx.exit(EXIT_USER)
