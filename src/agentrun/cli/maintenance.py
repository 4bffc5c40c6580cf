"""The maintenance commands: ``init`` and ``doctor`` to set up, ``sync`` and ``sweep`` to
keep builds moving between machines, ``gc`` to tidy what archived builds left."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agentrun.cli.options import (
    agents_run,
    current_repo,
    echo_json,
    json_option,
    remote_option,
    time_limit_option,
)
from agentrun.errors import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_NOT_NOW,
    EXIT_USER,
    EXIT_WAITING,
    exit_for_state,
)

if TYPE_CHECKING:
    from agentrun.commands.sweep import SweepReport


@click.command()
@click.option("--force", is_flag=True, help="Overwrite an existing .agentrun.toml.")
def init(force: bool) -> None:
    """Write a commented .agentrun.toml at the repository root."""
    from pathlib import Path

    from agentrun.commands.init import init as write

    repo = current_repo()
    path = write(Path(repo.workdir), force)
    click.echo(f'wrote {path}: configure a runtime in it, then `git agentrun run "GOAL"`')


@click.command()
def doctor() -> None:
    """Which runtimes can run here, the isolation level in force and the forge; exits 1
    when the default role cannot run, the isolation asked for is impossible or the forge
    asked for is not installed."""
    from agentrun.commands.doctor import doctor as diagnose
    from agentrun.view.render import doctor_lines

    found = diagnose(current_repo())
    for line in doctor_lines(found):
        click.echo(line)
    if not (found.default_ok and found.isolation_ok and found.forge_ok):
        raise click.exceptions.Exit(EXIT_USER)


@click.command()
@click.argument("remote", default="origin")
def sync(remote: str) -> None:
    """Fetch and push build logs, notes and build branches with REMOTE (origin)."""
    from agentrun.commands.sync import sync_with

    for line in sync_with(current_repo(), remote):
        click.echo(line)


@click.command()
@remote_option("Fetch from REMOTE first and run the builds there (default: [sync] remote).")
@time_limit_option("Stop after MINUTES; what is left waits for the next sweep.")
@json_option
@agents_run
def sweep(remote: str | None, time_limit: float | None, as_json: bool) -> None:
    """Resume builds that were answered or whose runner died; report the rest."""
    from agentrun.cli.output import outliving_readers
    from agentrun.commands.build import deadline
    from agentrun.commands.sweep import sweep as sweep_builds
    from agentrun.view.table import unreadable_line

    stop_at = deadline(time_limit)
    repo = current_repo()
    with outliving_readers():  # several builds, no one log: what a closed reader misses is lost
        swept = sweep_builds(repo, remote, stop_at=stop_at)
        if as_json:
            echo_json(swept.as_json())
        else:
            for item in swept.builds:
                click.echo(item.line())
            if not swept.builds and not swept.unreadable:
                click.echo("no open builds")
            for slug, error in swept.unreadable:
                click.echo(unreadable_line(slug, error), err=True)
        raise click.exceptions.Exit(_sweep_exit(swept))


def _sweep_exit(swept: SweepReport) -> int:
    """6 when a resumed build failed, 1 for an unreadable log, 7 when the time limit left
    work, 4 when a build waits for its forge's CI; parked and paused builds wait for a
    person, which is no failure of the sweep."""
    resumed = {exit_for_state(item.state) for item in swept.builds if item.action == "resumed"}
    if EXIT_FAILED in resumed:
        return EXIT_FAILED
    if swept.unreadable:
        return EXIT_USER
    if any(exit_for_state(item.state) == EXIT_NOT_NOW for item in swept.builds):
        return EXIT_NOT_NOW
    if any(item.state == "waiting" for item in swept.builds):
        return EXIT_WAITING  # the forge's CI gate: the next sweep or CI trigger goes on
    return EXIT_DONE


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def gc(dry_run: bool) -> None:
    """Remove the worktrees, branches and stale refs of archived builds; pack refs."""
    from agentrun.commands.gc import gc as tidy

    for line in tidy(current_repo(), dry_run).lines:
        click.echo(line)


COMMANDS = (init, doctor, sync, sweep, gc)
