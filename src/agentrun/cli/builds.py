"""The build commands: ``run`` a goal (or the offline ``demo``), and read builds back
(``status``, ``log``, ``show``)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

import click

from agentrun.cli.options import (
    agents_run,
    current_repo,
    echo_json,
    json_option,
    runner_options,
    slug_argument,
)
from agentrun.errors import EXIT_USER, EXIT_WAITING, MalformedEventError, exit_for_state

if TYPE_CHECKING:
    import pygit2

    from agentrun.runner.loop import Outcome


@click.command()
@click.argument("goal")
@click.option(
    "--base",
    metavar="REF",
    envvar="AGENTRUN_BASE",
    show_envvar=True,
    help="Start from REF instead of the current branch's HEAD.",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    metavar="ROLE=RUNTIME",
    help="Route a role to a configured runtime for this build only.",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0, min_open=True),
    metavar="USD",
    envvar="AGENTRUN_MAX_COST",
    show_envvar=True,
    help="Park the build before it spends more than USD.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Let the build end with no change against its base (else it asks first).",
)
@runner_options
@agents_run
def run(
    goal: str,
    base: str | None,
    roles: tuple[str, ...],
    max_cost: float | None,
    allow_empty: bool,
    remote: str | None,
    time_limit: float | None,
) -> None:
    """Create a build for GOAL and run it until it completes or parks."""
    from pathlib import Path

    from agentrun.cli.output import log_path, outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.commands.build import create_build, deadline, parse_roles, run_build
    from agentrun.config import Config, check_role_overrides, load_config

    stop_at = deadline(time_limit)
    repo = current_repo()
    config = load_config(Path(repo.workdir)) if repo.workdir else Config()
    overrides = parse_roles(roles)
    check_role_overrides(overrides, config)
    with outliving_readers() as streams:
        created = create_build(
            repo, goal, base, overrides, config, max_cost, allow_empty=allow_empty
        )
        streams.spill_to(log_path(repo, created.slug))
        if created.picked:
            click.echo(f"no runtime is configured: using {created.picked}")
        click.echo(f"build {created.slug} from {created.base_ref} ({created.base_sha[:10]})")
        if created.dirty:
            click.echo(created.uncommitted_note())
        for line in created.unenforced:
            click.echo(f"agentrun: warning: {line}", err=True)
        with progress() as observer:
            outcome = run_build(repo, created.slug, observer, remote, stop_at)
        finish(outcome)


def finish(outcome: Outcome) -> NoReturn:
    """Say how the run ended, and exit with the code of the build's state."""
    from agentrun.commands.inspect import state_word
    from agentrun.runner.loop import BASE_UNPUSHED
    from agentrun.view.render import outcome_lines

    state = outcome.state
    if outcome.waiting == BASE_UNPUSHED:
        click.echo(outcome.said)  # nothing ran: a gate (the push of its base) waits
        raise click.exceptions.Exit(EXIT_WAITING)
    word = state_word(state, None)  # this command's runner has ended
    for line in outcome_lines(state, word):
        click.echo(line)
    if outcome.waiting == "time-limit":
        click.echo(f"stopped at the time limit; continue with: git agentrun resume {state.slug}")
    if word == "waiting":
        from agentrun.commands.doctor import DEFAULT_TOKEN, WORKFLOW_TOKEN

        if os.environ.get(DEFAULT_TOKEN) == "true":  # the Action's github-token is github.token
            click.echo(f"agentrun: warning: {WORKFLOW_TOKEN}", err=True)
    raise click.exceptions.Exit(exit_for_state(word))


@click.command()
@json_option
@click.option("--live-only", is_flag=True, help="Leave archived builds out.")
def status(as_json: bool, live_only: bool) -> None:
    """Every build and its tasks: state, phase, round, open escalation, proposal, age."""
    from agentrun.commands.status import listing as read_listing
    from agentrun.commands.status import status_text
    from agentrun.view.table import status_table, unreadable_line

    listing = read_listing(os.getcwd(), include_archived=not live_only)
    if as_json:
        click.echo(status_text(listing))
    elif listing.rows or not listing.unreadable:
        status_table(listing.rows)
    for slug, error in listing.unreadable:
        click.echo(unreadable_line(slug, error), err=True)
    if listing.unreadable:
        raise click.exceptions.Exit(EXIT_USER)


