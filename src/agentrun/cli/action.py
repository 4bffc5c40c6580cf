"""``git agentrun action``: a CI job's entry point (the GitHub Action, GitLab CI), one event
at a time."""

from __future__ import annotations

import importlib
import os

import click

from agentrun.cli.options import agents_run, time_limit_option

# Under the name main.py gave it, so the body below reads as it did there.
from agentrun.cli.options import current_repo as _repo
from agentrun.errors import EXIT_DONE, EXIT_FAILED

# Each forge's adapter: its OUTPUT variable, its EVENT (from_env, kind, payload, site),
# the HANDLERS of each kind of event, and FAN_OUT: whether its CI can run a build's ready
# tasks as jobs of their own (a matrix made from the `tasks` output).
ADAPTERS = {"github": "agentrun.hosted.github_action", "gitlab": "agentrun.hosted.gitlab_action"}


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
@click.option(
    "--forge",
    "forge_kind",
    type=click.Choice(sorted(ADAPTERS)),
    envvar="AGENTRUN_FORGE",
    show_envvar=True,
    help="The forge whose CI runs this job (default: gitlab when GITLAB_CI=true, else github).",
)
@agents_run
def action(
    config_path: str, time_limit: float | None, label: str, remote: str, forge_kind: str | None
) -> None:
    """Act on the event of this CI job: on GitHub Actions, GITHUB_EVENT_NAME and
    GITHUB_EVENT_PATH; on GitLab CI, the webhook body in TRIGGER_PAYLOAD, or a sweep for a
    scheduled pipeline.

    Writes slug, pr-url and state to $GITHUB_OUTPUT (GitLab: the dotenv file
    $AGENTRUN_OUTPUT) when it is set, on an error too. On GitHub a build stops where
    tasks of its task graph are ready, and the output tasks lists them as JSON ([] when
    none wait) for a matrix job to run each with `git agentrun task`. With
    GITHUB_ACTIONS=true, output lines the runner would take for workflow commands are
    escaped, and the job ends with a summary in $GITHUB_STEP_SUMMARY, ::notice:: with the
    pull request and ::error:: with the reason when the step fails.
    """
    from agentrun.cli.output import outliving_readers
    from agentrun.cli.progress import progress
    from agentrun.commands.build import deadline
    from agentrun.forge.base import require_forge
    from agentrun.hosted.action_log import job_log
    from agentrun.hosted.job import HostedJob, act
    from agentrun.hosted.result import outputs_written

    kind = forge_kind or ("gitlab" if os.environ.get("GITLAB_CI") == "true" else "github")
    adapter = importlib.import_module(ADAPTERS[kind])
    stop_at = deadline(time_limit)
    outputs = outputs_written(os.environ.get(adapter.OUTPUT))
    with outliving_readers(), outputs as result, job_log(os.environ, result):
        event = adapter.EVENT.from_env(os.environ)  # outside a CI job: says so first
        require_forge(kind)  # before any step, so the job fails in one line
        with progress() as observer:
            job = HostedJob(
                _repo(),
                event.site(),
                config_path,
                remote,
                stop_at,
                label or None,
                result,
                fan_out=adapter.FAN_OUT,
            )
            job.observer = observer
            act(job, event.kind, event.payload, adapter.HANDLERS)
        for line in result.lines:
            click.echo(line)
        raise click.exceptions.Exit(_action_exit(result.state))


def _action_exit(state: str) -> int:
    """A job fails only when its build failed: a parked, paused, stopped or held build waits
    for a person or the next event (the `state` output says which), and an abort was
    someone's choice. Errors keep their codes (1, 2, 3)."""
    return EXIT_FAILED if state == "failed" else EXIT_DONE
