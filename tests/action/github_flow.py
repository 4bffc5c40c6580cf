"""What the Action tests share: GitHub's example payloads, a bare origin, Actions jobs.

A "job" is what a GitHub Actions run does: a fresh clone of the bare ``file://`` origin
(as ``actions/checkout`` with ``fetch-depth: 0`` leaves it), then ``git agentrun action``
as a process with the variables the runner sets, against the Prism fixture's API.
Payloads are GitHub's own examples (``@octokit/webhooks-examples``), adapted only in
the label name, comment body, numbers, logins and the repository's full name.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pygit2
from runner.helpers import SCRIPTED, cli_env, configure, git
from support.prism import REPOSITORY, GitHubAPI

EXAMPLES = (
    Path(__file__).resolve().parents[1]
    / "clients/node_modules/@octokit/webhooks-examples/api.github.com/index.json"
)
OWNER, NAME = REPOSITORY.split("/")
API_REPO = f"/repos/{REPOSITORY}"
JOB_SECONDS = 90


@cache
def _examples() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(EXAMPLES.read_text())
    return data


def example(name: str, action: str | None) -> dict[str, Any]:
    """GitHub's first example payload of event ``name`` with ``action``, a fresh copy."""
    for entry in _examples():
        if entry["name"] == name:
            for found in entry["examples"]:
                if found.get("action") == action:
                    return _in_repository(copy.deepcopy(found))
    raise LookupError(f"no example {name}.{action}")


def _in_repository(payload: dict[str, Any]) -> dict[str, Any]:
    repository = payload.get("repository")
    if isinstance(repository, dict):
        repository.update(full_name=REPOSITORY, name=NAME, default_branch="main")
        repository["owner"]["login"] = OWNER
    return payload


def pushed(before: str, after: str, ref: str = "refs/heads/main") -> dict[str, Any]:
    """GitHub's example push to a branch, of ``before``..``after`` to ``ref``."""
    for entry in _examples():
        if entry["name"] == "push":
            for found in entry["examples"]:
                if found["ref"].startswith("refs/heads/"):
                    payload = _in_repository(copy.deepcopy(found))
                    payload.update(ref=ref, before=before, after=after)
                    return payload
    raise LookupError("no example push to a branch")


def labeled(
    number: int, title: str, body: str, login: str, label: str = "agentrun"
) -> dict[str, Any]:
    payload = example("issues", "labeled")
    payload["label"]["name"] = label
    payload["issue"].update(number=number, title=title, body=body)
    payload["sender"]["login"] = login
    return payload


def commented(
    number: int, comment_id: int, body: str, login: str, on_pull: bool = False
) -> dict[str, Any]:
    payload = example("issue_comment", "created")
    payload["issue"]["number"] = number
    if on_pull:
        payload["issue"]["pull_request"] = {"url": f"{API_REPO}/pulls/{number}"}
    payload["comment"].update(id=comment_id, body=body)
    payload["comment"]["user"]["login"] = login
    payload["sender"]["login"] = login
    return payload


def reviewed(
    number: int, review_id: int, state: str, body: str, login: str, head: str | None
) -> dict[str, Any]:
    """A review on pull request ``number`` whose branch is ``head`` (``None``: the branch
    of GitHub's example, ``changes``)."""
    payload = example("pull_request_review", "submitted")
    payload["pull_request"]["number"] = number
    if head is not None:
        payload["pull_request"]["head"]["ref"] = head
    payload["review"].update(id=review_id, state=state, body=body)
    payload["review"]["user"]["login"] = login
    payload["sender"]["login"] = login
    return payload


# --- the API's answers that the fixed examples cannot give ----------------------------------


def permissions(api: GitHubAPI, roles: dict[str, str]) -> None:
    """``GET .../collaborators/LOGIN/permission`` answers each login's role."""
    for login, role in roles.items():
        api.respond(
            "GET",
            f"{API_REPO}/collaborators/{login}/permission",
            lambda ex, role=role, login=login: {
                **ex,
                "permission": "write" if role == "maintain" else role,
                "role_name": role,
                "user": {**ex["user"], "login": login},
            },
        )


def comments(api: GitHubAPI, number: int, items: list[tuple[int, str, str]]) -> None:
    """The comments of issue ``number``: (id, login, body), built from GitHub's example."""

    def answer(ex: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**ex[0], "id": cid, "body": body, "user": {**ex[0]["user"], "login": login}}
            for cid, login, body in items
        ]

    api.respond("GET", f"{API_REPO}/issues/{number}/comments", answer)


def reviews(api: GitHubAPI, number: int, items: list[tuple[int, str, str, str]]) -> None:
    """The reviews of pull request ``number``: (id, login, state, body)."""

    def answer(ex: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                **ex[0],
                "id": rid,
                "state": state,
                "body": body,
                "user": {**ex[0]["user"], "login": login},
            }
            for rid, login, state, body in items
        ]

    api.respond("GET", f"{API_REPO}/pulls/{number}/reviews", answer)


def posted_comments(api: GitHubAPI, number: int) -> list[str]:
    return [r.body["body"] for r in api.find("POST", f"{API_REPO}/issues/{number}/comments")]


# --- the repository and jobs ----------------------------------------------------------------