@click.command()
@slug_argument
@click.option("--json", "as_json", is_flag=True, help="The event envelopes with their commits.")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Go on showing new events until the build finishes (with --json: one per line).",
)
def log(slug: str, as_json: bool, follow: bool) -> None:
    """The timeline of SLUG: events, sessions, verdicts, checks."""
    from agentrun.commands.inspect import detail, event_json, log_json, timeline
    from agentrun.view.render import event_line, usage_lines

    repo = current_repo()
    if follow:
        import json

        from agentrun.commands.inspect import Follow
        from agentrun.commands.status import JSON_SCHEMA, STOPPED

        followed = Follow(repo, slug)
        for stored in followed:
            if as_json:
                record = {"schema": JSON_SCHEMA, "slug": slug, **event_json(stored)}
                click.echo(json.dumps(record, ensure_ascii=False))
            else:
                click.echo(event_line(stored))
            sys.stdout.flush()
        if followed.ended == STOPPED:
            click.echo(
                f"build {slug} is stopped: no runner holds it; "
                f"`git agentrun resume {slug}` continues it",
                err=True,
            )
        raise click.exceptions.Exit(exit_for_state(followed.ended))
    events = timeline(repo, slug)
    if as_json:
        echo_json(log_json(slug, events))
        return
    for stored in events:
        click.echo(event_line(stored))
    for line in usage_lines(detail(repo, slug)[0]):
        click.echo(line)


@click.command()
@slug_argument
@click.option("--transcript", "session", metavar="SESSION", help="Print a session's transcript.")
@click.option("--artifact", "name", metavar="NAME", help="Print an artifact (plan, report, …).")
def show(slug: str, session: str | None, name: str | None) -> None:
    """Details of SLUG, or one of its transcripts or artifacts."""
    from agentrun.commands.inspect import (
        artifact,
        detail,
        live_runner,
        state_word,
        task_runners,
        transcript,
    )
    from agentrun.view.render import detail_lines

    repo = current_repo()
    if session is not None:
        click.echo(transcript(repo, slug, session).decode("utf-8", "replace"), nl=False)
        return
    if name is not None:
        click.echo(artifact(repo, slug, name).decode("utf-8", "replace"), nl=False)
        return
    state, names, _ = detail(repo, slug)
    # As status says it: stopped when no runner holds the build or any of its tasks.
    runner = live_runner(repo, slug) or next(iter(task_runners(repo, state).values()), None)
    for line in detail_lines(state, names, state_word(state, runner)):
        click.echo(line)
    for line in proposed_lines(repo, slug):
        click.echo(line)


def proposed_lines(repo: pygit2.Repository, slug: str) -> list[str]:
    """The facts the build proposed that wait for a person (none when the memory is
    unreadable: ``memory list`` says why)."""
    from agentrun.store.memory import read

    try:
        facts = read(repo).facts.values()
    except MalformedEventError:
        return []
    return [
        f"fact:     {f.id} proposed ({f.phase}): {f.text} -- `git agentrun memory accept {f.id}`"
        for f in facts
        if f.build == slug and f.state == "proposed"
    ]


@click.command()
@click.option("--keep", is_flag=True, help="Keep the demo repository and print where it is.")
def demo(keep: bool) -> None:
    """Run a whole build offline with a scripted agent, in a temporary repository."""
    from agentrun.cli.output import outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.commands.demo import demo_build
    from agentrun.view.render import event_line

    with outliving_readers(), demo_build(keep) as built:
        click.echo(f"== timeline of {built.slug} ==")
        click.echo(event_line(built.created))
        with progress() as observer:
            report = built.run(observer)
        for line in report.lines:
            click.echo(line)
    raise click.exceptions.Exit(exit_for_state(report.state))


COMMANDS = (run, demo, status, log, show)
