"""The one way agentrun starts the git CLI (DESIGN §2, §11).

An agent writes into the repository it works in: the shared ``.git`` (its hooks and its
config) and the worktree (its ``.gitattributes``). Git runs programs those files name —
hooks, ``core.fsmonitor``, filter, diff and merge drivers, ``core.sshCommand``, a remote's
``uploadpack``/``receivepack``, ``ext::`` URLs, credential helpers, the pager. Every git
process agentrun starts therefore gets

- an allow-listed environment: what git needs to find its programs, the user's own
  config and identity, and (for the network) the SSH agent and proxies; never a token,
  a ``[secrets]`` value or a variable that points git at another repository;
- configuration through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``,
  which git reads after every config file, that turns each of those programs off;
- for its own fetch and push only, the forge credential from memory
  (``credentials.git_config``), never written to a file.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pygit2

from agentrun.gitrepo import common_dir

# What every git process may inherit; nothing else passes.
ALLOWED = (
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",  # where the user's own git config may live
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
)
ALLOWED_PREFIXES = ("LC_",)
# What a fetch or push may inherit besides: the SSH agent, proxies and CA bundles.
NETWORK = (
    "SSH_AUTH_SOCK",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
)
FIXED = {
    "GIT_TERMINAL_PROMPT": "0",  # nobody answers a prompt: fail instead of hanging
    # Set (even empty), it wins over every core.gitProxy a config names.
    "GIT_PROXY_COMMAND": "",
}

# Where git looks for hooks: nothing can ever be created under /dev/null, whereas an
# empty folder is one more place an agent could write to.
NO_HOOKS = os.devnull
# git's own text merge, for a merge driver the repository defines (same conflict markers).
TEXT_MERGE = "git merge-file --marker-size=%L %A %O %B"

# Every config-driven way to run a program that has one safe value.
HARDENED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", NO_HOOKS),
    ("core.fsmonitor", "false"),
    ("core.sshCommand", "ssh"),  # or the user's own (_USERS_OWN)
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("core.alternateRefsCommand", "true"),  # advertise no alternate refs, run nothing
    ("diff.external", ""),  # and every diff agentrun makes passes --no-ext-diff
    ("protocol.ext.allow", "never"),
    ("submodule.recurse", "false"),  # a submodule's config is not read here
    ("commit.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("push.gpgSign", "false"),
    # uploadpack.packObjectsHook needs no entry: git never reads it from a repository's
    # own config, only from the user's and the system's.
)

# The per-driver keys a repository's config can point at a program, and what makes each
# driver do nothing. An empty filter (with ``required`` off) leaves content as it is.
_DRIVERS = re.compile(
    r"^(?:(filter)\.(.+)\.(clean|smudge|process|required)"
    r"|(diff)\.(.+)\.(textconv|command)"
    r"|(merge)\.(.+)\.(driver))$",
    re.IGNORECASE,
)
NEUTRAL = {
    "clean": "",
    "smudge": "",
    "process": "",
    "required": "false",
    "textconv": "cat",
    "command": "",
    "driver": TEXT_MERGE,
}
_CREDENTIAL_HELPER = re.compile(r"^credential\.(?:.+\.)?helper$", re.IGNORECASE)
_REPOSITORY_LEVELS = (pygit2.enums.ConfigLevel.LOCAL, pygit2.enums.ConfigLevel.WORKTREE)
_USER_LEVELS = (
    pygit2.enums.ConfigLevel.PROGRAMDATA,
    pygit2.enums.ConfigLevel.SYSTEM,
    pygit2.enums.ConfigLevel.XDG,
    pygit2.enums.ConfigLevel.GLOBAL,
)


def environment(network: bool = False, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed environment of a git process (``network``: a fetch or push)."""
    source = os.environ if base is None else base
    names = set(ALLOWED) | (set(NETWORK) if network else set())
    env = {
        key: value
        for key, value in source.items()
        if key in names or key.startswith(ALLOWED_PREFIXES)
    }
    env.update(FIXED)
    return env


