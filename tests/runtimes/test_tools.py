"""The API runtimes' tools: confined to the worktree, bounded, verbs validated like the CLI's."""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import replace
from pathlib import Path

import pygit2
import pytest
from runner.helpers import configure, payloads

from agentrun.commands.build import create_build, run_build
from agentrun.errors import GuardError
from agentrun.runtimes import tool_catalog, tools
from agentrun.runtimes.base import SessionControl, SessionSpec
from agentrun.runtimes.confine import confined
from agentrun.runtimes.tool_catalog import tool_specs
from agentrun.runtimes.tools import Toolbox


def spec(
    workdir: Path, phase: str = "implement", build: str = "no-build", session: str = "s-1"
) -> SessionSpec:
    return SessionSpec(
        session=session,
        build=build,
        phase=phase,
        round=1,
        attempt=1,
        role=phase,
        prompt="",
        workdir=workdir,
        env={"PATH": os.environ["PATH"]},
        budget_seconds=30,
        repo_root=workdir,
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("VALUE = 1\nOTHER = 1\n")
    (root / "README.md").write_text("hello\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("secret-ish\n")
    (tmp_path / "outside.txt").write_text("OUTSIDE\n")
    return root


def box(work: Path, phase: str = "implement", shell: bool = False) -> Toolbox:
    return Toolbox(spec(work, phase), SessionControl(), shell, {"PATH": os.environ["PATH"]})


# --- the tool list --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "verbs"),
    [
        ("plan", ["submit_plan", "escalate"]),
        ("plan-review", ["approve", "revise", "escalate"]),
        ("implement", ["done", "escalate"]),
        ("code-review", ["approve", "revise", "escalate"]),
        ("verify:security", ["pass", "fail", "escalate"]),
        ("finalize:docs", ["done", "escalate"]),
    ],
)
def test_each_phase_gets_its_verbs(phase: str, verbs: list[str]) -> None:
    names = [s.name for s in tool_specs(phase, shell=False)]
    files = ["read_file", "list_files", "search", "write_file", "edit_file"]
    assert names == [*files, *verbs, "context", "remember"]
    assert "shell" in [s.name for s in tool_specs(phase, shell=True)]


def test_schemas_suit_both_wire_formats() -> None:
    every = [
        *tool_catalog.FILE_TOOLS,
        tool_catalog.SHELL,
        tool_catalog.CONTEXT,
        *tool_catalog.VERB_TOOLS.values(),
    ]
    assert len({s.name for s in every}) == len(every)
    for tool in every:
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool.name)
        schema = tool.schema()
        assert schema["type"] == "object"
        assert set(schema["required"]) <= set(schema["properties"])
        assert all("type" in p for p in schema["properties"].values())


# --- confinement -----------------------------------------------------------------------


