"""``git agentrun pulls …``: the local forge's proposals, listed, shown, merged, closed."""

from __future__ import annotations

import click

from agentrun.cli.options import current_repo


@click.group(invoke_without_command=True)
@click.pass_context
def pulls(ctx: click.Context) -> None:
    """The local forge's proposals (refs/agentrun/pulls/N)."""
    if ctx.invoked_subcommand is None:
        from agentrun.commands.pulls import list_pulls
        from agentrun.view.render import pulls_table

        pulls_table(list_pulls(current_repo()))


@pulls.command("show")
@click.argument("number", type=int)
@click.option("--diff", "as_diff", is_flag=True, help="The change against its base, as a diff.")
@click.option("--stat", is_flag=True, help="The change against its base, file by file.")
def pulls_show(number: int, as_diff: bool, stat: bool) -> None:
    """A proposal: title, state, body, comments and commits (or its --diff, --stat)."""
    from agentrun.commands.pulls import diff_pull, show_pull
    from agentrun.view.render import proposal_lines

    repo = current_repo()
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

    click.echo(f"switched to {checkout_pull(current_repo(), number)}")


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
    from agentrun.forge.local import LocalForge

    repo = current_repo()
    base = repo.references.get(f"refs/heads/{LocalForge(repo).get(number).base}")
    sha = merge_pull(repo, number, force, squash=not keep_commits)
    if base is not None and sha == str(base.target):
        click.echo(f"merged #{number}: it changes nothing, so no commit was made ({sha[:10]})")
    else:
        click.echo(f"merged #{number}; base is now at {sha[:10]}")


@pulls.command("close")
@click.argument("number", type=int)
def pulls_close(number: int) -> None:
    """Close a proposal without merging, and archive its build."""
    from agentrun.commands.pulls import close_pull

    close_pull(current_repo(), number)
    click.echo(f"closed #{number}")
