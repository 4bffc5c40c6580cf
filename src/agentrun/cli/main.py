"""``git agentrun``: parse, call one core function, render. Heavy imports stay inside.

The exit codes (errors.py, and the README's table) are chosen here and nowhere else.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click

from agentrun import __version__
from agentrun.cli.agent import agent
from agentrun.cli.help import COMPLETE_VAR, completion, help_command
from agentrun.cli.hook import hook
from agentrun.errors import (
    EXIT_BUG,
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_INTERRUPT,
    EXIT_NOT_NOW,
    EXIT_USER,
    exit_for_state,
)

if TYPE_CHECKING:
    from agentrun.commands.sweep import SweepReport
    from agentrun.runner.loop import Outcome


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
    stamp = f"{datetime.now(UTC):%Y%m%d-%H%M%S}"
    fd, name = tempfile.mkstemp(prefix=f"agentrun-crash-{stamp}-", suffix=".txt", dir=_crash_dir())
    os.close(fd)
    return Path(name)


def _crash_dir() -> Path:
    """Where a bug's trace goes: the temp folder, or, inside an agent's session, its scratch
    folder (a sandbox may make the temp folder the worktree, and a trace must not be
    committed with the agent's work)."""
    scratch = Path(".agentrun") / "run"
    if os.environ.get("AGENTRUN_SESSION") and scratch.is_dir():
        return scratch
    return Path(tempfile.gettempdir())


def _repo() -> Any:
    from agentrun.gitrepo import open_repo

    return open_repo(Path.cwd())


def _build_slug(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A SLUG argument: an exact slug, or a prefix only one build's slug has."""
    from agentrun.commands.slugs import resolve_slug

    return resolve_slug(_repo(), value)


def _echo_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@click.group(cls=AgentrunGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "--version", prog_name="agentrun", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Turn a goal into a reviewed, verified draft proposal, with all state in git."""


@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing .agentrun.toml.")
def init(force: bool) -> None:
    """Write a commented .agentrun.toml at the repository root."""
    from agentrun.commands.init import init as write

    repo = _repo()
    path = write(Path(repo.workdir), force)
    click.echo(f'wrote {path}: configure a runtime in it, then `git agentrun run "GOAL"`')


F = TypeVar("F", bound=Callable[..., Any])


def _time_limit(help_text: str) -> Callable[[F], F]:
    """``--time-limit MINUTES`` (a CI job's budget), with the command's own help."""
    return click.option(
        "--time-limit",
        type=click.FloatRange(min=0, min_open=True),
        metavar="MINUTES",
        envvar="AGENTRUN_TIME_LIMIT",
        show_envvar=True,
        help=help_text,
    )


def _agents_run(command: F) -> F:
    """A command that runs agents: a credential a CI job persisted in the repository is
    taken out before any agent starts and put back at exit (``credentials.withdrawn``)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from agentrun.credentials import withdrawn
        from agentrun.gitrepo import common_dir

        with withdrawn(common_dir(_repo()), lambda line: click.echo(line, err=True)):
            return command(*args, **kwargs)

    return cast(F, wrapper)


def _runner_options(command: F) -> F:
    """``--remote`` and ``--time-limit``, shared by ``run`` and ``resume``."""
    command = _time_limit("Stop after MINUTES as Ctrl-C would; the build stays resumable.")(command)
    return click.option(
        "--remote",
        metavar="REMOTE",
        envvar="AGENTRUN_REMOTE",
        show_envvar=True,
        help="Claim the build on REMOTE and push it there at every phase boundary "
        "(default: [sync] remote).",
    )(command)


@cli.command()
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
@_runner_options
@_agents_run
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
    from agentrun.cli.output import log_path, outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.commands.build import create_build, deadline, parse_roles, run_build
    from agentrun.config import Config, check_role_overrides, load_config

    stop_at = deadline(time_limit)
    repo = _repo()
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
        with progress() as observer:
            outcome = run_build(repo, created.slug, observer, remote, stop_at)
        _finish(outcome)


def _finish(outcome: Outcome) -> NoReturn:
    """Say how the run ended, and exit with the code of the build's state."""
    from agentrun.cli.render import outcome_lines
    from agentrun.commands.inspect import state_word

    state = outcome.state
    word = state_word(state, None)  # this command's runner has ended
    for line in outcome_lines(state, word):
        click.echo(line)
    if outcome.waiting == "time-limit":
        click.echo(f"stopped at the time limit; continue with: git agentrun resume {state.slug}")
    raise click.exceptions.Exit(exit_for_state(word))


@cli.command()
def doctor() -> None:
    """Which runtimes can run here, the isolation level in force and the forge; exits 1
    when the default role cannot run, the isolation asked for is impossible or the forge
    asked for is not installed."""
    from agentrun.cli.render import doctor_lines
    from agentrun.commands.doctor import doctor as diagnose

    found = diagnose(_repo())
    for line in doctor_lines(found):
        click.echo(line)
    if not (found.default_ok and found.isolation_ok and found.forge_ok):
        raise click.exceptions.Exit(EXIT_USER)


@cli.command()
@click.argument("slug", callback=_build_slug)
@_runner_options
@_agents_run
def resume(slug: str, remote: str | None, time_limit: float | None) -> None:
    """Un-pause SLUG if paused and run it on from its log (also after a crash)."""
    from agentrun.cli.output import log_path, outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.commands.build import deadline, resume_build
    from agentrun.errors import LeaseHeldError
    from agentrun.kernel.state import BuildState
    from agentrun.store.log import check_slug

    stop_at = deadline(time_limit)
    repo = _repo()
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
        _finish(result)


def _held(repo: Any, slug: str, exc: Exception) -> NoReturn:
    """Another runner holds the build: not now (exit 7); it acts on what was requested."""
    from agentrun.commands.inspect import detail

    click.echo(str(exc))
    if detail(repo, slug)[0].resume_requested:
        click.echo(f"resume requested: the runner of {slug} acts on it at its next safe step")
    raise click.exceptions.Exit(EXIT_NOT_NOW)


@cli.command()
@click.argument("slug", callback=_build_slug)
@_runner_options
def reconcile(slug: str, remote: str | None, time_limit: float | None) -> None:
    """Merge SLUG's moved base into its open proposal, then verify and mark it ready again."""
    from agentrun.cli.progress import progress
    from agentrun.commands.build import deadline
    from agentrun.commands.reconcile import reconcile_build

    stop_at = deadline(time_limit)
    repo = _repo()
    with progress() as observer:
        requested, outcome = reconcile_build(repo, slug, observer, remote, stop_at)
    click.echo(f"build {slug}: reconcile requested, merging the base at {requested.base[:10]}")
    if requested.note:
        click.echo(f"note: {requested.note}")
    _finish(outcome)


@cli.command()
@click.argument("remote", default="origin")
def sync(remote: str) -> None:
    """Fetch and push build logs, notes and build branches with REMOTE (origin)."""
    from agentrun.commands.sync import sync_with

    for line in sync_with(_repo(), remote):
        click.echo(line)


@cli.command()
@click.option(
    "--remote",
    metavar="REMOTE",
    envvar="AGENTRUN_REMOTE",
    show_envvar=True,
    help="Fetch from REMOTE first and run the builds there (default: [sync] remote).",
)
@_time_limit("Stop after MINUTES; what is left waits for the next sweep.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@_agents_run
def sweep(remote: str | None, time_limit: float | None, as_json: bool) -> None:
    """Resume builds that were answered or whose runner died; report the rest."""
    from agentrun.cli.output import outliving_readers
    from agentrun.cli.render import unreadable_line
    from agentrun.commands.build import deadline
    from agentrun.commands.sweep import sweep as sweep_builds

    stop_at = deadline(time_limit)
    repo = _repo()
    with outliving_readers():  # several builds, no one log: what a closed reader misses is lost
        swept = sweep_builds(repo, remote, stop_at=stop_at)
        if as_json:
            _echo_json(swept.as_json())
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
    work; parked and paused builds wait for a person, which is no failure of the sweep."""
    resumed = {exit_for_state(item.state) for item in swept.builds if item.action == "resumed"}
    if EXIT_FAILED in resumed:
        return EXIT_FAILED
    if swept.unreadable:
        return EXIT_USER
    if any(exit_for_state(item.state) == EXIT_NOT_NOW for item in swept.builds):
        return EXIT_NOT_NOW
    return EXIT_DONE


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (schema 1).")
@click.option("--live-only", is_flag=True, help="Leave archived builds out.")
def status(as_json: bool, live_only: bool) -> None:
    """Every build: state, phase, round, open escalation, proposal, age."""
    from agentrun.cli.render import status_table, unreadable_line
    from agentrun.commands.inspect import rows, status_json

    listing = rows(_repo(), include_archived=not live_only)
    if as_json:
        _echo_json(status_json(listing))
    elif listing.rows or not listing.unreadable:
        status_table(listing.rows)
    for slug, error in listing.unreadable:
        click.echo(unreadable_line(slug, error), err=True)
    if listing.unreadable:
        raise click.exceptions.Exit(EXIT_USER)


@cli.command()
@click.argument("slug", callback=_build_slug)
@click.option("--json", "as_json", is_flag=True, help="The event envelopes with their commits.")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Go on showing new events until the build finishes (with --json: one per line).",
)
def log(slug: str, as_json: bool, follow: bool) -> None:
    """The timeline of SLUG: events, sessions, verdicts, checks."""
    from agentrun.cli.render import event_line, usage_lines
    from agentrun.commands.inspect import detail, event_json, log_json, timeline

    repo = _repo()
    if follow:
        from agentrun.commands.inspect import JSON_SCHEMA, STOPPED, Follow

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
        _echo_json(log_json(slug, events))
        return
    for stored in events:
        click.echo(event_line(stored))
    for line in usage_lines(detail(repo, slug)[0]):
        click.echo(line)


@cli.command()
@click.argument("slug", callback=_build_slug)
@click.option("--transcript", "session", metavar="SESSION", help="Print a session's transcript.")
@click.option("--artifact", "name", metavar="NAME", help="Print an artifact (plan, report, …).")
def show(slug: str, session: str | None, name: str | None) -> None:
    """Details of SLUG, or one of its transcripts or artifacts."""
    from agentrun.cli.render import detail_lines
    from agentrun.commands.inspect import artifact, detail, transcript

    repo = _repo()
    if session is not None:
        click.echo(transcript(repo, slug, session).decode("utf-8", "replace"), nl=False)
        return
    if name is not None:
        click.echo(artifact(repo, slug, name).decode("utf-8", "replace"), nl=False)
        return
    state, names, _ = detail(repo, slug)
    for line in detail_lines(state, names):
        click.echo(line)


@cli.command()
@click.argument("slug", callback=_build_slug)
@click.argument("text")
@click.option(
    "--escalation", "escalation", metavar="ID", help="Which escalation (when several are open)."
)
def answer(slug: str, text: str, escalation: str | None) -> None:
    """Answer the open escalation of SLUG; `resume` then continues the build."""
    from agentrun.commands.control import answer as record

    esc_id, _ = record(_repo(), slug, text, escalation)
    click.echo(f"answered {esc_id}; run `git agentrun resume {slug}` to continue the build")


@cli.command()
@click.argument("slug", callback=_build_slug)
def pause(slug: str) -> None:
    """Ask SLUG to pause at its next safe step."""
    from agentrun.commands.control import pause as request

    click.echo(request(_repo(), slug).message)


@cli.command()
@click.argument("slug", callback=_build_slug)
def abort(slug: str) -> None:
    """Abort SLUG; a running session is cancelled."""
    from agentrun.commands.control import abort as request

    click.echo(request(_repo(), slug).message)


@cli.command()
@click.argument("slug", callback=_build_slug)
@_agents_run
def retry(slug: str) -> None:
    """Let SLUG try again: a failed build re-opens, spent attempts re-arm."""
    from agentrun.commands.control import retry as request

    request(_repo(), slug)
    click.echo(f"retry recorded; run `git agentrun resume {slug}` to continue the build")


@cli.command()
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def gc(dry_run: bool) -> None:
    """Remove the worktrees, branches and stale refs of archived builds; pack refs."""
    from agentrun.commands.gc import gc as tidy

    for line in tidy(_repo(), dry_run).lines:
        click.echo(line)


@cli.group(invoke_without_command=True)
@click.pass_context
def pulls(ctx: click.Context) -> None:
    """The local forge's proposals (refs/agentrun/pulls/N)."""
    if ctx.invoked_subcommand is None:
        from agentrun.cli.render import pulls_table
        from agentrun.commands.pulls import list_pulls

        pulls_table(list_pulls(_repo()))


@pulls.command("show")
@click.argument("number", type=int)
@click.option("--diff", "as_diff", is_flag=True, help="The change against its base, as a diff.")
@click.option("--stat", is_flag=True, help="The change against its base, file by file.")
def pulls_show(number: int, as_diff: bool, stat: bool) -> None:
    """A proposal: title, state, body, comments and commits (or its --diff, --stat)."""
    from agentrun.cli.render import proposal_lines
    from agentrun.commands.pulls import diff_pull, show_pull

    repo = _repo()
    if as_diff or stat:
        if stat:
            click.echo(diff_pull(repo, number, stat=True), nl=False)
        if as_diff:
            click.echo(diff_pull(repo, number), nl=False)
        return
    info, commits = show_pull(repo, number)
    for line in proposal_lines(info, commits):
        click.echo(line)


@pulls.command("checkout")
@click.argument("number", type=int)
def pulls_checkout(number: int) -> None:
    """Check out a branch pulls/NUMBER at the proposal's head in your working tree."""
    from agentrun.commands.pulls import checkout_pull

    click.echo(f"switched to {checkout_pull(_repo(), number)}")


@pulls.command("merge")
@click.argument("number", type=int)
@click.option("--force", is_flag=True, help="Merge a draft whose build has not passed yet.")
@click.option(
    "--no-squash",
    "keep_commits",
    is_flag=True,
    help="Keep the build's commits (fast-forward or a merge commit) instead of one commit.",
)
def pulls_merge(number: int, force: bool, keep_commits: bool) -> None:
    """Merge a proposal into its base branch as one commit, and archive its build."""
    from agentrun.commands.pulls import merge_pull

    sha = merge_pull(_repo(), number, force, squash=not keep_commits)
    click.echo(f"merged #{number}; base is now at {sha[:10]}")


@pulls.command("close")
@click.argument("number", type=int)
def pulls_close(number: int) -> None:
    """Close a proposal without merging, and archive its build."""
    from agentrun.commands.pulls import close_pull

    close_pull(_repo(), number)
    click.echo(f"closed #{number}")


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the demo repository and print where it is.")
def demo(keep: bool) -> None:
    """Run a whole build offline with a scripted agent, in a temporary repository."""
    from agentrun.cli.output import outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.cli.render import event_line
    from agentrun.commands.demo import demo_build

    with outliving_readers(), demo_build(keep) as built:
        click.echo(f"== timeline of {built.slug} ==")
        click.echo(event_line(built.created))
        with progress() as observer:
            report = built.run(observer)
        for line in report.lines:
            click.echo(line)
    raise click.exceptions.Exit(exit_for_state(report.state))


@cli.command()
@click.option(
    "--config",
    "config_path",
    default=".agentrun.toml",
    show_default=True,
    metavar="PATH",
    envvar="AGENTRUN_CONFIG",
    show_envvar=True,
    help="The config file, read from the base branch's commit (never the working tree).",
)
@_time_limit("Stop at a phase boundary (or cut the phase short) after MINUTES; resumable.")
@click.option(
    "--label",
    default="",
    metavar="NAME",
    envvar="AGENTRUN_LABEL",
    show_envvar=True,
    help="The issue label that starts a build (default: [forge] label of the config).",
)
@click.option(
    "--remote", default="origin", show_default=True, help="Where build logs and leases live."
)
@_agents_run
def action(config_path: str, time_limit: float | None, label: str, remote: str) -> None:
    """Act on the GitHub Actions event of this job (GITHUB_EVENT_NAME, GITHUB_EVENT_PATH).

    Writes slug, pr-url and state to $GITHUB_OUTPUT when it is set, on an error too.
    With GITHUB_ACTIONS=true, output lines the runner would take for workflow commands
    are escaped, and the job ends with a summary in $GITHUB_STEP_SUMMARY, ::notice:: with
    the pull request and ::error:: with the reason when the step fails.
    """
    from agentrun.cli.output import outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.commands.action import FORGE, GitHubEvent, outputs_written
    from agentrun.commands.action import action as act
    from agentrun.commands.action_log import job_log
    from agentrun.commands.build import deadline
    from agentrun.forge.base import require_forge
    from agentrun.hosted.job import HostedJob

    stop_at = deadline(time_limit)
    with outliving_readers(), outputs_written(os.environ) as result, job_log(os.environ, result):
        require_forge(FORGE)  # before any step, so the job fails in one line
        event = GitHubEvent.from_env(os.environ)
        with progress() as observer:
            job = HostedJob(
                _repo(), event.site(), config_path, remote, stop_at, label or None, result
            )
            job.observer = observer
            act(job, event)
        for line in result.lines:
            click.echo(line)
        raise click.exceptions.Exit(_action_exit(result.state))


def _action_exit(state: str) -> int:
    """A job fails only when its build failed: a parked, paused, stopped or held build waits
    for a person or the next event (the `state` output says which), and an abort was
    someone's choice. Errors keep their codes (1, 2, 3)."""
    return EXIT_FAILED if state == "failed" else EXIT_DONE


cli.add_command(agent)
cli.add_command(hook)
cli.add_command(help_command)
cli.add_command(completion)


def main() -> None:
    cli.main(prog_name="git agentrun", complete_var=COMPLETE_VAR)


if __name__ == "__main__":
    main()
    sys.exit(0)
