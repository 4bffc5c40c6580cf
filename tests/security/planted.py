"""What a hostile agent plants in the repository it works in, so that git runs its code.

Every planted program is one script, ``evil.sh NAME``, that dumps its environment to
``marks/NAME`` (and, as a filter, passes its input through). An empty ``marks`` folder
after the runner's git worked there means none of it ran.
"""

from __future__ import annotations

import stat
from pathlib import Path

HOOKS = (
    "post-checkout",
    "pre-commit",
    "reference-transaction",
    "post-merge",
    "pre-push",
    "post-index-change",
    "pre-auto-gc",
    "post-rewrite",
)
ATTRIBUTES = "* filter=evil diff=evil merge=evil\n*.p filter=evilp\n*.h filter=evilhidden\n"


def evil_script(marks: Path) -> Path:
    marks.mkdir(parents=True, exist_ok=True)
    script = marks.parent / f"{marks.name}.sh"
    script.write_text(f'#!/bin/sh\nenv > "{marks}/$1"\n[ "$2" = filter ] && exec cat\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def plant(common_dir: Path, marks: Path) -> Path:
    """Hooks in the shared ``.git/hooks``, and config (some of it in an included file)
    that names a program for every way git runs one. Returns the script."""
    evil = evil_script(marks)
    hooks = common_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\n{evil} hook-{name}\n")
        hook.chmod(0o755)
    included = common_dir / "evil.inc"
    included.write_text(
        '[filter "evil"]\n'
        f"\tclean = {evil} filter-clean filter\n"
        f"\tsmudge = {evil} filter-smudge filter\n"
        "\trequired = true\n"
        '[filter "evilp"]\n'
        f"\tprocess = {evil} filter-process\n"
        "\trequired = true\n"
    )
    # Behind a condition git evaluates and libgit2 does not (hasconfig:).
    (common_dir / "hidden.inc").write_text(
        f'[filter "evilhidden"]\n\tclean = {evil} filter-hidden filter\n\trequired = true\n'
    )
    with (common_dir / "config").open("a") as config:
        config.write(
            "[include]\n"
            "\tpath = evil.inc\n"
            '[includeIf "hasconfig:remote.*.url:**"]\n'
            "\tpath = hidden.inc\n"
            '[remote "planted"]\n'
            "\turl = https://example.invalid/planted.git\n"
            "[core]\n"
            f"\tfsmonitor = {evil} fsmonitor\n"
            f"\tsshCommand = {evil} ssh\n"
            f"\tpager = {evil} pager\n"
            f"\taskPass = {evil} askpass\n"
            f"\talternateRefsCommand = {evil} alternate-refs\n"
            '[diff "evil"]\n'
            f"\ttextconv = {evil} textconv\n"
            f"\tcommand = {evil} diff-command\n"
            "[diff]\n"
            f"\texternal = {evil} diff-external\n"
            '[merge "evil"]\n'
            f"\tdriver = {evil} merge-driver\n"
            "[credential]\n"
            f"\thelper = !{evil} credential-helper\n"
        )
    return evil


def plant_remote_programs(common_dir: Path, evil: Path, remote: str = "origin") -> None:
    with (common_dir / "config").open("a") as config:
        config.write(
            f'[remote "{remote}"]\n'
            f"\tuploadpack = {evil} uploadpack\n"
            f"\treceivepack = {evil} receivepack\n"
        )


def fired(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir())
