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


@agent.command("remember")
@click.argument("text")
@click.option("--path", "paths", multiple=True, metavar="GLOB", help="A path the fact concerns.")
def agent_remember(text: str, paths: tuple[str, ...]) -> None:
    """Propose a fact for later builds (any phase; a person accepts it before prompts carry it)."""
    from pathlib import Path

    from agentrun.agent.verbs import agent_env, submit_fact

    env = agent_env(os.environ)
    click.echo(submit_fact(env, text, paths, Path.cwd(), os.environ))


@agent.command("select")
@click.argument("number", type=int)
def agent_select(number: int) -> None:
    """Choose candidate NUMBER (select phase: the passing candidates, numbered from 1)."""
    _report("select", str(number))


@agent.command("usage")
@click.option("--tokens-in", required=True, metavar="N", help="Input tokens at the full rate.")
@click.option("--tokens-out", required=True, metavar="N", help="Output tokens.")
@click.option("--cache-read", default="0", metavar="N", help="Input tokens read from a cache.")
@click.option("--cache-write", default="0", metavar="N", help="Input tokens written to a cache.")
@click.option("--cost", metavar="USD", help="What they cost (else priced at --model).")
@click.option("--model", metavar="NAME", help="The model they were spent on, to price them.")
def agent_usage(
    tokens_in: str,
    tokens_out: str,
    cache_read: str,
    cache_write: str,
    cost: str | None,
    model: str | None,
) -> None:
    """Report what a command agent spent; each call adds to its session's total."""
    from pathlib import Path

    from agentrun.agent.usage import parse_cost, parse_tokens, submit_usage
    from agentrun.agent.verbs import agent_env
    from agentrun.events import Usage

    usage = Usage(
        tokens_in=parse_tokens("--tokens-in", tokens_in),
        tokens_out=parse_tokens("--tokens-out", tokens_out),
        cache_read=parse_tokens("--cache-read", cache_read),
        cache_write=parse_tokens("--cache-write", cache_write),
        cost_usd=None if cost is None else parse_cost(cost),
    )
    env = agent_env(os.environ)
    click.echo(submit_usage(env, usage, model, Path.cwd(), os.environ))
