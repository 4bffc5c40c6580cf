"""The runner keeps the state cache (DESIGN §2) where other processes read it: an agent's
verbs find it at the tip their session started on, and the next reader at the end."""

from __future__ import annotations

from pathlib import Path

import pygit2
from runner.helpers import configure

from agentrun.commands.build import create_build, run_build
from agentrun.store.cache import StateCache
from agentrun.store.log import EventLog

# What the agent sees: the log's tip, then the tip the state cache holds.
SEE = (
    'git --git-dir="$AGENTRUN_GIT_DIR" rev-parse "refs/agentrun/builds/$AGENTRUN_BUILD" > {out}'
    " && python3 -c 'import json, os, sys; "
    'path = os.environ["AGENTRUN_GIT_DIR"] + "/agentrun/cache/" + os.environ["AGENTRUN_BUILD"]; '
    'print(json.load(open(path + ".json"))["tip"])\' >> {out}'
)


def test_an_agent_finds_the_state_cache_at_its_sessions_tip_and_the_run_leaves_it_at_the_end(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.txt"
    configure(repo_path, [{"phase": "code-review", "run": SEE.format(out=seen)}])
    slug = create_build(repo, "Add a file").slug

    assert run_build(repo, slug).state.state_name == "complete"

    log_tip, cached_tip = seen.read_text().split()
    assert cached_tip == log_tip
    cached = StateCache(repo).get(slug)
    assert cached is not None and cached[0] == EventLog(repo).tip_oid(slug)
    assert cached[1].state_name == "complete"
