"""Secret values never reach git: whoever plants them, wherever (issue 9, item 4).

Every test runs real ``git agentrun`` processes against a real repository (a ``command``
agent, or the Action with a scripted one), plants a value the config marks secret or a
runtime's credential, then reads back every object of the repository.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pygit2
from action.github_flow import Site, commented, comments, labeled, must, permissions, remote_events
from runner.helpers import CONFIG, WAIT_SECONDS, cli_env, events, git, payloads, tip
from support.prism import GitHubAPI

from agentrun.store.log import EventLog

VALUE = "zq9V-s3cret-Value-7781"
SHORT = "k7Qx2mZp"  # 8 characters: the shortest value agentrun treats as a secret
REDACTED = "[redacted]"
HEARTBEAT = {"AGENTRUN_LEASE_TTL": "2"}  # a heartbeat every half second


def objects(repo_path: Path) -> bytes:
    """Every object of the repository, reachable or not."""
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo_path,
        capture_output=True,
        check=True,
    )
    return done.stdout


def holding(repo_path: Path, value: str) -> list[str]:
    """The ids of the objects whose content holds ``value``."""
    listed = git(repo_path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    repo = pygit2.Repository(str(repo_path))
    return [oid for oid in listed.split() if value.encode() in repo[oid].read_raw()]


def agentrun(
    repo_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", *args],
        cwd=repo_path,
        env=cli_env({**HEARTBEAT, **(env or {})}),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS * 4,
    )


# The agent knows the value from its own program text: the runner removed the variable
# from its environment, as it does for every `[secrets] env` name.
AGENT = """\
import os, subprocess, sys, time
from pathlib import Path

VALUE, STATE = {value!r}, Path({state!r})
sys.stdin.read()
phase = os.environ["AGENTRUN_PHASE"]
family, round_ = phase.split("@")[0].split(":")[0], int(phase.rsplit("@", 1)[1])
print(f"agent: {{phase}} sees MY_SECRET={{os.environ.get('MY_SECRET')!r}}", flush=True)


def verb(*args):
    done = subprocess.run(["git", "agentrun", "agent", *args], capture_output=True, text=True)
    print(f"agent: {{args[0]}} -> {{done.returncode}} {{done.stdout.strip()}}", flush=True)
    if done.returncode:
        print(done.stderr, flush=True)
        sys.exit(done.returncode)


def logged(kind):
    log = subprocess.run(
        ["git", "--git-dir", os.environ["AGENTRUN_GIT_DIR"], "log", "--format=%s",
         "refs/agentrun/builds/" + os.environ["AGENTRUN_BUILD"]],
        capture_output=True, text=True,
    ).stdout
    return any(line.startswith(kind + ":") for line in log.splitlines())


if family == "plan":
    Path(".agentrun/run/plan.md").write_text(f"1. Wire in {{VALUE}}.\\n")
    verb("plan", ".agentrun/run/plan.md")
elif family == "code-review" and round_ == 1:
    verb("revise", "--finding", f"do not hard-code {{VALUE}}")
elif family in ("plan-review", "code-review"):
    verb("approve")
elif family == "implement" and not (STATE / "asked").exists():
    (STATE / "asked").write_text("")
    verb("escalate", f"may I use {{VALUE}}?")
    # The agent keeps running: the runner records the question at its next heartbeat.
    for _ in range(300):
        if logged("escalation.raised"):
            (STATE / "seen-while-running").write_text(phase)
            break
        time.sleep(0.1)
elif family == "implement":
    Path("feature.txt").write_text(f"round {{round_}}\\n")
    verb("done", "--summary", f"kept {{VALUE}} out")
else:
    verb("pass")
"""


def configure(repo_path: Path, tmp_path: Path, table: str, agent: str = AGENT) -> Path:
    state = tmp_path / "agent-state"
    state.mkdir()
    program = tmp_path / "agent.py"
    program.write_text(agent.format(value=VALUE, state=str(state)))
    config = f"""\
[roles]
default = ["agent"]

