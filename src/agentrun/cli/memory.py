"""``git agentrun memory …``: the facts later builds' prompts carry (refs/agentrun/memory)."""

from __future__ import annotations

import click

from agentrun.cli.options import current_repo, echo_json


@click.group(invoke_without_command=True)
@click.pass_context
def memory(ctx: click.Context) -> None:
    """Facts across builds: list, show, add, accept, forget (refs/agentrun/memory)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(memory_list, as_json=False)


@memory.command("list")
@click.option("--json", "as_json", is_flag=True, help='Machine-readable, with "schema": 1.')
def memory_list(as_json: bool) -> None:
    """Every fact: id, state, source and text (forgotten ones too)."""
    from agentrun.kernel.memory import as_json as fact_json
    from agentrun.store.facts import facts

    found = list(facts(current_repo()).values())
    if as_json:
        echo_json({"schema": 1, "facts": [fact_json(f) for f in found]})
        return
    if not found:
        click.echo('no facts yet; `git agentrun memory add "TEXT"` adds one')
        return
    for fact in found:
        text = " ".join(fact.text.split())
        text = text if len(text) <= 80 else text[:77] + "..."
        click.echo(f"{fact.id:<6} {fact.state:<9} {fact.source}: {text}")


@memory.command("show")
@click.argument("fact_id", metavar="ID")
def memory_show(fact_id: str) -> None:
    """One fact in full."""
    from agentrun.kernel.memory import find
    from agentrun.store.facts import facts

    fact = find(facts(current_repo()), fact_id)
    click.echo(f"{fact.id} ({fact.state})")
    click.echo(f"source: {fact.source}")
    click.echo(f"added: {fact.added_at:%Y-%m-%d %H:%M} UTC")
    if fact.paths:
        click.echo(f"paths: {', '.join(fact.paths)}")
    if fact.state == "forgotten":
        click.echo(f"forgotten by {fact.by}: no prompt carries it")
    elif fact.state == "proposed":
        click.echo(f"proposed: `git agentrun memory accept {fact.id}` lets prompts carry it")
    click.echo("")
    click.echo(fact.text)


@memory.command("add")
@click.argument("text")
@click.option("--path", "paths", multiple=True, metavar="GLOB", help="A path it concerns.")
def memory_add(text: str, paths: tuple[str, ...]) -> None:
    """Add a fact of your own (accepted: later prompts carry it)."""
    from agentrun.kernel.memory import FactError
    from agentrun.store.facts import person_add

    added = person_add(current_repo(), text, paths)
    if not added.new and added.fact.state != "accepted":
        raise FactError(f"fact {added.fact.id} already says this and is {added.fact.state}")
    if not added.new:
        click.echo(f"fact {added.fact.id} already says this; it is accepted")
        return
    click.echo(f"fact {added.fact.id} added (accepted)")


@memory.command("accept")
@click.argument("fact_id", metavar="ID")
def memory_accept(fact_id: str) -> None:
    """Accept a proposed fact: later builds' prompts carry it."""
    from agentrun.store.facts import accept

    fact, changed = accept(current_repo(), fact_id)
    click.echo(f"fact {fact.id} {'accepted' if changed else 'was already accepted'}")


@memory.command("forget")
@click.argument("fact_id", metavar="ID")
def memory_forget(fact_id: str) -> None:
    """Forget a fact: no later prompt carries it (its text stays in the log's history)."""
    from agentrun.store.facts import forget

    fact, changed = forget(current_repo(), fact_id)
    click.echo(f"fact {fact.id} {'forgotten' if changed else 'was already forgotten'}")
