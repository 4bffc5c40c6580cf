"""``git agentrun task SLUG ID``: run one task of a build's task graph.

The build's runner starts one per ready task; a CI matrix job runs one per task the
``action`` job listed. A task another job holds exits 7 at once.
"""

from __future__ import annotations

import click

from agentrun.cli.options import agents_run, current_repo, runner_options, slug_argument
from agentrun.errors import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_NOT_NOW,
    EXIT_PAUSED,
    EXIT_WAITING,
    exit_for_state,
)

# What a task's runner stopping on a wait means for the job that ran it.
_WAIT_EXITS = {
    "complete": EXIT_DONE,
    "parked": EXIT_WAITING,
    "tasks": EXIT_WAITING,  # its dependencies have not landed yet
    "paused": EXIT_PAUSED,
    "aborted": EXIT_FAILED,
    "budget": EXIT_NOT_NOW,  # it waits for the sessions of other tasks to end
}


@click.command()
@slug_argument
@click.argument("task_id", metavar="ID")
@click.option("--quiet", is_flag=True, help="Show nothing but the outcome line.")
@runner_options
@agents_run
def task(
    slug: str, task_id: str, quiet: bool, remote: str | None, time_limit: float | None
) -> None:
    """Run task ID of SLUG's task graph until it passes (its verify steps green), parks
    or the build stops; the build's runner lands it. Exit 7: another runner has it."""
    from contextlib import nullcontext

    from agentrun.cli.progress import progress
    from agentrun.commands.build import deadline, run_task
    from agentrun.errors import LeaseHeldError
    from agentrun.kernel.tasks import describe
    from agentrun.runner.build import Observer, Silent
    from agentrun.store.log import check_slug

    stop_at = deadline(time_limit)
    repo = current_repo()
    check_slug(slug)
    watching = nullcontext(Silent()) if quiet else progress()
    try:
        with watching as observer:
            seen: Observer = observer
            outcome = run_task(repo, slug, task_id, seen, remote, stop_at)
    except LeaseHeldError as exc:
        click.echo(str(exc))
        raise click.exceptions.Exit(EXIT_NOT_NOW) from None
    state = outcome.state
    click.echo(describe(state, task_id))
    if outcome.waiting == "time-limit":
        click.echo(f"stopped at the time limit; continue with: git agentrun task {slug} {task_id}")
        raise click.exceptions.Exit(EXIT_NOT_NOW)
    if outcome.waiting in _WAIT_EXITS:
        raise click.exceptions.Exit(_WAIT_EXITS[outcome.waiting])
    raise click.exceptions.Exit(exit_for_state(state.state_name))


COMMANDS = (task,)