[runtimes.agent]
kind = "command"
command = [{json.dumps(sys.executable)}, {json.dumps(str(program))}]
{table}
[secrets]
env = ["MY_SECRET"]
"""
    (repo_path / CONFIG).write_text(config)
    git(repo_path, "add", CONFIG)
    git(repo_path, "commit", "-q", "-m", "configure agentrun")
    return state


def only_build(repo: pygit2.Repository) -> str:
    (slug,) = EventLog(repo).slugs()
    return slug


def test_what_agents_and_people_report_never_carries_a_secret_value(
    repo_path: Path, tmp_path: Path
) -> None:
    configure(repo_path, tmp_path, "")
    secret = {"MY_SECRET": VALUE}

    started = agentrun(repo_path, "run", "Add the feature", env=secret)
    repo = pygit2.Repository(str(repo_path))
    slug = only_build(repo)
    assert started.returncode == 4, started.stdout + started.stderr  # parked on its question
    (raised,) = payloads(repo, slug, "escalation.raised")
    answered = agentrun(repo_path, "answer", slug, f"yes, use {VALUE}", env=secret)
    assert answered.returncode == 0, answered.stderr
    resumed = agentrun(repo_path, "resume", slug, env=secret)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    repo = pygit2.Repository(str(repo_path))
    assert payloads(repo, slug, "build.completed")
    # Every place was really planted, and holds the scrubbed text.
    log = EventLog(repo)
    head = tip(repo, slug) or ""
    plans = [log.text(head, p.plan) for p in payloads(repo, slug, "plan.submitted")]
    assert plans == [f"1. Wire in {REDACTED}.\n"]
    findings = [f for p in payloads(repo, slug, "code-review.verdict") for f in p.findings]
    assert findings == [f"do not hard-code {REDACTED}"]
    assert raised.question == f"may I use {REDACTED}?"
    assert [p.answer for p in payloads(repo, slug, "escalation.answered")] == [
        f"yes, use {REDACTED}"
    ]
    summaries = {p.summary_text for p in payloads(repo, slug, "agent.done")}
    assert summaries == {f"kept {REDACTED} out"}
    assert VALUE.encode() not in objects(repo_path)
    # The agent's environment never held the value either.
    for started_event in payloads(repo, slug, "session.started"):
        text = log.text(tip(repo, slug) or "", f"transcript-{started_event.session}.txt") or ""
        assert "sees MY_SECRET=None" in text


def test_an_escalation_is_recorded_while_the_agent_still_runs(
    repo_path: Path, tmp_path: Path
) -> None:
    """The outbox is drained at every heartbeat, not only after the turn."""
    state = configure(repo_path, tmp_path, "")

    started = agentrun(repo_path, "run", "Add the feature", env={"MY_SECRET": VALUE})

    assert started.returncode == 4, started.stdout + started.stderr  # parked on its question
    # The agent saw its question in the log before it exited.
    assert (state / "seen-while-running").read_text() == "implement@1"
    repo = pygit2.Repository(str(repo_path))
    slug = only_build(repo)
    kinds = [(e.type, getattr(e.payload, "session", None)) for e in events(repo, slug)]
    (raised,) = payloads(repo, slug, "escalation.raised")
    ended = kinds.index(("session.ended", raised.session))
    assert kinds.index(("escalation.raised", raised.session)) < ended
    transcript = EventLog(repo).text(tip(repo, slug) or "", f"transcript-{raised.session}.txt")
    assert transcript is not None
    assert "agent: escalate -> 0 escalate queued in .agentrun/run/outbox/0001.json" in transcript
    assert "outbox 0001.json: escalation e1 raised" in transcript


PLAIN_AGENT = """\
import os, subprocess, sys
from pathlib import Path

STATE = Path({state!r})
sys.stdin.read()
family = os.environ["AGENTRUN_PHASE"].split("@")[0].split(":")[0]
print("agent: key=" + os.environ.get("AGENT_API_KEY", "") + " token=" + os.environ.get(
    "AGENT_TOKEN", ""), flush=True)
