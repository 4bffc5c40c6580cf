"""``git agentrun demo``: a whole build, offline, with a scripted agent.

A small repository with a real bug and a failing test; the build goes through a
plan, a code-review revision, a failing verify check that the next implement round
repairs, a finalize step, and ends with a proposal ready for review.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pygit2

from agentrun import gitcli
from agentrun.commands.build import create_build, run_build
from agentrun.config import parse_config
from agentrun.forge.local import LocalForge
from agentrun.kernel.state import BuildState
from agentrun.runner.build import Observer
from agentrun.store.log import EventLog, Stored

PAGER_BUGGY = '''\
"""Split a list of items into pages."""


def page_count(total_items: int, per_page: int) -> int:
    """How many pages it takes to show ``total_items``, ``per_page`` at a time."""
    return total_items // per_page
'''

TESTS = """\
import unittest

from pager import page_count


class PageCountTest(unittest.TestCase):
    def test_exact_pages(self):
        self.assertEqual(page_count(20, 10), 2)

    def test_partial_last_page(self):
        self.assertEqual(page_count(21, 10), 3)

    def test_no_items(self):
        self.assertEqual(page_count(0, 10), 0)

    def test_page_size_must_be_positive(self):
        with self.assertRaises(ValueError):
            page_count(5, 0)


if __name__ == "__main__":
    unittest.main()
"""

PAGER_ROUND_1 = PAGER_BUGGY.replace(
    "    return total_items // per_page\n",
    "    return (total_items + per_page - 1) // per_page\n",
)
PAGER_ROUND_2 = PAGER_ROUND_1.replace(
    "    return (total_items",
    '    if per_page < 0:\n        raise ValueError("per_page must be positive")\n'
    "    return (total_items",
)
PAGER_ROUND_3 = PAGER_ROUND_2.replace("if per_page < 0:", "if per_page <= 0:")

PLAN = """\
1. `page_count` drops the last, partial page: round the division up.
2. A page size of zero (or less) must raise ValueError instead of dividing by zero.
3. The existing tests in test_pager.py cover both; run them as the verify step.
"""


def _script() -> dict[str, object]:
    return {
        "step": [
            {"phase": "plan", "verb": "plan", "text": PLAN, "say": "reading pager.py"},
            {"phase": "plan-review", "verb": "approve", "say": "the plan covers both bugs"},
            {
                "phase": "implement",
                "round": 1,
                "write": {"pager.py": PAGER_ROUND_1},
                "verb": "done",
                "text": "round the page count up",
                "say": "editing pager.py",
            },
            {
                "phase": "code-review",
                "round": 1,
                "verb": "revise",
                "findings": ["page_count(5, 0) still divides by zero: raise ValueError"],
            },
            {
                "phase": "implement",
                "round": 2,
                "write": {"pager.py": PAGER_ROUND_2},
                "verb": "done",
                "text": "reject page sizes below zero",
            },
            {"phase": "code-review", "round": 2, "verb": "approve"},
            {
                "phase": "implement",
                "round": 3,
                "write": {"pager.py": PAGER_ROUND_3},
                "commit": "reject a page size of zero too",
                "verb": "done",
                "text": "reject a page size of zero too",
            },
            {"phase": "code-review", "round": 3, "verb": "approve"},
            {
                "phase": "finalize:changelog",
                "verb": "done",
                "text": "changelog entry",
                "write": {"CHANGELOG.md": "- page_count rounds up and rejects empty pages\n"},
            },
        ]
    }


def _toml(data: dict[str, object]) -> str:
    """A tiny TOML writer for the demo's own files (arrays of tables, strings, lists)."""
    out: list[str] = []
    for key, items in data.items():
        assert isinstance(items, list)
        for item in items:
            out.append(f"[[{key}]]")
            for k, v in item.items():
                out.append(f"{k} = {_value(v)}")
            out.append("")
    return "\n".join(out)


def _value(v: object) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    return json.dumps(str(v))


