"""``git agentrun action --forge gitlab``: one GitLab CI job, driven by what started its
pipeline.

GitLab has no "issue labeled" trigger. A project webhook (issue, note and merge request
events) points at the project's pipeline trigger URL, and GitLab hands its body to the
pipeline as the file variable ``TRIGGER_PAYLOAD``; a scheduled pipeline sweeps. Anyone
holding the trigger token can post any body, so the payload only says where to look:

- an ``issue`` event starts the issue's build when the issue, read through the API,
  carries the trigger label now;
- a ``note`` event steers the build of that issue or merge request, and a
  ``merge_request`` event on a build's ``agentrun/*`` branch steers its build (review
  feedback) or, merged or closed, archives it. Steering reads every note and review
  since the build's cursor through the API: who wrote a note, and what, is never taken
  from the payload;
- a push pipeline (``CI_PIPELINE_SOURCE=push``: ``CI_COMMIT_BEFORE_SHA``,
  ``CI_COMMIT_SHA``, ``CI_COMMIT_BRANCH``) starts a build per ``Agentrun-Goal`` trailer
  of the commits the branch gained, unless the hook did, and runs them;
- a scheduled pipeline (``CI_PIPELINE_SOURCE=schedule``) starts the labeled issues that
  have no build yet, archives builds whose merge request closed, steers every open
  build, then sweeps;
- a build branch's own pipeline (a push to ``agentrun/*``: the example's last-stage job)
  and a ``pipeline`` event of a finished pipeline on a build branch continue the builds
  whose head is that commit: the CI gate reads the checks again (``continue_head``).
  GitLab refuses a pipeline event at the trigger URL (403: a pipeline hook triggering
  pipelines would loop), so the last-stage job is the way in; the payload is read when
  something else hands it over.

What the job does is forge-neutral (``agentrun.hosted.job``); ``$AGENTRUN_OUTPUT``, when
set, gets ``slug``, ``pr-url`` and ``state`` as a dotenv file however the job ends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentrun.errors import AgentrunError
from agentrun.forge.base import Access
from agentrun.forge.gitlab_site import proposal_number, split
from agentrun.hosted.job import Handler, HostedJob, pushed
from agentrun.hosted.result import JobResult
from agentrun.hosted.site import Site, payload_at
from agentrun.refs import BRANCH_PREFIX

FORGE = "gitlab"
OUTPUT = "AGENTRUN_OUTPUT"  # a dotenv report the job declares (the example's)
SWEEPS = ("schedule", "web", "api")  # pipelines started by a schedule or by hand: sweep
PUSHED = ("push", "merge_request_event")  # a build branch's own pipeline: its checks ran
ENDED = ("success", "failed", "canceled", "skipped", "manual")  # manual: blocked on a person
# Who may have added a label on GitLab: Reporter (TRIAGE) or above.
LABELS = Access.TRIAGE
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1, or SHA-256 repositories


@dataclass(frozen=True)
class GitLabEvent:
    """What GitLab CI tells a job: the pipeline's source and the webhook's body."""

    source: str  # CI_PIPELINE_SOURCE: "trigger" for a webhook's, "schedule", ...
    payload: dict[str, Any]
    project: str  # CI_PROJECT_PATH: group/name
    default_branch: str = ""  # CI_DEFAULT_BRANCH
    head: str = ""  # CI_COMMIT_SHA of a build branch's own pipeline

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GitLabEvent:
        project = environ.get("CI_PROJECT_PATH", "")
        if "/" not in project:
            raise AgentrunError(
                "CI_PROJECT_PATH is not set to group/name: `git agentrun action --forge "
                "gitlab` runs inside a GitLab CI job (see the README's GitLab section)"
            )
        source = environ.get("CI_PIPELINE_SOURCE", "")
        payload: dict[str, Any] = {}
        path = environ.get("TRIGGER_PAYLOAD")
        branch = environ.get("CI_COMMIT_BRANCH") or environ.get(
            "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", ""
        )
        head = ""
        if path:
            payload = payload_at(path, "webhook payload")
        elif source in PUSHED and branch.startswith(BRANCH_PREFIX):
            head = environ.get("CI_COMMIT_SHA", "")
            if not _SHA.fullmatch(head):
                raise AgentrunError(f"CI_COMMIT_SHA names no commit for the pipeline of {branch}")
            payload = {"sha": head, "ref": branch, "id": environ.get("CI_PIPELINE_ID", "")}
        elif source == "push":
            payload = _push(environ)
        elif source not in SWEEPS:
            raise AgentrunError(
                f"TRIGGER_PAYLOAD is not set for a {source or 'pushed'} pipeline: point a "
                "project webhook at the pipeline trigger URL, or schedule the pipeline"
            )
        return cls(source, payload, project, environ.get("CI_DEFAULT_BRANCH", ""), head)

    @property
    def kind(self) -> str:
        """The webhook's ``object_kind``; ``sweep`` for a pipeline without one, and
        ``build_pipeline`` for a build branch's own."""
        if self.head:
            return "build_pipeline"
        if not self.payload:
            return "sweep"
        return str(self.payload.get("object_kind") or "")

    def site(self) -> Site:
        return Site(FORGE, self.project, "", self.default_branch, "merge request", "!", _iid_of)


