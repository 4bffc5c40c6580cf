"""GitLab's pipelines, jobs and commit statuses on a commit as the CI gate's ``Check``,
read with python-gitlab (its pagination; the retries of ``gitlab_http``).

One check per name, the newest run of it: jobs and commit statuses are one kind of
object on GitLab (one id sequence), so the highest id of a name wins, whether it is a
retried job, a job of a newer pipeline on the same commit, or an external status.
agentrun's own ``agentrun/<step>`` statuses are not checks, nor is the job running
agentrun (``CI_JOB_NAME``, any run of it: a job at the end of the build branch's own
pipeline would wait for itself, or for its twin in the merge request's pipeline).

What a job's status means for the gate, as GitLab's own pipeline status would have it:

- ``success`` passes; ``failed`` and ``canceled`` fail;
- ``created``, ``pending``, ``running``, ``waiting_for_resource``, ``preparing``,
  ``waiting_for_callback``, ``canceling`` and ``scheduled`` (a delayed job) are pending;
- a job that may fail (``allow_failure``) never holds the gate: failed, or ``manual``
  and never run, it passes, with GitLab's word as its conclusion. A ``manual`` job that
  may not fail blocks its pipeline on GitLab: it is pending until someone runs it (the
  gate's timeout still applies);
- ``skipped`` takes its pipeline's outcome: a job skipped in a pipeline that passed (a
  ``when: on_failure`` job) passes, one skipped in a pipeline that failed (a later stage
  after a failure) fails, and while the pipeline runs it is pending.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentrun.forge.base import Check, CheckState
from agentrun.refs import BRANCH_PREFIX

LOG_TAIL = 2000  # characters of a failed job's trace kept for the next round's feedback
PENDING = frozenset(
    {
        "created",
        "pending",
        "running",
        "waiting_for_resource",
        "preparing",
        "waiting_for_callback",
        "canceling",
        "scheduled",
    }
)
FAILED = frozenset({"failed", "canceled"})
FINISHED = frozenset({"success", "failed", "canceled", "skipped"})  # a pipeline's end
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SECTION = re.compile(r"section_(?:start|end):\d+:[^\r\n]*?\r(?:\x1b\[0K)?")


def read_checks(project: Any, by_id: Callable[[], Any], sha: str, own_job: str) -> list[Check]:
    """The checks on ``sha`` of python-gitlab's ``project`` (``by_id``: the same project
    under its numeric id); ``own_job``: the name of the job asking, if any."""
    outcome: dict[int, str] = {}
    jobs: list[dict[str, Any]] = []
    for pipeline in project.pipelines.list(sha=sha, order_by="id", sort="desc", get_all=True):
        outcome[int(pipeline.id)] = str(pipeline.attributes.get("status") or "")
        jobs += [job.attributes for job in pipeline.jobs.list(get_all=True)]  # no retried runs
    # Jobs are commit statuses too: the ones read as jobs are not read again.
    seen = {int(job["id"]) for job in jobs}
    listed = project.commits.get(sha, lazy=True).statuses.list(get_all=True)
    statuses = [s.attributes for s in listed if int(s.id) not in seen]
    found = []
    for item in newest(jobs, statuses, own_job):
        parent = item.get("pipeline")
        pipeline_id = parent.get("id") if isinstance(parent, dict) else item.get("pipeline_id")
        state = state_of(item, outcome.get(int(pipeline_id)) if pipeline_id else None)
        failed_job = state == "failure" and int(item["id"]) in seen
        found.append(
            check_of(item, state, _trace_tail(by_id(), int(item["id"])) if failed_job else "")
        )
    return found


def _trace_tail(project: Any, job_id: int) -> str:
    """The end of a job's trace, read as a stream: a trace can be megabytes. An erased or
    expired trace (404) is no tail, not a failure to read the checks."""
    from gitlab.exceptions import GitlabGetError

    tail = b""
    try:
        for chunk in project.jobs.get(job_id, lazy=True).trace(iterator=True):
            tail = (tail + bytes(chunk))[-LOG_TAIL * 4 :]  # UTF-8: 4 bytes a character at most
    except GitlabGetError as exc:
        if exc.response_code != 404:
            raise
    return trace_text(tail)[-LOG_TAIL:]


def state_of(item: Mapping[str, Any], pipeline_status: str | None) -> CheckState:
    """What one job (or commit status) means for the gate; ``pipeline_status``: the status
    of the pipeline it belongs to, when known."""
    status = str(item.get("status") or "")
    optional = bool(item.get("allow_failure"))
    if status == "success":
        return "success"
    if status in FAILED:
        return "success" if optional and status == "failed" else "failure"
    if status == "manual":
        return "success" if optional else "pending"
    if status == "skipped":
        if pipeline_status in FAILED:
            return "failure"
        return "success" if pipeline_status in FINISHED or pipeline_status is None else "pending"
    return "pending"  # PENDING, and any status GitLab adds later: never a pass


def newest(
    jobs: Iterable[Mapping[str, Any]], statuses: Iterable[Mapping[str, Any]], own_job: str
) -> list[Mapping[str, Any]]:
    """The newest job or commit status of each name, by name; agentrun's own statuses and
    the runs of ``own_job`` (the name of the job asking) left out."""
    best: dict[str, Mapping[str, Any]] = {}
    for item in (*jobs, *statuses):
        name = str(item.get("name") or "")
        if not name or name.startswith(BRANCH_PREFIX) or name == own_job:
            continue
        known = best.get(name)
        if known is None or int(item.get("id") or 0) > int(known.get("id") or 0):
            best[name] = item
    return [best[name] for name in sorted(best)]


def check_of(item: Mapping[str, Any], state: CheckState, log: str = "") -> Check:
    """A ``Check`` of a job or commit status; a failure's summary is GitLab's
    ``failure_reason`` (a job's) or description (a status's)."""
    status = str(item.get("status") or "")
    conclusion = status
    if status == "failed" and state == "success":
        conclusion = "failed (allowed to fail)"
    elif status == "manual" and state == "success":
        conclusion = "manual (not run, allowed to fail)"
    summary = ""
    if state == "failure":
        reason = str(item.get("failure_reason") or item.get("description") or "")
        summary = reason.replace("_", " ") if item.get("failure_reason") else reason
    url = str(item.get("web_url") or item.get("target_url") or "")
    return Check(
        name=str(item.get("name") or ""),
        state=state,
        conclusion=conclusion,
        summary=summary,
        log_tail=log[-LOG_TAIL:] if state == "failure" else "",
        url=url,
    )


def trace_text(raw: bytes) -> str:
    """A job's trace as plain text: without the runner's colours and collapsible-section
    markers (``section_start:TIME:NAME``), which are noise in a prompt."""
    text = raw.decode("utf-8", "replace")
    text = _SECTION.sub("", text)
    return _ANSI.sub("", text).replace("\r\n", "\n")