def make_demo_repo(root: Path) -> Path:
    repo_dir = root / "pager"
    repo_dir.mkdir(parents=True)
    (repo_dir / "pager.py").write_text(PAGER_BUGGY)
    (repo_dir / "test_pager.py").write_text(TESTS)
    script = root / "agent-script.toml"
    script.write_text(_toml(_script()))
    check = f"{shutil.which('python3') or sys.executable} -m unittest -q test_pager"
    config = f"""\
[roles]
default = ["scripted"]

[runtimes.scripted]
kind = "script"
script = {json.dumps(str(script))}

[[verify]]
name = "tests"
command = {json.dumps(check)}
paths = ["*.py"]

[[finalize]]
name = "changelog"
agent = "implement"
"""
    parse_config(config, "demo config")
    (repo_dir / ".agentrun.toml").write_text(config)
    env = dict(os.environ)
    env.update(
        GIT_AUTHOR_NAME="Demo",
        GIT_AUTHOR_EMAIL="demo@example.com",
        GIT_COMMITTER_NAME="Demo",
        GIT_COMMITTER_EMAIL="demo@example.com",
    )
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "pager"]):
        gitcli.run(args, cwd=repo_dir, check=True, base=env)
    return repo_dir


@dataclass
class DemoReport:
    lines: list[str]
    state: str


NEXT_STEPS = [
    "",
    "== next: in your own repository ==",
    "  git agentrun init        write .agentrun.toml: pick a runtime, add [[verify]] with "
    "your tests",
    "  git agentrun doctor      check that the runtime can run here",
    '  git agentrun run "GOAL"  a first build; `git agentrun status` and '
    "`git agentrun pulls show N` follow it",
]


@contextmanager
def demo_build(keep: bool = False) -> Iterator[Demo]:
    """A demo repository with its build created, in a temporary folder removed afterwards
    (unless ``keep``). The build's worktree goes there too, not to the user's cache."""
    root = Path(tempfile.mkdtemp(prefix="agentrun-demo-"))
    saved = os.environ.get("AGENTRUN_WORKTREES")
    os.environ["AGENTRUN_WORKTREES"] = str(root / "worktrees")
    try:
        repo_dir = make_demo_repo(root)
        repo = pygit2.Repository(str(repo_dir))
        created = create_build(repo, "Fix the off-by-one in pager.py")
        first = EventLog(repo).read(created.slug)[0]
        yield Demo(repo, created.slug, first, root if keep else None)
    finally:
        if saved is None:
            os.environ.pop("AGENTRUN_WORKTREES", None)
        else:
            os.environ["AGENTRUN_WORKTREES"] = saved
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


@dataclass
class Demo:
    repo: pygit2.Repository
    slug: str
    created: Stored  # the timeline's first event; the runner's observer sees the rest
    kept: Path | None

    def run(self, observer: Observer) -> DemoReport:
        """Run the build to its end; the report: its branch, the fix, the proposal, and
        what to do next (the timeline is what ``observer`` saw)."""
        outcome = run_build(self.repo, self.slug, observer)
        state = outcome.state
        return DemoReport(self._report(state), state.state_name)

    def _report(self, state: BuildState) -> list[str]:
        from agentrun.view.render import proposal_lines

        slug, lines = self.slug, []
        forge = LocalForge(self.repo)
        found = forge.find_open(f"agentrun/{slug}")
        if found is not None:
            lines += ["", f"== build branch agentrun/{slug} =="]
            lines += [f"  {sha[:10]} {subject}" for sha, subject in forge.commits(found.number)]
        diff = self.repo.diff(state.base_sha, state.head).patch or ""
        lines += ["", f"== the fix (git diff {state.base_ref}..agentrun/{slug}) =="]
        lines += diff.rstrip("\n").splitlines()
        if found is not None:
            lines += ["", "== proposal ==", *proposal_lines(found)]
        lines += ["", f"demo build {slug}: {state.state_name}"]
        if self.kept is not None:
            lines.append(f"the demo repository is kept at {self.kept / 'pager'}")
        return lines + NEXT_STEPS
