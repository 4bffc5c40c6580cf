"""Best of N for real: `[candidates]` runs an implement round as candidates side by side,
each in its own worktree on its own runtime; each is verified; one goes on."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pygit2
import pytest
from runner.helpers import (
    configure,
    events,
    git,
    only_slug,
    payloads,
    run_cli,
    script_runtimes,
)

from agentrun.events import Event

GOAL = "Make the answer good"
CHECK = '[[verify]]\nname = "good"\ncommand = "grep -q good answer.txt"\n'


def answers(text: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"phase": "implement", "write": {"answer.txt": text}, **extra}]


def of(log: list[Event], kind: str) -> list[Event]:
    return [e for e in log if e.type == kind]


def test_the_smallest_passing_candidate_goes_on_and_the_others_are_kept(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    tables = script_runtimes(
        repo_path,
        {
            "bad": answers("bad\n"),
            "long": answers("good\nand\nmore\nlines\n"),
            "short": answers("good\n"),
        },
    )
    extra = f'{tables}\n[candidates]\nimplement = ["bad", "long", "short"]\n{CHECK}'
    configure(repo_path, extra=extra)
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    slug = only_slug(repo_path)
    log = events(repo, slug)
    started = of(log, "candidates.started")
    assert [(e.payload.round, e.payload.runtimes) for e in started] == [
        (1, ("bad", "long", "short"))
    ]
    runs = {e.task: e.payload.runtime for e in of(log, "session.started") if e.task}
    assert runs == {"c1": "bad", "c2": "long", "c3": "short"}
    verdicts = {e.task: e.payload.outcome for e in of(log, "verify.completed") if e.task}
    assert verdicts == {"c1": "fail", "c2": "pass", "c3": "pass"}
    chosen = [e.payload for e in of(log, "candidate.chosen")]
    assert [(p.candidate, p.passed) for p in chosen] == [("c3", True)]
    assert "smallest passing diff" in chosen[0].reason
    tree = repo.revparse_single(f"agentrun/{slug}").peel(pygit2.Tree)
    assert (tree / "answer.txt").data == b"good\n"  # type: ignore[attr-defined]
    for n, text in ((1, b"bad\n"), (2, b"good\nand\nmore\nlines\n"), (3, b"good\n")):
        kept = repo.references[f"refs/agentrun/candidates/{slug}/1/{n}"]
        blob = repo[kept.target].peel(pygit2.Tree) / "answer.txt"  # type: ignore[attr-defined]
        assert blob.data == text
    # Every candidate's spend is the build's.
    spent = sum(p.usage.tokens for p in payloads(repo, slug, "session.ended"))
    status = json.loads(run_cli(repo_path, "status", "--json").stdout)["builds"][0]
    assert status["usage"]["tokens_in"] + status["usage"]["tokens_out"] == spent
    assert status["state"] == "complete"
    shown = run_cli(repo_path, "show", slug).stdout
    assert "candidates (3):" in shown
    rows = {line.split()[1]: line for line in shown.splitlines() if line.startswith("  1 ")}
    assert "chosen" in rows["c3"] and "failed (1 step(s))" in rows["c1"]
    assert f"kept as refs/agentrun/candidates/{slug}/1/2" in rows["c2"]
    body = run_cli(repo_path, "pulls", "show", "1").stdout
    assert "| 1 | `c3` | short | passed | chosen |" in body
    assert "| 1 | `c1` | bad | failed | kept |" in body


def test_the_select_agent_picks_among_the_passing_candidates(
    repo_path: Path, repo: pygit2.Repository, tmp_path: Path
) -> None:
    """A select agent (a command) first answers a number it was not offered (exit 1,
    nothing recorded), then 1: the first passing candidate, the longer one."""
    program = tmp_path / "chooser.py"
    program.write_text(
        "import subprocess, sys\n"
        "from pathlib import Path\n"
        "prompt = sys.stdin.read()\n"
        f"out = Path({json.dumps(str(tmp_path))})\n"
        "(out / 'prompt.txt').write_text(prompt)\n"
        "verb = ['git', 'agentrun', 'agent', 'select']\n"
        "bad = subprocess.run([*verb, '3'], capture_output=True, text=True)\n"
        "(out / 'bad.txt').write_text(f'{bad.returncode}\\n{bad.stderr}')\n"
        "subprocess.run([*verb, '1'], check=True)\n"
    )
    tables = script_runtimes(
        repo_path, {"long": answers("good\nand more\n"), "short": answers("good\n")}
    )
    argv = json.dumps([sys.executable, str(program)])
    select = f'[runtimes.chooser]\nkind = "command"\ncommand = {argv}\n'
    extra = f'{tables}\n{select}\n[candidates]\nimplement = ["long", "short"]\n{CHECK}'
    configure(repo_path, extra=extra)
    config = (repo_path / ".agentrun.toml").read_text()
    (repo_path / ".agentrun.toml").write_text(
        config.replace('default = ["scripted"]', 'default = ["scripted"]\nselect = ["chooser"]')
    )
    git(repo_path, "commit", "-qam", "a select role")
    done = run_cli(repo_path, "run", GOAL, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    slug = only_slug(repo_path)
    log = events(repo, slug)
    assert [e.payload.offered for e in of(log, "select.started")] == [("c1", "c2")]
    assert [e.payload.number for e in of(log, "candidate.selected")] == [1]
    chosen = of(log, "candidate.chosen")[0].payload
    assert (chosen.candidate, chosen.reason) == ("c1", "long: the select agent chose it")
    code, said = (tmp_path / "bad.txt").read_text().split("\n", 1)
    assert code == "1" and "candidate 3 was not offered: answer a number from 1 to 2" in said
    prompt = (tmp_path / "prompt.txt").read_text()
    assert "## Candidate 1 (long)" in prompt and "## Candidate 2 (short)" in prompt
    assert "+and more" in prompt and "Verify: good pass" in prompt


def test_with_none_passing_the_fewest_failures_go_on_into_the_next_round(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    both = CHECK + '[[verify]]\nname = "named"\ncommand = "test -f NAME"\n'
    tables = script_runtimes(
        repo_path,
        {
            "worse": [
                *answers("bad\n", round=1),
                *answers("good\n", write={"answer.txt": "good\n", "NAME": "x"}),
            ],
            "better": [
                *answers("good\n", round=1),
                *answers("good\n", write={"answer.txt": "good\n", "NAME": "y\n"}),
            ],
        },
    )
    configure(repo_path, extra=f'{tables}\n[candidates]\nimplement = ["worse", "better"]\n{both}')
    done = run_cli(repo_path, "run", GOAL, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    log = events(repo, only_slug(repo_path))
    chosen = [e.payload for e in of(log, "candidate.chosen")]
    assert (chosen[0].round, chosen[0].candidate, chosen[0].passed) == (1, "c2", False)
    assert "fewest failing steps (1)" in chosen[0].reason
    second = [e.payload for e in of(log, "implement.started") if e.task and e.payload.round == 2]
    assert second and all(
        "`named` failed in round 1 (candidate c2)" in p.feedback[-1] for p in second
    )
    assert chosen[-1].round == 2 and chosen[-1].passed


def test_count_runs_the_implement_role_s_runtime_that_many_times(
    repo_path: Path, repo: pygit2.Repository
) -> None:
    configure(repo_path, answers("good\n"), extra=f"[candidates]\ncount = 3\n{CHECK}")
    assert run_cli(repo_path, "run", GOAL, timeout=120).returncode == 0
    log = events(repo, only_slug(repo_path))
    assert of(log, "candidates.started")[0].payload.runtimes == ("scripted",) * 3
    chosen = of(log, "candidate.chosen")[0].payload
    assert chosen.candidate == "c1"  # three equal diffs: the lowest number


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('implement = ["scripted"]', "implement needs two runtimes or more"),
        (
            'implement = ["scripted", "scripted"]\ncount = 2',
            "give implement (the runtimes) or count, not both",
        ),
        ("count = 1", "candidates.count"),
        ('implement = ["scripted", "nope"]', "no runtime 'nope'"),
    ],
)
def test_a_wrong_candidates_table_is_one_line_and_exit_1(
    repo_path: Path, table: str, said: str
) -> None:
    configure(repo_path, extra=f"[candidates]\n{table}\n")
    done = run_cli(repo_path, "run", GOAL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not run_cli(repo_path, "status", "--json").stdout.count('"slug"')
