"""``git agentrun agent plan FILE`` with a file that is not text: one line, exit 1."""

from __future__ import annotations

from pathlib import Path

from runner.helpers import run_verb


def test_a_plan_that_is_not_utf8_is_refused_in_one_line(repo_path: Path) -> None:
    plan = repo_path / "plan.md"
    plan.write_bytes(b"1. fix it\n\xff\xfe\n")
    done = run_verb(repo_path, "some-build", "plan@1", "s-1", "plan", str(plan))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"agentrun: the plan {plan} is not UTF-8 text (byte 10)"
    ]
