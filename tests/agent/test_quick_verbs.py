"""The agent verbs' quick path, in a real session: what it loads, what it writes, what it
refuses — each the same as the full path's.

A real build runs in the background; its implement agent (a command agent) writes its
environment and waits, so the test runs ``git agentrun agent …`` as that agent would:
through the runner's ``git-agentrun`` on PATH, in the worktree, with ``AGENTRUN_*`` set.
The full path is the click application's own ``agent`` command, run in a process of its
own with the same environment: it loads the models and reads the log through them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from runner.helpers import (
    SCRIPTED_BUT_IMPLEMENT,
    Background,
    command_agent,
    configure,
    events,
    only_slug,
    wait_for,
)

from agentrun.agent.context import PLAN_APPROVAL
from agentrun.agent.outbox import OUTBOX
from agentrun.cli.quickverbs import parse
from agentrun.events import AgentDone
from agentrun.kernel import approval
from agentrun.kernel.rules import Speaker, VerbReport
from agentrun.kernel.state import BuildState, OpenSession
from agentrun.kernel.verbs import AgentEnv, speaker, verb_draft
from agentrun.store.cache import StateCache, load_state
from agentrun.store.log import EventLog

pytestmark = pytest.mark.slow

GOAL = "Add the feature"

# The implement agent: says where it runs, then waits for the test to say "go".
WAITING_AGENT = """\
import json, os, sys, time
from pathlib import Path

sys.stdin.read()
state = Path(os.environ["AGENT_STATE"])
(state / "session.json").write_text(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))
while not (state / "go").exists():
    time.sleep(0.05)
Path("feature.txt").write_text("made by the waiting agent\\n")
"""

# Modules the verbs' quick path must not load (beyond what a bare interpreter here has).
HEAVY = (
    "pydantic",
    "pygit2",
    "click",
    "rich",
    "httpx",
    "psutil",
    "regex",
    "agentrun.events",
    # The kernel package itself is empty: the quick path imports kernel.rules alone.
    "agentrun.kernel.state",
    "agentrun.kernel.evolve",
    "agentrun.kernel.decide",
    "agentrun.kernel.verbs",
    "agentrun.store.log",
    "agentrun.store.cache",
    "agentrun.cli.app",
    "typing",
    "dataclasses",
    "subprocess",
)

# `git agentrun ARGS` without the quick path: the click application's command itself.
FULL = """\
import sys
from agentrun.cli.app import cli
cli.main(sys.argv[1:], prog_name="git agentrun")
"""

# Runs `git agentrun ARGS` in this process as the console script does (or the click
# application, FULL), then lists the modules that were loaded, whatever the verb's exit.
PROBE = """\
import sys
out, full, args = sys.argv[1], sys.argv[2] == "full", sys.argv[3:]
if args:
    sys.argv = ["git-agentrun", *args]
    try:
        if full:
            from agentrun.cli.app import cli
            cli.main(args, prog_name="git agentrun")
        else:
            from agentrun.cli.main import main
            main()
    except SystemExit:
        pass
with open(out, "w") as fh:
    fh.write("\\n".join(sorted(sys.modules)))