def issue_changed(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    attributes = payload.get("object_attributes") or {}
    action = str(attributes.get("action") or "")
    if action not in ("open", "update", "reopen"):
        return job.say(f"ignored: issue {action or 'event'}")
    iid = _iid(attributes)
    found = job.forge.issue(iid)  # the payload may lie: the issue as GitLab has it now
    label = job.config.forge.label
    if label not in found.labels:
        return job.say(f"ignored: issue #{iid} does not carry the trigger label {label!r}")
    return job.start(iid, found.title, found.body, _labeler(job, payload))


def noted(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    attributes = payload.get("object_attributes") or {}
    kind = str(attributes.get("noteable_type") or "")
    if kind == "Issue":
        return job.steer_issue(_iid(payload.get("issue") or {}), False)
    if kind == "MergeRequest":
        return job.steer_issue(proposal_number(_iid(payload.get("merge_request") or {})), True)
    return job.say(f"ignored: a note on a {kind or 'thing'} steers no build")


def merge_request_changed(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    attributes = payload.get("object_attributes") or {}
    iid = _iid(attributes)
    # Builds publish only from their own branches: a merge request elsewhere steers
    # nothing, whatever its number (nothing is fetched or asked of the API).
    head = str(attributes.get("source_branch") or "")
    if not head.startswith(BRANCH_PREFIX):
        return job.say(
            f"merge request !{iid} is not an agentrun build's (its branch {head!r} is not "
            f"{BRANCH_PREFIX}*); nothing to do"
        )
    action = str(attributes.get("action") or "")
    number = proposal_number(iid)
    if action in ("merge", "close"):
        # What the forge says now, not what the payload claims: the close is re-read.
        state = job.forge.get(number).state
        if state == "open":
            return job.say(f"ignored: merge request !{iid} is still open")
        return job.close(number, state == "merged", "")
    return job.steer_proposal(number)


def sweep(job: HostedJob) -> JobResult:
    """Start the labeled issues that have no build yet, then sweep as on every forge."""
    from agentrun.forge.gitlab import GitLabForge

    label = job.config.forge.label
    forge = job.forge
    if not isinstance(forge, GitLabForge):
        raise AgentrunError(f"the {forge.name} forge cannot list labeled GitLab issues")
    job.pull()  # the builds other pipelines made: an issue that has one is not started
    for found in forge.labeled_issues(label):
        if job.issue_build(found.number) is None:
            job.start(found.number, found.title, found.body, "")
    return job.sweep()


def _push(environ: Mapping[str, str]) -> dict[str, Any]:
    """A push pipeline's commits, as GitLab CI gives them (a push webhook's fields)."""
    branch, tag = environ.get("CI_COMMIT_BRANCH", ""), environ.get("CI_COMMIT_TAG", "")
    ref = f"refs/heads/{branch}" if branch else f"refs/tags/{tag}" if tag else ""
    return {
        "object_kind": "push",
        "ref": ref,
        "before": environ.get("CI_COMMIT_BEFORE_SHA", ""),
        "after": environ.get("CI_COMMIT_SHA", ""),
    }


def pipeline_ended(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    """A ``pipeline`` event: when the pipeline ended on a build branch, continue the builds
    whose head is its commit. Only the commit is taken from the payload; the checks are
    read from the API."""
    attributes = _object(payload.get("object_attributes"))
    sha = str(attributes.get("sha") or "")
    if not _SHA.fullmatch(sha):
        raise AgentrunError("the pipeline webhook payload names no commit sha")
    number, status = attributes.get("id"), str(attributes.get("status") or "")
    if status not in ENDED:
        return job.say(
            f"ignored: pipeline {number} is {status or 'in no state'}; its end continues it"
        )
    request = _object(payload.get("merge_request"))
    branch = str(request.get("source_branch") or attributes.get("ref") or "")
    if not branch.startswith(BRANCH_PREFIX):
        return job.say(
            f"pipeline {number} ran on {branch!r}, not an agentrun build's branch; nothing to do"
        )
    return continue_head(job, sha, f"pipeline {number} {status}")


def build_pipeline(job: HostedJob, payload: dict[str, Any]) -> JobResult:
    """A job at the end of a build branch's own pipeline: its checks have run."""
    return continue_head(job, str(payload["sha"]), f"pipeline {payload['id']} of {payload['ref']}")


def continue_head(job: HostedJob, sha: str, what: str) -> JobResult:
    """Continue the builds whose head is ``sha`` (``what`` says which pipeline ended): they
    look at their checks again, as a GitHub ``workflow_run`` makes them."""
    job.say(f"{what}: continuing the builds whose head is {sha[:10]}")
    return job.checks_done(sha)


def _object(found: Any) -> Mapping[str, Any]:
    return found if isinstance(found, dict) else {}


def _iid_of(number: int) -> int:
    """The iid a merge request's forge number stands for (``gitlab_site``)."""
    return split(number)[1]


def _iid(attributes: Mapping[str, Any]) -> int:
    try:
        return int(attributes["iid"])
    except (KeyError, TypeError, ValueError):
        raise AgentrunError("the webhook payload names no issue or merge request iid") from None


def _labeler(job: HostedJob, payload: dict[str, Any]) -> str:
    """Who the payload says changed the issue, when GitLab says they may label it: they
    are asked to review the build's merge request. Anyone else is nobody."""
    login = str((payload.get("user") or {}).get("username") or "")
    return login if login and job.forge.access(login) >= LABELS else ""


HANDLERS: dict[str, Handler] = {
    "issue": issue_changed,
    "note": noted,
    "merge_request": merge_request_changed,
    "push": pushed,
    "sweep": lambda job, payload: sweep(job),
    "pipeline": pipeline_ended,
    "build_pipeline": build_pipeline,
}
EVENT = GitLabEvent
# A pipeline's `parallel:matrix` is fixed when the pipeline is created, so it cannot be
# made from a list the job writes: the job runs a build's tasks itself.
FAN_OUT = False
