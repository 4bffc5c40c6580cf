"""The Action's job log and summary: escaped agent output, agentrun's own workflow
commands, a heartbeat while a session runs, and ``$GITHUB_STEP_SUMMARY``.

The attacker here is an agent (or a check, or an issue) that prints workflow commands
(``::error::``, ``::stop-commands::``, ``##[error]``) into the job log; the runner is
modelled as its source reads a line (``ActionCommand.TryParseV2`` / ``TryParse``).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import regex
from github_flow import Site, labeled, must
from hypothesis import given
from hypothesis import strategies as st
from support.prism import GitHubAPI

from agentrun.cli.progress import PROGRESS_SECONDS
from agentrun.errors import EXIT_FAILED, EXIT_USER
from agentrun.hosted.action_log import Escaped, command, escape_line, escape_text

SLUG = "issue-7-fix-the-greeting"
PR_URL = "https://github.com/octocat/Hello-World/pull/1347"
# Characters .NET's culture-aware StartsWith/IndexOf skip when comparing.
IGNORABLE = regex.compile(r"[\p{Cc}\p{Cf}\p{Mn}\p{Me}]")
OWN = ("::error title=agentrun::", "::notice title=agentrun::")
ATTACK = "printf '%s\\n' '::error::pwned' '::stop-commands::x' 'say ##[error]old-pwned'"


def runner_lines(log: str) -> list[str]:
    """The job log as the runner reads it: a line ends at \\r\\n, \\n or a lone \\r."""
    return re.split(r"\r\n|\r|\n", log)


def read_as_command(line: str) -> bool:
    visible = IGNORABLE.sub("", line)
    return visible.lstrip().startswith("::") or "##[" in visible


def commands_in(log: str) -> list[str]:
    return [line for line in runner_lines(log) if read_as_command(line)]


# --- the escape -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("::error::pwned", "\\::error::pwned"),
        ("  ::stop-commands::x", "  \\::stop-commands::x"),
        ("\t::add-mask::secret", "\t\\::add-mask::secret"),
        (":\u00ad:error::soft-hyphen", "\\:\u00ad:error::soft-hyphen"),
        ("\u200b::error::zero-width", "\u200b\\::error::zero-width"),
        ("text ##[error]old form", "text ##\\[error]old form"),
        ("#\u200b#[warning]x", "#\u200b#\\[warning]x"),
        # Ordinary lines stay as they were.
        ("see https://example.com::8080", "see https://example.com::8080"),
        ("a :: b", "a :: b"),
        ("# heading [x]", "# heading [x]"),
    ],
)
def test_a_line_the_runner_would_act_on_is_escaped(line: str, shown: str) -> None:
    assert escape_line(line) == shown
    assert not read_as_command(escape_line(line))


ALPHABET = st.sampled_from([":", ":", "#", "#", "[", " ", "\t", "\r", "\n", "a", "\u00ad",
                            "\u200b", "\u2028", "\x85", "\u0301", "\x0b"])  # fmt: skip


@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_no_escaped_text_holds_a_workflow_command(text: str) -> None:
    assert commands_in(escape_text(text)) == []


@given(st.lists(ALPHABET, max_size=40).map("".join), st.lists(st.integers(0, 40), max_size=6))
def test_the_stream_escapes_lines_however_they_are_split_into_writes(
    text: str, cuts: list[int]
) -> None:
    out = io.StringIO()
    stream = Escaped(out)
    at = 0
    for cut in sorted(cuts):
        stream.write(text[at:cut])
        at = max(at, cut)
    stream.write(text[at:])
    stream.finish()
    assert commands_in(out.getvalue()) == []
    assert out.getvalue().rstrip("\n") == escape_text(text).rstrip("\n")


def test_agentruns_own_commands_encode_their_data_on_one_line() -> None:
    said = command("error", "two\nlines 100%\r::error::x", title="a:b,c")
    assert said == "::error title=a%3Ab%2Cc::two%0Alines 100%25%0D::error::x"
    assert len(runner_lines(said)) == 1


def test_a_heartbeat_comes_at_least_every_30_seconds() -> None:
    assert 0 < PROGRESS_SECONDS <= 30


# --- `git agentrun action` as a job runs it ---------------------------------------------


@pytest.fixture
def site(tmp_path: Path, github_api: GitHubAPI) -> Site:
    github_api.clear()
    return Site(tmp_path, github_api)


def job_env(site: Site) -> dict[str, str]:
    return {
        "GITHUB_STEP_SUMMARY": str(site.root / "summary.md"),
        "AGENTRUN_PROGRESS_SECONDS": "1",
    }


def test_agent_and_check_output_never_becomes_a_workflow_command(site: Site) -> None:
    site.configure(
        [
            # A session's error reaches the log in its session.ended line.
            {"phase": "implement", "attempt": 1, "fail": "cut\r::error::fail-pwned"},
            {"phase": "implement", "run": f"{ATTACK}; sleep 2.5", "write": {"a.txt": "a\n"}},
        ],
        extra=f'[[verify]]\nname = "tests"\ncommand = "{ATTACK}; sleep 2.5"\n',
    )
    title = "Fix the greeting ::error::title-pwned"
    job = site.job(
        "issues", labeled(7, title, "::warning::body", "maintainer"), None, job_env(site)
    )

    done = job.run()
    log = done.stdout + done.stderr

    assert done.returncode == 0, log
    assert [line for line in commands_in(log) if not line.startswith(OWN)] == []
    slug = f"{SLUG}-error-title-pwned"
    assert f"::notice title=agentrun::build {slug}: {PR_URL}" in runner_lines(log)
    # The output did reach the log, escaped: from the sessions and the check.
    heartbeats = [line for line in runner_lines(log) if " running for " in line]
    assert any(line.startswith("     implement@1 running for ") for line in heartbeats), log
    assert any(line.startswith("     verify:tests@1 running for ") for line in heartbeats), log
    assert "say ##\\[error]old-pwned" in log
    assert any(line.startswith("\\::error::fail-pwned") for line in runner_lines(log)), log


def test_the_summary_shows_the_build_its_pull_request_and_each_phases_usage(site: Site) -> None:
    site.configure([], extra='[[verify]]\nname = "tests"\ncommand = "true"\n')
    job = site.job("issues", labeled(7, "Fix the greeting", "", "maintainer"), None, job_env(site))

    must(job.run())

    summary = (site.root / "summary.md").read_text()
    assert summary.startswith(f"### agentrun\n\nBuild `{SLUG}` · **complete** at done\n")
    assert f"\nPull request: {PR_URL}\n" in summary
    rows = [line for line in summary.splitlines() if line.startswith("| ")]
    assert rows[0] == "| phase | rounds | tokens | cost |"
    assert rows[1] == "| --- | --- | --- | --- |"
    phases = [row.split(" | ")[0].removeprefix("| ") for row in rows[2:]]
    assert phases == ["plan", "plan-review", "implement", "code-review", "**total**"], summary
    assert all(row.split(" | ")[1] == "1" for row in rows[2:-1])
    assert rows[-1].startswith("| **total** | 4 sessions | ")
    assert f"- build {SLUG} created for issue #7" in summary


def test_a_failed_build_fails_the_step_with_its_reason(site: Site) -> None:
    site.configure([])
    site.api.answer_with("POST", "/repos/octocat/Hello-World/pulls", 403)  # may not open one
    job = site.job("issues", labeled(7, "Fix the greeting", "", "maintainer"), None, job_env(site))

    done = job.run()

    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    errors = [line for line in runner_lines(done.stdout) if line.startswith("::error")]
    assert len(errors) == 1
    assert errors[0].startswith(f"::error title=agentrun::agentrun: build {SLUG} failed: ")
    assert "403" in errors[0]
    summary = (site.root / "summary.md").read_text()
    assert f"Build `{SLUG}` · **failed**" in summary
    assert "**Failed:** build" in summary


def test_a_user_error_fails_the_step_with_its_one_line(site: Site) -> None:
    site.configure([])
    env = job_env(site)
    job = site.job("issues", labeled(7, "T", "", "maintainer"), None, env, ("--config", "no.toml"))

    done = job.run()

    assert done.returncode == EXIT_USER
    assert runner_lines(done.stdout)[-2:] == [
        "::error title=agentrun::agentrun: there is no no.toml on main",
        "",
    ]
    assert done.stderr == "agentrun: there is no no.toml on main\n"
    assert "**Failed:** there is no no.toml on main" in (site.root / "summary.md").read_text()


def test_outside_actions_there_is_no_summary_and_no_workflow_command(site: Site) -> None:
    site.configure([{"phase": "implement", "run": ATTACK, "write": {"a.txt": "a\n"}}])
    env = {**job_env(site), "GITHUB_ACTIONS": "false"}
    job = site.job("issues", labeled(7, "Fix the greeting", "", "maintainer"), None, env)

    out = must(job.run())

    assert not (site.root / "summary.md").exists()
    assert not any(line.startswith("::") for line in out.splitlines())


def test_an_error_that_quotes_a_command_is_escaped_too(site: Site) -> None:
    """An error's text can quote what the repository holds (here a config key with a
    line break in it): the line agentrun prints on stderr after the step is escaped."""
    site.configure([], extra='[forge]\n"a\\n::error::config-pwned" = 1\n')
    job = site.job("issues", labeled(7, "T", "", "maintainer"), None, job_env(site))

    done = job.run()

    assert done.returncode == EXIT_USER
    log = done.stdout + done.stderr
    assert [line for line in commands_in(log) if not line.startswith(OWN)] == []
    assert "\\::error::config-pwned`: unknown key" in done.stderr.splitlines()
    (own,) = commands_in(done.stdout)
    said = "main:.agentrun.toml at `forge.a ::error::config-pwned`: unknown key"
    assert own == f"::error title=agentrun::agentrun: {said}"  # data, on one line