def test_confined_refuses_paths_out(work: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside.txt", work / "leak")
    os.symlink(work / "README.md", work / "inside")
    for bad in ("/etc/passwd", "../outside.txt", "src/../../outside.txt", "", "."):
        with pytest.raises(GuardError, match="refused to read outside the worktree"):
            confined(work, bad, "read")
    with pytest.raises(GuardError, match=r"leak \(through a symlink\)"):
        confined(work, "leak", "read")
    assert confined(work, "inside", "read") == (work / "README.md").resolve()
    assert confined(work, "./src/app.py") == (work / "src" / "app.py").resolve()


def test_refusals_come_back_as_results_and_nothing_is_touched(work: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, work / "up")
    b = box(work)
    for name, args in [
        ("read_file", {"path": "../outside.txt"}),
        ("read_file", {"path": "up/outside.txt"}),
        ("write_file", {"path": "up/new.txt", "content": "x"}),
        ("edit_file", {"path": "up/outside.txt", "old": "OUTSIDE", "new": "x"}),
        ("list_files", {"path": "up"}),
        ("search", {"pattern": "OUTSIDE", "path": "up"}),
        ("read_file", {"path": ".git/config"}),
        ("write_file", {"path": ".git/hooks/pre-commit", "content": "x"}),
        ("write_file", {"path": ".agentrun/prompts/plan.md", "content": "x"}),
    ]:
        result = b.call(name, args)
        assert result.error and result.text.startswith("refused: "), (name, args, result)
        assert "OUTSIDE" not in result.text
    assert (tmp_path / "outside.txt").read_text() == "OUTSIDE\n"
    assert not (tmp_path / "new.txt").exists()
    assert not (work / ".agentrun" / "prompts").exists()
    assert b.call("write_file", {"path": ".agentrun/run/notes.md", "content": "x"}).text == (
        "wrote .agentrun/run/notes.md (1 bytes)"
    )


def test_a_symlink_inside_the_worktree_is_judged_by_where_it_leads(work: Path) -> None:
    (work / ".agentrun" / "prompts").mkdir(parents=True)
    os.symlink(".git", work / "g")
    os.symlink(".agentrun/prompts", work / "p")
    os.symlink(".agentrun.toml", work / "c.toml")
    b = box(work)
    for name, args in [
        ("read_file", {"path": "g/config"}),
        ("write_file", {"path": "g/hooks/pre-commit", "content": "x"}),
        ("write_file", {"path": "p/plan.md", "content": "x"}),
        ("edit_file", {"path": "c.toml", "old": "a", "new": "b"}),
        ("list_files", {"path": "g"}),
    ]:
        result = b.call(name, args)
        assert result.error and result.text.startswith("refused: "), (name, args, result)
        assert "secret-ish" not in result.text
    assert list((work / ".agentrun" / "prompts").iterdir()) == []
    assert not (work / ".git" / "hooks").exists()
    assert not (work / ".agentrun.toml").exists()


def test_bad_arguments_and_unknown_tools(work: Path) -> None:
    b = box(work)
    assert b.call("read_file", {}).text == "refused: `path` is required and must be a string"
    assert b.call("read_file", {"path": 3}).error
    unknown = b.call("shell", {"command": "ls"})  # the shell is opt-in
    assert unknown.error and unknown.text.startswith("no tool named 'shell' here")
    assert b.call("approve", {}).text.startswith("no tool named 'approve'")  # not in implement


def test_a_tool_that_cannot_read_its_input_reports_it(work: Path) -> None:
    """A NUL in a path, a file not in UTF-8: the model hears of it, the run goes on."""
    (work / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    b = box(work)
    nul = b.call("read_file", {"path": "a\u0000b"})
    assert nul.error and nul.text.startswith("read_file failed:")
    edit = b.call("edit_file", {"path": "latin1.txt", "old": "caf", "new": "tea"})
    assert edit.error and "failed" in edit.text
    assert (work / "latin1.txt").read_bytes() == "caf\xe9\n".encode("latin-1")


# --- files -------------------------------------------------------------------------------


def test_read_list_and_search(work: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside.txt", work / "leak")
    (work / "blob.bin").write_bytes(b"\0\1\2OUTSIDE")
    b = box(work)
    assert b.call("read_file", {"path": "src/app.py"}).text == "VALUE = 1\nOTHER = 1\n"
    assert b.call("read_file", {"path": "nope.py"}).text == "no such file: nope.py"
    assert b.call("read_file", {"path": "blob.bin"}).text == "blob.bin is a binary file (10 bytes)"
    listed = b.call("list_files", {}).text.splitlines()
    assert listed == ["README.md", "blob.bin", "leak", "src/app.py"]  # .git left out
    assert b.call("list_files", {"path": "src"}).text == "src/app.py"
    # Links are never followed and binary files never read: nothing from outside.
    assert b.call("search", {"pattern": "OUTSIDE"}).text == "no match for 'OUTSIDE'"
    assert (
        b.call("search", {"pattern": "= 1"}).text
        == "src/app.py:1: VALUE = 1\nsrc/app.py:2: OTHER = 1"
    )
    found = b.call("search", {"pattern": r"^V\w+", "regex": True, "path": "src/app.py"})
    assert found.text == "src/app.py:1: VALUE = 1"
    assert b.call("search", {"pattern": "(", "regex": True}).text.startswith(
        "refused: `pattern` is not a valid regular expression"
    )
    assert b.call("search", {"pattern": "("}).text == "no match for '('"  # plain text


def test_list_and_search_skip_what_git_ignores(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    pygit2.init_repository(str(root))
    (root / ".gitignore").write_text("node_modules/\n.venv/\n*.log\n")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("/scratch.txt\n")
    for name in ("node_modules/left-pad/index.js", ".venv/lib/site.py", "src/app.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("needle = 1\n")
    (root / "src" / "debug.log").write_text("needle\n")
    (root / "scratch.txt").write_text("needle\n")
    (root / "src" / "new.py").write_text("needle = 2\n")  # untracked, not ignored
    b = box(root)

    assert b.call("list_files", {}).text.splitlines() == [".gitignore", "src/app.py", "src/new.py"]
    assert b.call("search", {"pattern": "needle"}).text.splitlines() == [
        "src/app.py:1: needle = 1",
        "src/new.py:1: needle = 2",
    ]
    # A folder asked for by name is walked, ignored or not.
    listed = b.call("list_files", {"path": "node_modules"}).text
    assert listed == "node_modules/left-pad/index.js"
    found = b.call("search", {"pattern": "needle", "path": ".venv"}).text
    assert found == ".venv/lib/site.py:1: needle = 1"


def test_the_file_cap_is_spent_on_files_git_keeps(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "node_modules").mkdir(parents=True)
    pygit2.init_repository(str(root))
    (root / ".gitignore").write_text("node_modules/\n")
    for n in range(tools.MAX_SEARCH_FILES + 5):
        (root / "node_modules" / f"m{n:05}.js").write_text("x\n")
    (root / "zz.py").write_text("needle\n")  # sorts after node_modules/

    assert box(root).call("search", {"pattern": "needle"}).text == "zz.py:1: needle"


def test_a_search_that_backtracks_for_ever_is_stopped_within_the_session(work: Path) -> None:
    (work / "many.txt").write_text("a" * 1999 + "\n")
    short = replace(spec(work), budget_seconds=1)
    b = Toolbox(short, SessionControl(), False, {"PATH": os.environ["PATH"]})

    # Left alone, this search would outlast the universe: it returns only if stopped.
    found = b.call("search", {"pattern": "(a|aa)+c", "regex": True})

    assert found.error
    assert found.text.startswith("refused: the search ran past 1.0 s"), found.text


def test_limits(work: Path) -> None:
    big = "x" * (tools.MAX_READ_CHARS + 10)
    (work / "big.txt").write_text(big)
    b = box(work)
    read = b.call("read_file", {"path": "big.txt"}).text
    assert read.startswith("x" * 100)
    assert read.endswith(f"[truncated: big.txt has {len(big)} bytes; shown the start]")
    too_big = "y" * (tools.MAX_WRITE_BYTES + 1)
    refused = b.call("write_file", {"path": "huge.txt", "content": too_big})
    assert refused.error and "limit" in refused.text
    assert not (work / "huge.txt").exists()
    for n in range(tools.MAX_MATCHES + 5):
        (work / f"m{n:03}.txt").write_text("needle\n")
    hits = b.call("search", {"pattern": "needle"}).text.splitlines()
    assert len(hits) == tools.MAX_MATCHES + 1
    assert hits[-1] == f"[stopped at {tools.MAX_MATCHES} matches]"
    many = work / "many"
    many.mkdir()
    for n in range(tools.MAX_LIST_ENTRIES + 1):
        (many / f"{n:05}").touch()
    listed = b.call("list_files", {"path": "many"}).text.splitlines()
    assert len(listed) == tools.MAX_LIST_ENTRIES + 1
    assert listed[-1] == "[more files not shown: list a folder]"


def test_write_and_edit(work: Path) -> None:
    b = box(work)
    assert b.call("write_file", {"path": "pkg/new.py", "content": "A = 1\n"}).text == (
        "wrote pkg/new.py (6 bytes)"
    )
    assert (work / "pkg" / "new.py").read_text() == "A = 1\n"
    edit = {"path": "src/app.py", "old": "= 1", "new": "= 2"}
    ambiguous = b.call("edit_file", edit)
    assert ambiguous.error and "occurs 2 times" in ambiguous.text
    assert (work / "src" / "app.py").read_text() == "VALUE = 1\nOTHER = 1\n"
    one = {**edit, "old": "VALUE = 1", "new": "VALUE = 3"}
    assert b.call("edit_file", one).text == "edited src/app.py (1 replacement)"
    (work / "src" / "app.py").write_text("VALUE = 1\nOTHER = 1\n")
    assert b.call("edit_file", {**edit, "replace_all": True}).text == (
        "edited src/app.py (2 replacements)"
    )
    assert (work / "src" / "app.py").read_text() == "VALUE = 2\nOTHER = 2\n"
    missing = b.call("edit_file", {**edit, "old": "NOPE"})
    assert missing.error and "was not found" in missing.text
    assert b.call("edit_file", {**edit, "old": ""}).error
    assert b.call("write_file", {"path": "src", "content": "x"}).text == "src is a folder"


# --- the shell -------------------------------------------------------------------------


def test_shell_runs_in_the_worktree(work: Path) -> None:
    b = box(work, shell=True)
    result = b.call("shell", {"command": "cat README.md; echo oops >&2; exit 3"})
    assert (result.text, result.error) == ("exit status 3\nhello\noops\n", True)
    assert b.call("shell", {"command": "pwd"}).text == f"exit status 0\n{work}\n"


def test_shell_is_bounded_by_the_session_budget_and_cancel(work: Path) -> None:
    b = box(work, shell=True)
    b.deadline = time.monotonic() + 0.5
    started = time.monotonic()
    result = b.call("shell", {"command": "echo started; sleep 600"})
    assert time.monotonic() - started < 120  # cut at its deadline, not after the sleep
    assert result.error and "timeout" in result.text and "started" in result.text
    b.deadline = time.monotonic() - 1
    assert b.call("shell", {"command": "echo hi"}).text == "not run: the session has no time left"
    control = SessionControl()
    cancelled = Toolbox(spec(work), control, True, {"PATH": os.environ["PATH"]})
    threading.Timer(0.3, control.cancel.set).start()
    result = cancelled.call("shell", {"command": "sleep 30"})
    assert result.error and "cancelled" in result.text


# --- verbs ---------------------------------------------------------------------------------


def test_verbs_are_validated_like_the_cli_verbs(
    repo_path: Path, repo: pygit2.Repository, work: Path
) -> None:
    # Outside any build: refused, not terminal.
    result = box(work).call("done", {"summary": "x"})
    assert result.error and not result.terminal
    # A finished build: the session is not the open one, so nothing is recorded.
    configure(repo_path)
    slug = create_build(repo, "Add a thing").slug
    run_build(repo, slug)
    before = len(payloads(repo, slug, "agent.done"))
    stale = Toolbox(spec(repo_path, build=slug, session="s-gone"), SessionControl(), False, {})
    refused = stale.call("done", {"summary": "late"})
    assert refused.error and not refused.terminal
    assert "is not the open session" in refused.text
    assert len(payloads(repo, slug, "agent.done")) == before
    bad = stale.call("done", {"summary": 3})
    assert bad.text == "refused: `summary` must be a string"
    revise = Toolbox(spec(repo_path, "code-review", slug), SessionControl(), False, {})
    assert revise.call("revise", {"findings": [1]}).text == (
        "refused: `findings` must be a list of strings"
    )
    context = stale.call("context", {})
    assert "# Build" in context.text and "Add a thing" in context.text
    assert context.text.endswith("[also written to .agentrun/run/context.md]")
