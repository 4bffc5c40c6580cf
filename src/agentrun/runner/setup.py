"""``[setup]``: prepare a build's worktree before the first session or check there.

It runs again only when a file its ``inputs`` match changed since its last good run in
that worktree. The digest of those files is kept beside the worktree, not in the log: a
fresh CI clone has no worktree, so it runs setup once. The command gets the checks'
environment and runs isolated like a check (the agent can change what it runs). Its
output is an artifact (``setup-<n>.txt``) of an ``observation.recorded``; a failure parks
the build with the output's tail as the question, and an answer lets it try again, in a
worktree cleaned of what the unfinished run left (ignored files too). What
setup makes must be ignored by ``.gitignore``: the worktree is cleaned before each phase,
so untracked files it leaves are named and fail the step.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pygit2

from agentrun import gitcli, procs
from agentrun.config import SetupStep
from agentrun.gitrepo import tree_at
from agentrun.kernel import runner as kernel_runner
from agentrun.kernel.paths import spec
from agentrun.runner.build import BuildHandle
from agentrun.runner.checks import run_in_worktree
from agentrun.runner.workspace import Workspace

PHASE = kernel_runner.SETUP
TAIL_CHARS = 2000
OUTPUT_LIMIT = 64 * 1024
NAMED_FILES = 10
SCRATCH = ".agentrun/"  # the sessions' own folder (context, outbox), never setup's
UNFINISHED = "unfinished"  # the marker's digest while setup runs, and after it failed


def ensure(build: BuildHandle, workspace: Workspace) -> bool:
    """Run setup when this worktree needs it; False when it failed (the build parks)."""
    step = build.state.config.setup
    if step.command is None:
        return True
    digest = _digest(build.repo, build.state.head, step)
    marker = _marker(workspace)
    recorded = _recorded(marker)
    if recorded == digest:
        return True
    if recorded == UNFINISHED:
        # The last run failed or was cut off (Ctrl-C, a dead job): what it half made (a venv
        # without its pip) would fail the next run the same way, so it starts clean.
        clean = ("clean", "-q", "-f", "-f", "-d", "-x", "-e", f"/{SCRATCH}")
        gitcli.run(clean, cwd=workspace.path, check=True)
    marker.write_text(json.dumps({"digest": UNFINISHED}), encoding="utf-8")
    started = time.monotonic()
    done = _run(build, workspace, step)
    output = done.output
    problem = _problem(done, step)
    if problem is None:
        left = _untracked(workspace)
        if left:
            shown = ", ".join(left[:NAMED_FILES]) + (" …" if len(left) > NAMED_FILES else "")
            problem = (
                f"setup left files that .gitignore does not ignore ({shown}); the worktree "
                "is cleaned before every phase: ignore what setup makes, or make it elsewhere"
            )
    seconds = time.monotonic() - started
    task = f"{build.task}-" if build.task else ""
    artifact = f"setup-{task}{_count(build) + 1}.txt"
    text = f"$ {_shown(step)}\n{output}\n[{problem or 'ok'}]\n".encode()
    if len(text) > OUTPUT_LIMIT:
        text = b"[... output cut ...]\n" + text[-OUTPUT_LIMIT:]
    said = f"setup {'failed' if problem else 'ran'} in {seconds:.1f}s ({artifact})"
    tail = output[-TAIL_CHARS:]
    build.append(kernel_runner.setup_ran(build.state, said, artifact, text, problem, tail))
    if problem is None:
        marker.write_text(json.dumps({"digest": digest}), encoding="utf-8")
        from agentrun.runner.memory import setup_worked

        setup_worked(build, _shown(step))
        return True
    return False


def _digest(repo: pygit2.Repository, head: str, step: SetupStep) -> str:
    """What setup's result depends on: its command and the files ``inputs`` match at head."""
    sha = hashlib.sha256(json.dumps([step.command, step.inputs, step.pass_env]).encode())
    if step.inputs:
        matcher = spec(step.inputs)
        for path, oid in sorted(_files(repo, tree_at(repo, head))):
            if matcher.match_file(path):
                sha.update(f"{path}\0{oid}\n".encode())
    return sha.hexdigest()


def _files(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> list[tuple[str, str]]:
    found = []
    for entry in tree:
        path = f"{prefix}{entry.name}"
        if entry.type_str == "tree":
            found += _files(repo, tree_at(repo, entry.id), path + "/")
        elif entry.type_str == "blob":
            found.append((path, str(entry.id)))
    return found


def _marker(workspace: Workspace) -> Path:
    return marker_of(workspace.path)


def marker_of(worktree: Path) -> Path:
    """Beside the worktree (an agent cannot edit it; a re-made worktree forgets it)."""
    return worktree.parent / f"{worktree.name}.setup.json"


def _recorded(marker: Path) -> str | None:
    try:
        value = json.loads(marker.read_text(encoding="utf-8")).get("digest")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _run(build: BuildHandle, workspace: Workspace, step: SetupStep) -> procs.Finished:
    command = step.command or ()
    argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
    try:
        return run_in_worktree(build, workspace, PHASE, argv, step.timeout_seconds, step.pass_env)
    except OSError as exc:
        return procs.Finished(exit_code=127, output=f"cannot start {argv[0]!r}: {exc}\n")


def _problem(done: procs.Finished, step: SetupStep) -> str | None:
    if done.timed_out:
        return f"it ran past its {step.timeout_seconds:g}s (process tree ended)"
    if done.cancelled:
        return "it was cancelled"
    if done.exit_code != 0:
        return f"exit {done.exit_code}"
    return None


def _untracked(workspace: Workspace) -> list[str]:
    listed = gitcli.run(
        ("status", "--porcelain", "--untracked-files=all", "-z"), cwd=workspace.path, check=True
    ).stdout
    return [
        entry[3:]
        for entry in listed.split("\0")
        if entry.startswith("?? ") and not entry[3:].startswith(SCRATCH)
    ]


def _count(build: BuildHandle) -> int:
    names = build.log.artifact_names(build.tip)
    return sum(1 for name in names if name.startswith("setup-"))


def _shown(step: SetupStep) -> str:
    return step.command if isinstance(step.command, str) else " ".join(step.command or ())