args = {{"plan-review": ["approve"], "code-review": ["approve"], "verify": ["pass"]}}
if family == "plan":
    key, token = os.environ.get("AGENT_API_KEY", ""), os.environ.get("AGENT_TOKEN", "")
    Path(".agentrun/run/plan.md").write_text(f"1. Use {{key}} and {{token}}.\\n")
    args["plan"] = ["plan", ".agentrun/run/plan.md"]
if family == "implement":
    Path("feature.txt").write_text("made\\n")
    args["implement"] = ["done", "--summary", "key " + os.environ.get("AGENT_API_KEY", "")]
(STATE / f"saw-{{family}}").write_text(os.environ.get("AGENT_API_KEY", "") + " "
                                       + os.environ.get("AGENT_TOKEN", ""))
subprocess.run(["git", "agentrun", "agent", *args[family]], check=True)
"""


def test_a_goal_with_a_short_secret_value_names_nothing_after_it(
    repo_path: Path, tmp_path: Path
) -> None:
    configure(repo_path, tmp_path, "", agent=PLAIN_AGENT)

    done = agentrun(repo_path, "run", f"Rotate {SHORT} in the cache", env={"MY_SECRET": SHORT})

    assert done.returncode == 0, done.stdout + done.stderr
    repo = pygit2.Repository(str(repo_path))
    slug = only_build(repo)
    assert slug == "rotate-redacted-in-the-cache"
    (created,) = payloads(repo, slug, "build.created")
    assert created.goal == f"Rotate {REDACTED} in the cache"
    assert created.branch == f"agentrun/{slug}"
    bodies = git(repo_path, "log", "--format=%B", f"main..agentrun/{slug}")
    assert f"Agentrun-Build: {slug}" in bodies
    everything = objects(repo_path)
    assert SHORT.encode() not in everything
    assert SHORT.lower().encode() not in everything  # the slug is lower case
    assert not [ref for ref in repo.references if SHORT.lower() in ref.lower()]


def test_a_runtime_s_credentials_are_scrubbed_like_secrets(repo_path: Path, tmp_path: Path) -> None:
    """Its API key variable and the credentials its ``env`` table sets, though neither
    is named in ``[secrets] env``: the agent has them, and echoes them."""
    key, token = "ak-" + "Q8r2" * 6, "tk-" + "M3n7" * 6
    table = f'api_key_env = "AGENT_API_KEY"\nenv = {{ AGENT_TOKEN = "{token}" }}\n'
    state = configure(repo_path, tmp_path, table, agent=PLAIN_AGENT)

    done = agentrun(repo_path, "run", "Add the feature", env={"AGENT_API_KEY": key})

    assert done.returncode == 0, done.stdout + done.stderr
    assert (state / "saw-implement").read_text() == f"{key} {token}"  # really given
    repo = pygit2.Repository(str(repo_path))
    slug = only_build(repo)
    log = EventLog(repo)
    (plan,) = payloads(repo, slug, "plan.submitted")
    assert log.text(tip(repo, slug) or "", plan.plan) == f"1. Use {REDACTED} and {REDACTED}.\n"
    (summary,) = {p.summary_text for p in payloads(repo, slug, "agent.done")}
    assert summary == f"key {REDACTED}"
    assert key.encode() not in objects(repo_path)
    # The token is written in the maintainers' config, so the config file and the build's
    # snapshot of it (which the runtime is run from) hold it; nothing else does.
    config_blob = str(repo.revparse_single(f"main:{CONFIG}").id)
    first_event = git(repo_path, "rev-list", "--max-parents=0", f"refs/agentrun/builds/{slug}")
    assert sorted(holding(repo_path, token)) == sorted([config_blob, first_event])


COMMITTING_AGENT = """\
import os, subprocess, sys
from pathlib import Path

VALUE, STATE = {value!r}, Path({state!r})
sys.stdin.read()
phase = os.environ["AGENTRUN_PHASE"]
family = phase.split("@")[0].split(":")[0]
args = {{"plan-review": ["approve"], "code-review": ["approve"], "verify": ["pass"]}}
if family == "plan":
    Path(".agentrun/run/plan.md").write_text("1. Add feature.txt.\\n")
    args["plan"] = ["plan", ".agentrun/run/plan.md"]