def overrides(repo_dir: Path | None) -> list[tuple[str, str]]:
    """The configuration that keeps git from running what the repository names.

    ``repo_dir`` (a git directory or working tree) is read afresh on every call: an agent
    may have changed its config since the last one.
    """
    return _overrides(_entries(repo_dir))


def _overrides(entries: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
    found = [(key, _users_own(entries, key) or value) for key, value in HARDENED]
    found += _credential_helpers(entries)
    found += _drivers(entries)
    return found


# The commands that reach a remote: only these get the SSH agent, proxies and the token.
# What gives a fetch or push its credential: the remote URLs in, config entries out.
Credential = Callable[[Sequence[str]], list[tuple[str, str]]]
NETWORK_COMMANDS = frozenset({"fetch", "push", "ls-remote", "pull", "clone"})


def subcommand(args: Sequence[str]) -> str:
    """The git command in ``args`` (``push`` in ``--git-dir=X -C Y push …``)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-C", "-c"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return ""


# The program a fetch or push starts on the remote's side: a remote's config may name
# another (``remote.<name>.uploadpack``/``receivepack``), and for those git keeps the
# first value it reads, so only the command-line option overrides it.
REMOTE_PROGRAMS = {
    "fetch": "--upload-pack=git-upload-pack",
    "ls-remote": "--upload-pack=git-upload-pack",
    "pull": "--upload-pack=git-upload-pack",
    "clone": "--upload-pack=git-upload-pack",
    "push": "--receive-pack=git-receive-pack",
}


def _plain_programs(args: Sequence[str]) -> list[str]:
    """``args`` with the plain remote program named right after the subcommand."""
    found = list(args)
    command = subcommand(found)
    option = REMOTE_PROGRAMS.get(command)
    if option is None:
        return found
    at = found.index(command) + 1
    return [*found[:at], option, *found[at:]]


def run(
    args: Sequence[str],
    *,
    cwd: Path,
    repo: Path | None = None,
    timeout: float | None = None,
    check: bool = False,
    base: Mapping[str, str] | None = None,
    config: Sequence[tuple[str, str]] = (),
    credential: Credential | None = None,
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd``, hardened; ``repo`` is whose config to neutralise (default:
    the repository ``cwd`` is in). A fetch or push also gets the SSH agent and proxies,
    and, from ``credential`` (``credentials.git_config``, which the caller that talks to
    a remote passes), the forge credential for the repository's remote URLs. ``config``:
    more ``key=value`` pairs for this one process."""
    args = _plain_programs(args)
    network = subcommand(args) in NETWORK_COMMANDS
    entries = _entries(repo if repo is not None else cwd)
    pairs = _overrides(entries)
    if network and credential is not None:
        pairs += credential(_remote_urls(entries))
    pairs += list(config)
    env = environment(network, base)
    env.update(config_env(pairs))
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        stdin=subprocess.DEVNULL,
    )


def config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``GIT_CONFIG_COUNT`` and its keys and values: config for one process, in no file."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for n, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


# --- what the repository's config defines -------------------------------------------


def _entries(repo_dir: Path | None) -> list[tuple[int, str, str]]:
    """(level, name, value) of every config entry git would read there, includes followed."""
    found = None if repo_dir is None else pygit2.discover_repository(str(repo_dir))
    try:
        if found is None:  # no repository (yet): only the user's own config applies
            configs: list[pygit2.Config] = []
            for opener in (pygit2.Config.get_system_config, pygit2.Config.get_global_config):
                with contextlib.suppress(OSError, pygit2.GitError):
                    configs.append(opener())
            return [(int(e.level), e.name, e.value or "") for c in configs for e in c]
        repo = pygit2.Repository(found)
        entries = [(int(e.level), e.name, e.value or "") for e in repo.config]
    except pygit2.GitError:
        return []
    return entries + _conditional_includes(entries, common_dir(repo))