@dataclass
class Site:
    """A bare origin on ``file://`` seeded with a configured main branch."""

    root: Path
    api: GitHubAPI
    origin: Path = field(init=False)
    jobs: int = 0

    def __post_init__(self) -> None:
        self.origin = self.root / "origin.git"
        git(self.root, "init", "-q", "--bare", "-b", "main", str(self.origin))
        seed = self.root / "seed"
        git(self.root, "clone", "-q", self.url, str(seed))
        (seed / "README.md").write_text("hello\n")
        git(seed, "add", "README.md")
        git(seed, "commit", "-q", "-m", "initial")
        git(seed, "push", "-q", "origin", "HEAD:main")
        self.seed = seed

    @property
    def url(self) -> str:
        return f"file://{self.origin}"

    def configure(self, steps: list[dict[str, Any]], extra: str = "", base: str = SCRIPTED) -> None:
        """Commit ``.agentrun.toml`` and the agent script on main, and push them."""
        configure(self.seed, steps, extra, base)
        git(self.seed, "push", "-q", "origin", "HEAD:main")

    def clone(self, name: str | None = None) -> Path:
        """A checkout as ``actions/checkout`` with ``fetch-depth: 0`` leaves it."""
        self.jobs += 1
        path = self.root / (name or f"job-{self.jobs}")
        git(self.root, "clone", "-q", self.url, str(path))
        return path

    def job(
        self,
        event: str,
        payload: dict[str, Any] | None,
        checkout: Path | None = None,
        extra_env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> Job:
        checkout = checkout or self.clone()
        return Job(checkout, event, payload, self.api, extra_env or {}, args)

    def remote_repo(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.origin))


@dataclass
class Job:
    checkout: Path
    event: str
    payload: dict[str, Any] | None
    api: GitHubAPI
    extra_env: dict[str, str]
    args: tuple[str, ...]

    @property
    def output(self) -> Path:
        return self.checkout.parent / f"{self.checkout.name}.output"

    def env(self) -> dict[str, str]:
        env = {
            **self.api.env(),
            "GITHUB_EVENT_NAME": self.event,
            "GITHUB_OUTPUT": str(self.output),
            "GITHUB_ACTIONS": "true",
            **self.extra_env,
        }
        if self.payload is not None:
            path = self.checkout.parent / f"{self.checkout.name}.event.json"
            path.write_text(json.dumps(self.payload))
            env["GITHUB_EVENT_PATH"] = str(path)
        return cli_env(env)

    def popen(self) -> subprocess.Popen[str]:
        return start_action(self.checkout, self.env(), self.args)

    def run(self) -> subprocess.CompletedProcess[str]:
        return run_action(self.checkout, self.env(), self.args)

    def outputs(self) -> dict[str, str]:
        return read_outputs(self.output)


# --- what every forge's CI job does: `git agentrun action` in its checkout -----------------


def start_action(checkout: Path, env: dict[str, str], args: Sequence[str]) -> subprocess.Popen[str]:
    """The job as a process of its own session (a test may kill it, agents and all)."""
    return subprocess.Popen(
        ["git", "agentrun", "action", *args],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def run_action(
    checkout: Path, env: dict[str, str], args: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "agentrun", "action", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=JOB_SECONDS,
    )


def read_outputs(path: Path) -> dict[str, str]:
    """The job's ``key=value`` outputs file, as the CI reads it."""
    if not path.exists():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def kill_when_hung(proc: subprocess.Popen[str], state: Path) -> None:
    """Wait for the hanging agent of ``command_agent(implement="hang")``, then kill the job
    with its runner and agent, as a cancelled CI job dies."""
    from runner.helpers import kill_left_over, wait_for

    try:
        wait_for(lambda: (state / "hung").exists(), "the implement session to hang", 60)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        kill_left_over(state / "pids")
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def empty_site(tmp_path: Path, api: GitHubAPI) -> Site:
    """A site whose default branch has an empty config, the fake GitHub's records cleared."""
    api.clear()
    found = Site(tmp_path, api)
    found.configure([])
    return found


def must(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def remote_events(site: Site, slug: str) -> list[Any]:
    from agentrun.store.log import EventLog

    return [stored.event for stored in EventLog(site.remote_repo()).read(slug)]


def remote_types(site: Site, slug: str) -> list[str]:
    return [event.type for event in remote_events(site, slug)]


def remote_slugs(site: Site) -> list[str]:
    from agentrun.store.log import EventLog

    return EventLog(site.remote_repo()).slugs()


# --- the human plan gate ([policy] plan_approval = "human"), on either forge ---------------

PLAN = "1. Greet in `app.py`.\n2. Add a test."
PLAN_STEPS = [{"phase": "plan", "verb": "plan", "text": PLAN}]
PLAN_GATE = '[policy]\nplan_approval = "human"\n'


def plan_question(bodies: list[str]) -> str:
    """The one posted question that holds the plan, with both replies and no other."""
    asked = "Plan round 1 waits for a person's approval before any code is written."
    (question,) = [b for b in bodies if asked in b]
    assert PLAN in question
    assert "Reply `/agentrun approve` to go on, or `/agentrun answer <what to change>`" in question
    assert question.count("/agentrun answer") == 1  # no second reply line to contradict it
    return question


def approvals(site: Site, slug: str) -> list[tuple[str, str]]:
    """Who approved the build's plan: (``by``, the event's actor), per approval."""
    found = [e for e in remote_events(site, slug) if e.type == "plan.approved"]
    return [(e.payload.by, e.actor.login) for e in found]