if family == "implement":
    if phase == "implement@1":
        # The agent commits the secret itself: the guard refuses the phase.
        Path("config.txt").write_text(f"password={{VALUE}}\\n")
        subprocess.run(["git", "add", "config.txt"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", "add the config"], check=True)
        (STATE / "leaky").write_text(subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip())
    Path("feature.txt").write_text("made\\n")
    args["implement"] = ["done"]
subprocess.run(["git", "agentrun", "agent", *args[family]], check=True)
"""


def test_a_refused_agent_commit_is_not_kept_with_its_secret(
    repo_path: Path, tmp_path: Path
) -> None:
    state = configure(repo_path, tmp_path, "", agent=COMMITTING_AGENT)

    done = agentrun(repo_path, "run", "Add the feature", env={"MY_SECRET": VALUE})

    assert done.returncode == 0, done.stdout + done.stderr
    repo = pygit2.Repository(str(repo_path))
    slug = only_build(repo)
    (failed,) = [p for p in payloads(repo, slug, "phase.failed") if p.guard]
    assert "adds the value of $MY_SECRET in config.txt" in failed.error
    assert payloads(repo, slug, "build.completed")
    leaky = (state / "leaky").read_text()
    # The agent committed it in its worktree's private git dir: it never reached the repository.
    assert leaky not in repo
    assert f"refs/agentrun/discarded/{slug}" not in repo.references
    # No ref reaches the refused commit, so nothing pushes or keeps it.
    reachable = git(repo_path, "rev-list", "--all").split()
    assert leaky not in reachable
    listed = git(repo_path, "rev-list", "--objects", "--all").split("\n")
    kept = [line.split()[0] for line in listed if line]
    assert not [oid for oid in kept if VALUE.encode() in repo[oid].read_raw()]


QUEUING_AGENT = """\
import os, subprocess, sys
from pathlib import Path

STATE = Path({state!r})
sys.stdin.read()
family = os.environ["AGENTRUN_PHASE"].split("@")[0].split(":")[0]
git_dir = Path(os.environ["AGENTRUN_GIT_DIR"])


def snapshot():
    refs = subprocess.run(["git", "--git-dir", str(git_dir), "for-each-ref"],
                          capture_output=True, text=True).stdout
    files = sorted(str(p.relative_to(git_dir)) for p in git_dir.rglob("*") if p.is_file())
    return refs + "\\n".join(files)


def verb(*args, cwd=None, **env):
    done = subprocess.run(["git", "agentrun", "agent", *args], capture_output=True, text=True,
                          cwd=cwd, env={{**os.environ, **env}})
    return f"{{done.returncode}} {{done.stdout.strip()}} {{done.stderr.strip()}}"


args = {{"plan-review": ["approve"], "code-review": ["approve"], "verify": ["pass"]}}
if family == "plan":
    Path(".agentrun/run/plan.md").write_text("1. Add feature.txt.\\n")
    (STATE / "no-git-dir").write_text(verb("approve", AGENTRUN_GIT_DIR=str(STATE / "none")))
    bare = STATE / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    (STATE / "bare").write_text(verb("escalate", "from a bare repository?", cwd=bare))
    before = snapshot()
    (STATE / "plan").write_text(verb("plan", ".agentrun/run/plan.md"))
    (STATE / "unchanged").write_text(str(snapshot() == before))
    (STATE / "again").write_text(verb("escalate", "one more thing?"))
    (STATE / "context").write_text(verb("context"))
    sys.exit(0)
if family == "implement":
    Path("feature.txt").write_text("made\\n")
    args["implement"] = ["done"]
subprocess.run(["git", "agentrun", "agent", *args[family]], check=True)
"""


def test_a_verb_only_reads_the_repository_and_queues_its_report(
    repo_path: Path, tmp_path: Path
) -> None:
    """The verb writes no object, ref or cache file: the runner appends what it queued.

    The default heartbeat (30 s) is far longer than the agent's turn, so what the agent
    sees is the verb's own doing."""
    state = configure(repo_path, tmp_path, "", agent=QUEUING_AGENT)

    done = subprocess.run(
        ["git", "agentrun", "run", "Add the feature"],
        cwd=repo_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS * 4,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert (state / "plan").read_text() == (
        "0 plan queued in .agentrun/run/outbox/0001.json; agentrun records it within a "
        "heartbeat: plan submitted (plan-r1.md) "
    )
    assert (state / "unchanged").read_text() == "True"
    repo = pygit2.Repository(str(repo_path))
    slug = only_build(repo)
    (session,) = [p.session for p in payloads(repo, slug, "session.started") if p.phase == "plan"]
    assert (state / "again").read_text() == (
        f"1  agentrun: session {session} already queued a report (0001.json); nothing queued"
    )
    assert (state / "no-git-dir").read_text() == (
        f"1  agentrun: AGENTRUN_GIT_DIR='{state / 'none'}' is not a git repository"
    )
    assert (state / "bare").read_text() == (
        f"1  agentrun: {state / 'bare.git'} is not inside a build's worktree: run the verb in "
        "the worktree"
    )
    # `context` keeps working: it reads the log and writes to the worktree's scratch folder.
    assert (state / "context").read_text().endswith(f"/{slug}/.agentrun/run/context.md ")
    assert [p.session for p in payloads(repo, slug, "plan.submitted")] == [session]
    assert not payloads(repo, slug, "escalation.raised")
    assert payloads(repo, slug, "build.completed")


def test_every_credential_the_environment_holds_is_a_secret() -> None:
    from agentrun import secrets

    environ = {
        "AWS_SECRET_ACCESS_KEY": "aws-" + "x" * 20,
        "AWS_SESSION_TOKEN": "session-" + "y" * 20,
        "GEMINI_API_KEY": "gemini-" + "z" * 20,
        "DB_PASSWORD": "hunter2-hunter2",
        "OPENAI_BASE_URL": "http://localhost:8000/v1",  # a setting, not a credential
        "AWS_REGION": "eu-central-1",
        "SHORT_TOKEN": "abc",  # too short to be told from text
    }
    assert sorted(secrets.values_of([], environ)) == sorted(
        [
            environ["AWS_SECRET_ACCESS_KEY"],
            environ["AWS_SESSION_TOKEN"],
            environ["GEMINI_API_KEY"],
            environ["DB_PASSWORD"],
        ]
    )


def test_an_issue_and_a_comment_quoting_a_secret_value_put_it_nowhere(
    tmp_path: Path, github_api: GitHubAPI
) -> None:
    """The Action loads `[secrets]` before it creates the issue's build or takes a comment."""
    github_api.clear()
    site = Site(tmp_path, github_api)
    escalate = [{"phase": "implement", "attempt": 1, "verb": "escalate", "text": "Which?"}]
    site.configure(escalate, extra='[secrets]\nenv = ["MY_SECRET"]\n')
    secret = {"MY_SECRET": SHORT}
    issue = labeled(7, f"Rotate {SHORT}", f"The key {SHORT} leaked.", "maintainer")
    first = site.job("issues", issue, extra_env=secret)
    must(first.run())
    assert first.outputs()["state"] == "parked"
    github_api.clear()
    permissions(github_api, {"maintainer": "write"})
    comments(github_api, 7, [(902, "maintainer", f"/agentrun answer e1 use {SHORT} anyway")])

    second = site.job("issue_comment", commented(7, 902, "…", "maintainer"), extra_env=secret)
    must(second.run())

    assert second.outputs()["state"] == "complete"
    slug = "issue-7-rotate-redacted"
    answered = [e.payload for e in remote_events(site, slug) if e.type == "escalation.answered"]
    assert [a.answer for a in answered] == [f"use {REDACTED} anyway"]
    for where in (site.origin, first.checkout, second.checkout):
        everything = objects(where)
        assert SHORT.encode() not in everything, where
        assert SHORT.lower().encode() not in everything, where