_INCLUDE = re.compile(r"^include(?:if\..+)?\.path$", re.IGNORECASE)


def _conditional_includes(
    entries: list[tuple[int, str, str]], base: Path
) -> list[tuple[int, str, str]]:
    """The entries of every file the repository's config includes, whatever the condition.

    libgit2 does not evaluate every ``includeIf`` condition git does (``hasconfig:``,
    ``onbranch:`` on an unborn branch): a driver hidden behind one would escape. A driver
    named in a file whose condition is false is neutralised for nothing, which is harmless.
    """
    level = int(pygit2.enums.ConfigLevel.LOCAL)
    pending = [
        (base, value)
        for lvl, name, value in entries
        if lvl in _REPOSITORY_LEVELS and _INCLUDE.match(name)
    ]
    seen: set[Path] = set()
    found: list[tuple[int, str, str]] = []
    while pending:
        where, value = pending.pop()
        path = Path(os.path.expanduser(value))
        path = path if path.is_absolute() else where / path
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            included = [(e.name, e.value or "") for e in pygit2.Config(str(path))]
        except pygit2.GitError:
            continue
        found += [(level, name, value) for name, value in included]
        pending += [(path.parent, v) for name, v in included if _INCLUDE.match(name)]
    return found


# Settings whose value from the user's own config stands (their SSH key, say).
_USERS_OWN = frozenset({"core.sshcommand"})


def _users_own(entries: list[tuple[int, str, str]], key: str) -> str | None:
    """The user's own value of ``key`` (last one wins, as in git), if it is one they keep."""
    if key.lower() not in _USERS_OWN:
        return None
    values = [v for level, name, v in entries if level in _USER_LEVELS and name == key.lower()]
    return values[-1] if values else None


def _credential_helpers(entries: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
    """An empty helper first (it empties git's list: a repository's helper never runs),
    then the helpers of the user's own config, in git's order, so a keychain still works."""
    user = [
        (name, value)
        for level, name, value in entries
        if level in _USER_LEVELS and _CREDENTIAL_HELPER.match(name)
    ]
    return [("credential.helper", ""), *user]


def _remote_urls(entries: list[tuple[int, str, str]]) -> list[str]:
    return [value for _, name, value in entries if _REMOTE_URL.match(name)]


_REMOTE_URL = re.compile(r"^remote\..+\.(?:url|pushurl)$", re.IGNORECASE)


def _drivers(entries: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
    """Each filter, diff and merge driver the repository's own config defines, made inert.

    Only the repository's scopes (local, worktree, and what they include) are
    neutralised: an agent writes there. A driver of the user's own config (git-lfs's
    ``filter.lfs``) is kept — the user installed it, an LFS checkout needs it, and an
    agent that can rewrite the user's ``~/.gitconfig`` can as well rewrite their shell's
    startup files, which isolation (a private HOME) is for. Where the repository redefines
    a key the user's config has, the user's value is put back.
    """
    user: dict[str, str] = {}
    for level, name, value in entries:
        if level in _USER_LEVELS and _DRIVERS.match(name):
            user[name.lower()] = value
    pairs: dict[str, tuple[str, str]] = {}
    for level, name, _ in entries:
        if level not in _REPOSITORY_LEVELS:
            continue
        match = _DRIVERS.match(name)
        if match is None:
            continue
        section, driver, _ = (g for g in match.groups() if g is not None)
        prefix = f"{section}.{driver}."
        for sub in _SUBKEYS[section.lower()]:
            full = prefix + sub
            pairs[full.lower()] = (full, user.get(full.lower(), NEUTRAL[sub]))
    return list(pairs.values())


_SUBKEYS = {
    "filter": ("clean", "smudge", "process", "required"),
    "diff": ("textconv", "command"),
    "merge": ("driver",),
}
