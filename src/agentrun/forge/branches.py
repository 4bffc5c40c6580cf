"""Git in a working tree, for every forge: which tree has a branch, what is uncommitted
there, and a build branch pushed to origin (only ever a fast-forward)."""

from __future__ import annotations

from pathlib import Path

import pygit2

from agentrun import credentials, gitcli
from agentrun.errors import ForgeError
from agentrun.gitrepo import common_dir


def checked_out_in(repo: pygit2.Repository, branch: str) -> Path | None:
    """The working tree (main or linked) that has ``branch`` checked out, if any."""
    out = git_in(common_dir(repo), "worktree", "list", "--porcelain", git_dir=True)
    for block in out.split("\n\n"):
        lines = block.splitlines()
        fields = dict(line.partition(" ")[::2] for line in lines)
        if "bare" in fields or fields.get("branch") != f"refs/heads/{branch}":
            continue
        path = Path(fields["worktree"])
        if path.is_dir():
            return path
    return None


def tracked_changes(worktree: Path) -> list[str]:
    """Paths of tracked files with staged or unstaged changes in ``worktree``."""
    out = git_in(worktree, "status", "--porcelain", "--untracked-files=no")
    return [line[3:] for line in out.splitlines() if line.strip()]


def push_to_origin(repo: pygit2.Repository, branch: str, sha: str) -> None:
    """Push ``sha`` to ``branch`` on origin; git refuses anything but a fast-forward."""
    try:
        git_in(
            common_dir(repo),
            "push",
            "--no-verify",
            "--quiet",
            "origin",
            f"{sha}:refs/heads/{branch}",
            git_dir=True,
        )
    except ForgeError as exc:
        if "non-fast-forward" in str(exc) or "fetch first" in str(exc):
            raise ForgeError(
                f"origin's {branch} has commits this build does not have; "
                "not overwriting them (agentrun never force-pushes)"
            ) from None
        raise


def git_in(where: Path, *args: str, git_dir: bool = False) -> str:
    """Run git in working tree ``where`` (or git directory, with ``git_dir``); its stdout.

    A failure is a ``ForgeError`` carrying git's own reason.
    """
    location = [f"--git-dir={where}"] if git_dir else ["-C", str(where)]
    done = gitcli.run([*location, *args], cwd=where, credential=credentials.git_config)
    if done.returncode != 0:
        # git spreads one reason over several lines (a heading, the paths, "Aborting").
        detail = " ".join(line.strip() for line in (done.stderr or done.stdout).splitlines())
        raise ForgeError(f"git {args[0]} failed in {where}: {detail[:400] or 'no output'}")
    return done.stdout
