"""``git agentrun action``: one GitHub Actions job, driven by the event that started it.

This module only reads GitHub's payload; what the job does is forge-neutral
(``agentrun.hosted.job``):

- ``issues.labeled`` with the trigger label starts the issue's build;
- ``issue_comment.created`` steers the build of that issue or pull request, and
  ``pull_request_review.submitted`` the build of that pull request, only on a build's
  ``agentrun/*`` branch. Every job reads *all* comments and reviews since the build's
  ``forge.cursor``: GitHub keeps only the newest pending job of a concurrency group and
  cancels the others;
- ``pull_request.closed`` on a build's pull request (merged or not) archives the build;
  ``schedule`` / ``workflow_dispatch`` sweep;
- ``push`` to a branch other than a build's starts a build per ``Agentrun-Goal`` trailer
  of the commits it gained (``before``..``after``), unless the hook did, and runs them.
- ``workflow_run`` and ``check_suite`` (completed) and ``status``: the CI gate's
  triggers (``[forge] require_checks``): the builds whose head is that commit look at
  their checks again.

``$GITHUB_OUTPUT`` gets ``slug``, ``pr-url``, ``state`` and ``tasks`` however the job ends
(``hosted.result.outputs_written``), so a workflow can report a failed job's build. A
build stops where tasks of its graph are ready (``Runner(fan_out=True)``): ``tasks``
lists them as JSON for a matrix job, one ``git agentrun task SLUG ID`` each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentrun.errors import AgentrunError
from agentrun.hosted.job import Handler, HostedJob, pushed
from agentrun.hosted.result import JobResult
from agentrun.hosted.site import Site, payload_at
from agentrun.refs import BRANCH_PREFIX

FORGE = "github"
OUTPUT = "GITHUB_OUTPUT"  # the step's outputs file
ACTIONS_BOT = "github-actions[bot]"  # who the workflow's token comments as


@dataclass(frozen=True)
class GitHubEvent:
    """What the Actions runner tells a step: the event and its payload."""

    name: str
    payload: dict[str, Any]
    repository: str  # owner/name
    ref_name: str = ""  # GITHUB_REF_NAME: the default branch for ``schedule``

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GitHubEvent:
        name = environ.get("GITHUB_EVENT_NAME", "")
        if not name:
            raise AgentrunError(
                "GITHUB_EVENT_NAME is not set: `git agentrun action` runs inside a GitHub "
                "Actions job (see the README's GitHub section)"
            )
        repository = environ.get("GITHUB_REPOSITORY", "")
        if "/" not in repository:
            raise AgentrunError("GITHUB_REPOSITORY is not set to owner/name")
        payload: dict[str, Any] = {}
        path = environ.get("GITHUB_EVENT_PATH")
        if path:
            payload = payload_at(path, "event payload")
        elif name not in ("schedule", "workflow_dispatch"):
            raise AgentrunError(f"GITHUB_EVENT_PATH is not set for a {name} event")
        return cls(name, payload, repository, environ.get("GITHUB_REF_NAME", ""))

    @property
    def kind(self) -> str:
        return self.name

    def site(self) -> Site:
        """GitHub, this repository, and the default branch when the payload says it."""
        repository = self.payload.get("repository") or {}
        branch = str(repository.get("default_branch") or "")
        if not branch and self.name == "schedule":
            branch = self.ref_name  # a scheduled run is on the default branch
        return Site(FORGE, self.repository, ACTIONS_BOT, branch)


def labeled(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    label = str((payload.get("label") or {}).get("name", ""))
    if payload.get("action") != "labeled" or label != job.config.forge.label:
        return job.say(
            f"ignored: {payload.get('action')} with label {label!r} "
            f"(the trigger label is {job.config.forge.label!r})"
        )
    _warn_token(job)
    issue = payload.get("issue") or {}
    if "pull_request" in issue:
        return job.say("ignored: a label on a pull request does not start a build")
    title, body = str(issue.get("title") or ""), str(issue.get("body") or "")
    return job.start(int(issue["number"]), title, body, _login(payload.get("sender")))


def commented(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    if payload.get("action") != "created":
        return job.say(f"ignored: issue_comment {payload.get('action')}")
    issue = payload.get("issue") or {}
    _note_bot(job, (payload.get("comment") or {}).get("user"))
    return job.steer_issue(int(issue["number"]), "pull_request" in issue)


def reviewed(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    review = payload.get("review") or {}
    pull = payload.get("pull_request") or {}
    number = int(pull.get("number", 0))
    if payload.get("action") != "submitted":
        return job.say(f"ignored: pull_request_review {payload.get('action')}")
    # Builds publish only from their own branches: a review elsewhere steers nothing,
    # whatever the pull request's number (nothing is fetched or asked of the API).
    head = str((pull.get("head") or {}).get("ref", ""))
    if not head.startswith(BRANCH_PREFIX):
        return job.say(
            f"pull request #{number} is not an agentrun build's (its branch {head!r} is "
            f"not {BRANCH_PREFIX}*); nothing to do"
        )
    _note_bot(job, review.get("user"))
    return job.steer_proposal(number)


def closed(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    pull = payload.get("pull_request") or {}
    if payload.get("action") != "closed":
        return job.say(f"ignored: pull_request {payload.get('action')}")
    merged = bool(pull.get("merged"))
    return job.close(int(pull.get("number", 0)), merged, _login(payload.get("sender")))


def ci_completed(job: HostedJob, payload: dict[str, Any], what: str) -> JobResult:
    """A workflow run or check suite completed: the builds whose head it ran on go on."""
    ran = payload.get(what) or {}
    if payload.get("action") != "completed":
        return job.say(f"ignored: {what} {payload.get('action')}")
    branch = str(ran.get("head_branch") or "")
    if branch and not branch.startswith(BRANCH_PREFIX):
        return job.say(f"ignored: {what} on {branch!r}, not an agentrun build's branch")
    return _checks_done(job, str(ran.get("head_sha") or ""))


def status_set(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    """A commit status changed: a build waiting on it goes on once it is final."""
    context, state = str(payload.get("context") or ""), str(payload.get("state") or "")
    if context.startswith(BRANCH_PREFIX) or state == "pending":
        return job.say(f"ignored: status {context} {state}")
    return _checks_done(job, str(payload.get("sha") or ""))


def _checks_done(job: HostedJob, sha: str) -> JobResult:
    if not sha:
        return job.say("ignored: the event names no commit")
    _warn_token(job)
    return job.checks_done(sha)


def _warn_token(job: HostedJob) -> None:
    """The gate on, and agentrun pushing with the workflow's token: its CI never runs."""
    import os

    from agentrun.commands.doctor import DEFAULT_TOKEN, WORKFLOW_TOKEN

    if job.config.forge.require_checks is not None and os.environ.get(DEFAULT_TOKEN) == "true":
        job.say(f"agentrun: warning: {WORKFLOW_TOKEN}")


def _login(user: object) -> str:
    return str(user.get("login") or "") if isinstance(user, dict) else ""


def _note_bot(job: HostedJob, user: object) -> None:
    """The payload says when its author is a bot (``type: Bot``)."""
    if isinstance(user, dict) and user.get("type") == "Bot" and user.get("login"):
        job.steering.note_bot(str(user["login"]))


HANDLERS: dict[str, Handler] = {
    "issues": labeled,
    "issue_comment": commented,
    "pull_request_review": reviewed,
    "pull_request": closed,
    "push": pushed,
    "workflow_run": lambda job, payload: ci_completed(job, payload, "workflow_run"),
    "check_suite": lambda job, payload: ci_completed(job, payload, "check_suite"),
    "status": status_set,
    "schedule": lambda job, payload: job.sweep(),
    "workflow_dispatch": lambda job, payload: job.sweep(),
}
EVENT = GitHubEvent
# A build stops where tasks are ready: the workflow's matrix job runs each (`tasks` output).
FAN_OUT = True
