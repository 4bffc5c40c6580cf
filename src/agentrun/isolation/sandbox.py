"""The sandbox one session (or check) runs in: how its programs are started.

``procs.run_tree`` takes a sandbox and lets it rewrite the program's argv and
environment. ``namespace`` wraps the program in bubblewrap; ``user`` in ``setpriv`` as
the agent account. Both give the program the build's own HOME and a temporary folder of
its own. Its verbs read the log through ``AGENTRUN_GIT_DIR`` (``session_env``), which
stays readable, and queue their reports in the worktree's outbox, which stays writable.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from agentrun.gitrepo import common_dir
from agentrun.isolation import account, gitdir, homes
from agentrun.isolation.levels import Level
from agentrun.isolation.probe import BWRAP_FLAGS

# Point into the real HOME or the shared /tmp, which the sandbox hides or does not share.
DROPPED = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "TMP", "TEMP")


@dataclass(frozen=True)
class Sandbox:
    level: Level
    worktree: Path
    gitdir: Path
    home: Path
    common: Path
    real_home: Path
    login: tuple[str, ...] = ()  # login files bound read-only into ``home``
    uid: int = -1
    gid: int = -1
    signal_via: tuple[str, ...] = field(default=())

    def wrap(
        self, argv: list[str], env: dict[str, str], cwd: Path
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run ``argv`` in ``cwd`` inside this sandbox."""
        env = {k: v for k, v in env.items() if k not in DROPPED}
        env["HOME"] = str(self.home)
        if self.level.mode == "user":
            env["TMPDIR"] = str(self.home / "tmp")
            env["USER"] = env["LOGNAME"] = self.level.account
            return account.wrap(argv, env, self.uid, self.gid), env
        env["TMPDIR"] = "/tmp"
        return self._bwrap(argv, env, cwd), env

    def _bwrap(self, argv: list[str], env: dict[str, str], cwd: Path) -> list[str]:
        bwrap = shutil.which("bwrap") or "bwrap"
        out = [bwrap, *BWRAP_FLAGS, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        out += ["--tmpfs", "/tmp"]
        hidden = [Path("/tmp")]
        if self.real_home.is_dir() and self.real_home != Path("/"):
            out += ["--tmpfs", str(self.real_home)]
            hidden.append(self.real_home)
        for path in self._visible(argv, env, hidden):
            out += ["--ro-bind", str(path), str(path)]
        for path in (self.worktree, self.gitdir, self.home):
            out += ["--bind", str(path), str(path)]
        for name in self.login:
            out += ["--ro-bind", str(self.real_home / name), str(self.home / name)]
        return [*out, "--chdir", str(cwd.resolve()), "--", *argv]

    def _visible(self, argv: list[str], env: dict[str, str], hidden: list[Path]) -> list[Path]:
        """What must stay readable although it lies under a hidden folder: the repository,
        agentrun's own Python, the folders on PATH and the program itself."""
        wanted = [self.common, Path(sys.prefix), Path(sys.base_prefix)]
        wanted += [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]
        program = shutil.which(argv[0], path=env.get("PATH")) if argv else None
        if program:
            wanted.append(_package_of(Path(program).resolve()))
        found: list[Path] = []
        for path in wanted:
            for each in {path, path.resolve()} if path.exists() else ():
                if any(each.is_relative_to(h) for h in hidden) and each not in found:
                    found.append(each)
        return sorted(found, key=lambda p: len(p.parts))


def _package_of(program: Path) -> Path:
    """The folder a program needs: its own, the whole ``node_modules`` it lives in (an
    npm CLI loads its platform binary from a sibling package), or the whole virtualenv
    whose ``bin`` holds it (aider's imports live in that venv's ``lib``)."""
    parts = program.parts
    if "node_modules" in parts:
        return Path(*parts[: parts.index("node_modules") + 1])
    if program.parent.name == "bin" and (program.parent.parent / "pyvenv.cfg").is_file():
        return program.parent.parent
    return program.parent


def sandbox(level: Level, repo: pygit2.Repository, slug: str, worktree: Path) -> Sandbox | None:
    """The sandbox for a session in ``worktree`` at ``level`` (None: not isolated).

    Prepares what the session needs: the build's HOME and, for ``user``, the account
    and its access to the worktree, its private git dir and that HOME.
    """
    if level.mode == "none":
        return None
    home = homes.build_home(repo, slug)
    real_home = Path(os.environ.get("HOME") or Path.home()).resolve()
    login = homes.furnish(repo, home, real_home, copy_login=level.mode == "user")
    common = common_dir(repo).resolve()
    private = gitdir.path_of(repo, slug)
    tree = worktree.resolve()
    if level.mode == "user":
        uid, gid = account.ensure(level.account)
        # agentrun's own Python (which the verbs run on) may live under a closed HOME.
        python = [Path(sys.executable).resolve(), Path(sys.prefix), Path(sys.base_prefix)]
        account.grant(uid, [tree, private, home], [common, *python])
        return Sandbox(
            level, tree, private, home, common, real_home, (), uid, gid, account.signal_via()
        )
    return Sandbox(level, tree, private, home, common, real_home, tuple(login))
