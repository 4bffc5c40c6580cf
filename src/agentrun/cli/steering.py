"""The steering commands, a person's requests to a build: ``answer``, ``approve``, ``pause``,
``resume``, ``abort``, ``retry`` and ``reconcile`` (the verbs a forge comment may carry
too)."""

from __future__ import annotations

from typing import Any, NoReturn

import click

from agentrun.cli.builds import finish
from agentrun.cli.options import agents_run, current_repo, runner_options, slug_argument
from agentrun.errors import EXIT_NOT_NOW, exit_for_state


@click.command()
@slug_argument
@click.argument("text")
@click.option(
    "--escalation", "escalation", metavar="ID", help="Which escalation (when several are open)."
)
def answer(slug: str, text: str, escalation: str | None) -> None:
    """Answer the open escalation of SLUG; `resume` then continues the build."""
    from agentrun.commands.control import answer as record

    esc_id, _ = record(current_repo(), slug, text, escalation)
    click.echo(f"answered {esc_id}; run `git agentrun resume {slug}` to continue the build")


@click.command()
@slug_argument
def approve(slug: str) -> None:
    """Approve the plan SLUG waits on ([policy] plan_approval = "human"); `resume` then
    implements it. To send it back instead: `answer SLUG "what to change"`."""
    from agentrun.commands.control import approve as record

    esc_id, _ = record(current_repo(), slug)
    click.echo(f"plan approved ({esc_id}); run `git agentrun resume {slug}` to continue the build")


@click.command()
@slug_argument
def pause(slug: str) -> None:
    """Ask SLUG to pause at its next safe step."""
    from agentrun.commands.control import pause as request

    click.echo(request(current_repo(), slug).message)


@click.command()
@slug_argument
@runner_options
@agents_run
def resume(slug: str, remote: str | None, time_limit: float | None) -> None:
    """Un-pause SLUG if paused and run it on from its log (also after a crash)."""
    from agentrun.cli.output import log_path, outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.commands.build import deadline, resume_build
    from agentrun.errors import LeaseHeldError
    from agentrun.kernel.state import BuildState
    from agentrun.store.log import check_slug

    stop_at = deadline(time_limit)
    repo = current_repo()
    check_slug(slug)
    with outliving_readers() as streams:
        streams.spill_to(log_path(repo, slug))
        try:
            with progress() as observer:
                result = resume_build(repo, slug, observer, remote, stop_at)
        except LeaseHeldError as exc:
            _held(repo, slug, exc)
        if isinstance(result, BuildState):
            click.echo(f"build {slug} is {result.status}; nothing to resume")
            raise click.exceptions.Exit(exit_for_state(result.status))
        finish(result)


def _held(repo: Any, slug: str, exc: Exception) -> NoReturn:
    """Another runner holds the build: not now (exit 7); it acts on what was requested."""
    from agentrun.commands.inspect import detail

    click.echo(str(exc))
    if detail(repo, slug)[0].resume_requested:
        click.echo(f"resume requested: the runner of {slug} acts on it at its next safe step")
    raise click.exceptions.Exit(EXIT_NOT_NOW)


@click.command()
@slug_argument
def abort(slug: str) -> None:
    """Abort SLUG; a running session is cancelled."""
    from agentrun.commands.control import abort as request

    click.echo(request(current_repo(), slug).message)


@click.command()
@slug_argument
@agents_run
def retry(slug: str) -> None:
    """Let SLUG try again: a failed build re-opens, spent attempts re-arm."""
    from agentrun.commands.control import retry as request

    request(current_repo(), slug)
    click.echo(f"retry recorded; run `git agentrun resume {slug}` to continue the build")


@click.command()
@slug_argument
@runner_options
def reconcile(slug: str, remote: str | None, time_limit: float | None) -> None:
    """Merge SLUG's moved base into its open proposal, then verify and mark it ready again."""
    from agentrun.cli.progress import progress
    from agentrun.commands.build import deadline
    from agentrun.commands.reconcile import reconcile_build

    stop_at = deadline(time_limit)
    repo = current_repo()
    with progress() as observer:
        requested, outcome = reconcile_build(repo, slug, observer, remote, stop_at)
    click.echo(f"build {slug}: reconcile requested, merging the base at {requested.base[:10]}")
    if requested.note:
        click.echo(f"note: {requested.note}")
    finish(outcome)


COMMANDS = (answer, approve, pause, resume, abort, retry, reconcile)