"""


@dataclass
class Session:
    repo_path: Path
    slug: str
    env: dict[str, str]
    cwd: Path
    state_dir: Path
    runner: Background

    @property
    def session(self) -> str:
        return self.env["AGENTRUN_SESSION"]

    def run(
        self, *args: str, full: bool = False, **changes: str
    ) -> subprocess.CompletedProcess[str]:
        """``git agentrun ARGS`` as the agent runs it (``full``: without the quick path)."""
        env = {**self.env, **changes}
        cmd = [sys.executable, "-c", FULL] if full else ["git", "agentrun"]
        return subprocess.run([*cmd, *args], cwd=self.cwd, env=env, capture_output=True, text=True)

    def loaded(self, *args: str, full: bool = False) -> set[str]:
        """The modules ``git agentrun ARGS`` loads, less those of a bare interpreter."""

        def modules(*argv: str) -> set[str]:
            out = self.state_dir / "modules.txt"
            cmd = [sys.executable, "-c", PROBE, str(out), "full" if full else "quick", *argv]
            subprocess.run(cmd, cwd=self.cwd, env=self.env, check=True, capture_output=True)
            return set(out.read_text().split())

        return modules(*args) - modules()

    def queued(self) -> list[Path]:
        return sorted((self.cwd / OUTBOX).glob("*.json"))

    def clear(self) -> None:
        for path in self.queued():
            path.unlink()


@pytest.fixture
def live(tmp_path: Path, repo_path: Path) -> Iterator[Session]:
    """A build whose implement session is open, its agent waiting."""
    table, state_dir = command_agent(tmp_path, source=WAITING_AGENT)
    configure(repo_path, base=SCRIPTED_BUT_IMPLEMENT, extra=table)
    runner = Background(repo_path, "run", GOAL)
    try:
        slug = only_slug(repo_path)
        info = state_dir / "session.json"
        wait_for(info.exists, "the implement agent to start")
        found = json.loads(info.read_text())
        yield Session(repo_path, slug, found["env"], Path(found["cwd"]), state_dir, runner)
    finally:
        (state_dir / "go").write_text("")
        runner.stop()


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY)


def test_context_and_done_load_none_of_the_heavy_modules(live: Session) -> None:
    assert heavy_in(live.loaded("agent", "context")) == []
    assert heavy_in(live.loaded("agent", "done", "--summary", "x")) == []
    assert len(live.queued()) == 1
    live.clear()
    # A refusal too: it is said without the models.
    assert heavy_in(live.loaded("agent", "approve")) == []
    # The full path does load them: the probe tells the two apart.
    assert "pydantic" in live.loaded("agent", "context", full=True)


def test_context_is_what_the_full_path_writes(live: Session) -> None:
    quick = live.run("agent", "context")
    assert (quick.returncode, quick.stderr) == (0, "")
    written = live.cwd / ".agentrun" / "run" / "context.md"
    assert quick.stdout == f"{written}\n"
    quick_text = written.read_text()
    written.unlink()

    full = live.run("agent", "context", full=True)
    assert (full.returncode, full.stdout, full.stderr) == (0, quick.stdout, "")
    assert quick_text == written.read_text()
    # The approved plan is read from the log's artifacts, and the runtime asks for usage.
    assert "## Approved plan" in quick_text
    assert "git agentrun agent usage" in quick_text


def test_packed_refs_and_objects_are_read_the_same(live: Session) -> None:
    full = live.run("agent", "context", full=True)
    expected = Path(full.stdout.strip()).read_text()
    git = ["git", "-C", str(live.repo_path)]
    subprocess.run([*git, "pack-refs", "--all"], check=True)
    subprocess.run([*git, "repack", "-adq"], check=True)
    assert not (live.repo_path / ".git" / "refs" / "agentrun" / "builds" / live.slug).exists()

    assert heavy_in(live.loaded("agent", "context")) == []
    assert Path(live.run("agent", "context").stdout.strip()).read_text() == expected


def test_a_queued_report_is_the_full_paths_and_the_runner_appends_it(live: Session) -> None:
    full = live.run("agent", "done", "--summary", "added feature.txt", full=True)
    assert full.returncode == 0, full.stderr
    (request,) = live.queued()
    by_full = request.read_bytes()
    live.clear()

    quick = live.run("agent", "done", "--summary=added feature.txt")
    assert (quick.returncode, quick.stdout, quick.stderr) == (0, full.stdout, "")
    (request,) = live.queued()
    assert request.read_bytes() == by_full
    assert quick.stdout.startswith("done queued in .agentrun/run/outbox/0001.json; ")

    repo = pygit2.Repository(str(live.repo_path))
    _, before = load_state(EventLog(repo), StateCache(repo), live.slug)
    env = AgentEnv(live.slug, "implement", 1, live.session)
    draft, _ = verb_draft(before, env, VerbReport("done", "added feature.txt"), str)
    (live.state_dir / "go").write_text("")
    # The runner drains the outbox after the turn: the event in the log, decoded by the
    # models, is the one the model path makes.
    wait_for(lambda: any(e.type == "build.completed" for e in events(repo, live.slug)), "the end")
    (done,) = [e for e in events(repo, live.slug) if e.type == "agent.done"]
    assert done.payload == draft.payload
    assert done.actor == draft.actor


@pytest.mark.parametrize(
    ("args", "changes", "message"),
    [
        (["approve"], {}, "`approve` does not fit phase implement; use one of: done, escalate"),
        (["done"], {"AGENTRUN_SESSION": "s-00000000"}, None),
        (
            ["done"],
            {"AGENTRUN_PHASE": "implement@2"},
            "session {session} runs implement@1, not implement@2; nothing recorded",
        ),
        (["done"], {"AGENTRUN_PHASE": "implement"}, None),
    ],
)
def test_refusals_say_what_the_full_path_says_and_queue_nothing(
    live: Session, args: list[str], changes: dict[str, str], message: str | None
) -> None:
    quick = live.run("agent", *args, **changes)
    full = live.run("agent", *args, full=True, **changes)
    assert (quick.returncode, quick.stdout) == (1, "")
    assert (full.returncode, full.stdout, full.stderr) == (1, "", quick.stderr)
    if message is not None:
        assert quick.stderr == f"agentrun: {message.format(session=live.session)}\n"
    assert live.queued() == []


def test_a_second_report_while_the_first_waits_is_refused(live: Session) -> None:
    first = live.run("agent", "done")
    assert first.returncode == 0, first.stderr
    again = live.run("agent", "done", "--summary", "twice")
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == (
        f"agentrun: session {live.session} already queued a report (0001.json); nothing queued\n"
    )
    assert len(live.queued()) == 1


def test_a_cache_behind_the_log_takes_the_full_path(live: Session) -> None:
    live.runner.stop()  # else it would mend the cache; the session stays open in the log
    cache = live.repo_path / ".git" / "agentrun" / "cache" / f"{live.slug}.json"
    data = json.loads(cache.read_text())
    data["tip"] = "0" * 40
    cache.write_text(json.dumps(data))

    assert "pydantic" in live.loaded("agent", "done")
    live.clear()
    done = live.run("agent", "done")
    assert done.returncode == 0, done.stderr
    assert json.loads(cache.read_text())["tip"] == "0" * 40  # a verb never writes the cache


def test_help_and_usage_errors_are_clicks(live: Session) -> None:
    helped = live.run("agent", "done", "--help")
    assert helped.returncode == 0
    assert "Finish an implement, reconcile or finalize phase." in helped.stdout
    missing = live.run("agent", "fail")
    assert missing.returncode == 2
    assert "Missing option '--reason'" in missing.stderr
    assert live.run("agent", "done", "--bogus").returncode == 2
    assert live.queued() == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["context"], VerbReport("context")),
        (["approve"], VerbReport("approve")),
        (["pass"], VerbReport("pass")),
        (["done"], VerbReport("done")),
        (["done", "--summary", "s"], VerbReport("done", "s")),
        (["done", "--summary="], VerbReport("done", "")),
        (["fail", "--reason", "r"], VerbReport("fail", "r")),
        (["revise", "--finding", "a", "--finding=b"], VerbReport("revise", findings=("a", "b"))),
        # Everything else is click's to parse, help with or refuse.
        ([], None),
        (["context", "--help"], None),
        (["done", "--summary"], None),
        (["done", "--summary", "-x"], None),
        (["done", "--summary", "a", "--summary", "b"], None),
        (["done", "extra"], None),
        (["fail"], None),
        (["revise"], None),
        (["plan", "p.md"], None),
        (["escalate", "why?"], None),
        (["remember", "a fact"], None),
        (["usage", "--tokens-in", "1", "--tokens-out", "1"], None),
    ],
)
def test_the_quick_parser_takes_only_the_plain_forms(
    args: list[str], expected: VerbReport | None
) -> None:
    assert parse(args) == expected


@pytest.mark.parametrize("report", [None, AgentDone(session="s-1", summary_text="x")])
def test_the_cached_session_speaks_as_the_models_do(report: AgentDone | None) -> None:
    opened = OpenSession(
        session="s-1", phase="implement", round=2, role="implement", runtime="a", report=report
    )
    state = BuildState(slug="b", session=opened)
    cached = json.loads(json.dumps(state.model_dump(mode="json")))

    assert Speaker.from_json(cached["session"]) == speaker(state)
    assert speaker(state) == Speaker("s-1", "implement", 2, report and "agent.done")
    assert Speaker.from_json(None) is speaker(BuildState(slug="b")) is None


def test_the_plan_approval_cause_is_the_kernels() -> None:
    assert PLAN_APPROVAL == approval.CAUSE


def test_the_state_cache_is_readable_by_an_isolated_agents_account(
    repo: pygit2.Repository,
) -> None:
    StateCache(repo).put("b", "0" * 40, BuildState(slug="b"))
    cached = Path(repo.path) / "agentrun" / "cache" / "b.json"
    assert cached.stat().st_mode & 0o777 == 0o644
