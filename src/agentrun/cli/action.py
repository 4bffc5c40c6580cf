"""``git agentrun action``: the GitHub Action's entry point, one job's event at a time."""

from __future__ import annotations

import os

import click

from agentrun.cli.options import agents_run, time_limit_option

# Under the name main.py gave it, so the body below reads as it did there.
from agentrun.cli.options import current_repo as _repo
from agentrun.errors import EXIT_DONE, EXIT_FAILED


@click.command()
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
@time_limit_option("Stop at a phase boundary (or cut the phase short) after MINUTES; resumable.")
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
@agents_run
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
