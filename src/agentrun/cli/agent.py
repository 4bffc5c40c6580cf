"""``git agentrun agent …``: the verbs an agent reports back with, inside a session."""

from __future__ import annotations

import os

import click


@click.group()
def agent() -> None:
    """The verbs agents use to report back (inside a session)."""


def _report(verb: str, text: str = "", findings: tuple[str, ...] = ()) -> None:
    from pathlib import Path

    from agentrun.agent.verbs import agent_env, submit
    from agentrun.kernel.verbs import VerbReport

    env = agent_env(os.environ)
    click.echo(submit(env, VerbReport(verb, text, findings), Path.cwd(), os.environ))


@agent.command("context")
def agent_context() -> None:
    """Write what this session needs to .agentrun/run/context.md and print its path."""
    from pathlib import Path

    from agentrun.agent.context import write_context
    from agentrun.agent.verbs import agent_env, log_repository, worktree_of

    env = agent_env(os.environ)
    repo = log_repository(Path.cwd(), os.environ)
    click.echo(write_context(repo, env, worktree_of(Path.cwd())))


@agent.command("plan")
@click.argument("file", type=click.Path(dir_okay=False))  # a str: pathlib loads at the call
def agent_plan(file: str) -> None:
    """Submit the plan in FILE (plan phase)."""
    from pathlib import Path

    from agentrun.errors import VerbError

    try:
        text = Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        raise VerbError(f"cannot read the plan {file}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise VerbError(f"the plan {file} is not UTF-8 text (byte {exc.start})") from None
    _report("plan", text)


@agent.command("approve")
def agent_approve() -> None:
    """Approve (plan-review, code-review)."""
    _report("approve")


@agent.command("revise")
@click.option("--finding", "findings", multiple=True, required=True, help="What to change.")
def agent_revise(findings: tuple[str, ...]) -> None:
    """Ask for a revision (plan-review, code-review)."""
    _report("revise", findings=findings)


@agent.command("pass")
def agent_pass() -> None:
    """An agent verify step passes."""
    _report("pass")


@agent.command("fail")
@click.option("--reason", required=True, help="What is wrong.")
def agent_fail(reason: str) -> None:
    """An agent verify step fails."""
    _report("fail", reason)


@agent.command("done")
@click.option("--summary", default="", help="One line saying what changed.")
def agent_done(summary: str) -> None:
    """Finish an implement, reconcile or finalize phase."""
    _report("done", summary)


@agent.command("escalate")
@click.argument("question")
def agent_escalate(question: str) -> None:
    """Ask a human; the build parks until it is answered."""
    _report("escalate", question)


@agent.command("select")
@click.argument("number", type=int)
def agent_select(number: int) -> None:
    """Choose candidate NUMBER (select phase: the passing candidates, numbered from 1)."""
    _report("select", str(number))
