"""``git agentrun help [COMMAND]`` and ``git agentrun completion SHELL``.

Git turns ``git agentrun --help`` into ``man git-agentrun`` (the wheel ships the page);
``help`` prints the same text as ``git agentrun COMMAND -h`` without a pager.

Completion goes through click's protocol under the variable ``_GIT_AGENTRUN_COMPLETE``
(click's default is made from the program name, and "git agentrun" has a space). Each
script hooks into the shell's own git completion, so ``git agentrun <TAB>`` completes,
and ``git-agentrun <TAB>`` too.
"""

from __future__ import annotations

import click

from agentrun.cli import COMPLETE_VAR  # the entry point reads it before click loads

_BASH = r"""# git agentrun completion for bash: eval "$(git agentrun completion bash)"
_git_agentrun() {
    local -a ws
    local cw i at=-1
    if [ -n "${words+x}" ] && [ -n "${cword+x}" ]; then
        ws=("${words[@]}"); cw=$cword        # inside git's own completion
    else
        ws=("${COMP_WORDS[@]}"); cw=$COMP_CWORD
    fi
    for ((i = 0; i < ${#ws[@]}; i++)); do
        case "${ws[i]}" in agentrun | git-agentrun | */git-agentrun) at=$i; break ;; esac
    done
    [ "$at" -ge 0 ] || return 0
    local joined="git-agentrun ${ws[*]:at+1:cw-at}"
    local line IFS=$'\n'
    COMPREPLY=()
    for line in $(COMP_WORDS="$joined" COMP_CWORD=$((cw - at)) __COMPLETE_VAR__=bash_complete \
        git-agentrun 2>/dev/null); do
        case "${line%%,*}" in
            plain) COMPREPLY+=("${line#*,}") ;;
            dir) compopt -o dirnames 2>/dev/null; COMPREPLY=(); return 0 ;;
            file) compopt -o default 2>/dev/null; COMPREPLY=(); return 0 ;;
        esac
    done
}
complete -F _git_agentrun git-agentrun
"""

_ZSH = r"""#compdef git-agentrun
# git agentrun completion for zsh: eval "$(git agentrun completion zsh)"
_git-agentrun() {
    local -a found
    local i at=0 line
    for ((i = 1; i <= $#words; i++)); do
        case "$words[i]" in agentrun | git-agentrun | */git-agentrun) at=$i; break ;; esac
    done
    (( at )) || return 1
    local joined="git-agentrun ${(j: :)words[at+1,CURRENT]}"
    for line in "${(@f)$(COMP_WORDS=$joined COMP_CWORD=$((CURRENT - at)) \
        __COMPLETE_VAR__=bash_complete git-agentrun 2>/dev/null)}"; do
        case "${line%%,*}" in
            plain) found+=("${line#*,}") ;;
            dir) _path_files -/; return ;;
            file) _files; return ;;
        esac
    done
    compadd -a found
}
compdef _git-agentrun git-agentrun
"""

_FISH = r"""# git agentrun completion for fish: git agentrun completion fish | source
function __git_agentrun_complete
    set -l tokens (commandline -opc)
    set -l current (commandline -ct)
    set -l at (contains -i -- agentrun $tokens; or contains -i -- git-agentrun $tokens)
    test -n "$at"; or return
    set -l args git-agentrun $tokens[(math $at + 1)..-1]
    set -l joined (string join ' ' -- $args "$current")
    for line in (env COMP_WORDS="$joined" COMP_CWORD=(count $args) \
            __COMPLETE_VAR__=bash_complete git-agentrun 2>/dev/null)
        set -l parts (string split -m 1 , -- $line)
        switch $parts[1]
            case plain
                echo $parts[2]
            case dir
                __fish_complete_directories $current
            case file
                __fish_complete_path $current
        end
    end
end
complete -c git -n '__fish_seen_subcommand_from agentrun' -f -a '(__git_agentrun_complete)'
complete -c git-agentrun -f -a '(__git_agentrun_complete)'
"""

SCRIPTS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


@click.command("help")
@click.argument("command", nargs=-1)
@click.pass_context
def help_command(ctx: click.Context, command: tuple[str, ...]) -> None:
    """Print the help of a COMMAND, or of git agentrun: `help pulls merge`."""
    root = ctx.find_root()
    target: click.Command = root.command
    sub = click.Context(target, info_name=root.info_name)
    for name in command:
        found = target.get_command(sub, name) if isinstance(target, click.Group) else None
        if found is None:
            names = " ".join(command)
            raise click.UsageError(f"no command {names!r}: `git agentrun help` lists them", ctx)
        target = found
        sub = click.Context(target, info_name=name, parent=sub)
    click.echo(target.get_help(sub))


@click.command()
@click.argument("shell", type=click.Choice(sorted(SCRIPTS)))
def completion(shell: str) -> None:
    """Print a script that completes `git agentrun <TAB>` in SHELL.

    \b
    bash: eval "$(git agentrun completion bash)"   (in ~/.bashrc)
    zsh:  eval "$(git agentrun completion zsh)"    (in ~/.zshrc, after compinit)
    fish: git agentrun completion fish > ~/.config/fish/conf.d/git-agentrun.fish
    """
    click.echo(SCRIPTS[shell].replace("__COMPLETE_VAR__", COMPLETE_VAR), nl=False)
