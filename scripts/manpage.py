"""Write data/share/man/man1/git-agentrun.1 from the click commands (``--check``: is it current?).

Git turns ``git agentrun --help`` into ``man git-agentrun``; the wheel installs data/'s files
under the venv's prefix, this page in ``share/man/man1``, where ``man`` finds it next to the
venv's ``bin`` on ``PATH``.

    .venv/bin/python scripts/manpage.py [--check]
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from agentrun import __version__
from agentrun.cli.main import cli
from agentrun.errors import EXIT_MEANINGS

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "data" / "share" / "man" / "man1" / "git-agentrun.1"  # data/: the venv's prefix


def roff(text: str) -> str:
    """Text as roff shows it literally: backslashes, hyphens and leading dots escaped."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line for line in text.split("\n"))


def paragraphs(text: str) -> list[str]:
    text = inspect.cleandoc(text).replace("\b\n", "")
    out = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip() != "\b"]
        if lines:
            out += [".PP", roff("\n".join(lines))] if out else [roff("\n".join(lines))]
    return out


def command_lines(command: click.Command, ctx: click.Context) -> list[str]:
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f'.SS "{roff(ctx.command_path)} {roff(usage)}"'.rstrip()]
    lines += paragraphs(command.help or "")
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or "--help" in param.opts:
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        opts, help_text = record
        lines += [".TP", f"\\fB{roff(opts)}\\fR", roff(help_text or "")]
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                lines += command_lines(sub, click.Context(sub, info_name=name, parent=ctx))
    return lines


def page() -> str:
    root = click.Context(cli, info_name="git agentrun")
    lines = [
        f'.TH GIT\\-AGENTRUN 1 "" "agentrun {__version__}" "Git Manual"',
        ".SH NAME",
        f"git\\-agentrun \\- {roff(cli.get_short_help_str(200))}",
        ".SH SYNOPSIS",
        ".B git agentrun",
        "[\\fB\\-\\-version\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".br",
        ".B git agentrun help",
        "[\\fICOMMAND\\fR]",
        ".SH DESCRIPTION",
        *paragraphs(cli.help or ""),
        ".PP",
        "Every command prints its own help with \\fB\\-h\\fR, or \\fBgit agentrun help\\fR "
        "\\fICOMMAND\\fR.",
        ".SH COMMANDS",
    ]
    for name in cli.list_commands(root):
        sub = cli.get_command(root, name)
        if sub is not None and not sub.hidden:
            lines += command_lines(sub, click.Context(sub, info_name=name, parent=root))
    lines += [".SH EXIT STATUS"]
    for code, meaning in EXIT_MEANINGS.items():
        lines += [".TP", f"\\fB{code}\\fR", roff(meaning)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = page()
    if argv[1:] == ["--check"]:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is out of date: run python scripts/manpage.py", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
