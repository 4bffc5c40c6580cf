"""The checks on a GitHub commit, as the CI gate reads them (``[forge] require_checks``).

Two kinds: check runs (GitHub Actions jobs, apps) and commit statuses (older CI
services). GitHub lists the newest check run of each name (``filter=latest``) and the
newest status of each context in the combined status; a name found as both keeps the
newer. agentrun's own ``agentrun/<step>`` statuses are not the repository's CI.

For a failure: the check run's output (title, summary, text) or the status's
description; for an Actions job, the end of its log too, read from where GitHub's
``/actions/jobs/{id}/logs`` redirects (a signed URL, fetched without the token).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentrun.forge.base import Check, CheckState

if TYPE_CHECKING:
    from github.Requester import Requester

OWN = "agentrun/"  # the statuses agentrun sets itself, one per verify step
LOG_BYTES = 64 * 1024  # how much of the end of a job's log is read
LOG_SECONDS = 30
PASSED = {"success", "neutral", "skipped"}
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def checks(requester: Requester, repo_url: str, sha: str) -> list[Check]:
    """Every check and status on ``sha`` but agentrun's own, the newest of each name."""
    newest: dict[str, tuple[str, Check]] = {}
    for run in _check_runs(requester, f"{repo_url}/commits/{sha}/check-runs"):
        when = str(run.get("completed_at") or run.get("started_at") or "")
        _keep(newest, when, _from_run(requester, repo_url, run))
    _, combined = requester.requestJsonAndCheck("GET", f"{repo_url}/commits/{sha}/status")
    for status in (combined or {}).get("statuses") or []:
        if str(status.get("context") or "").startswith(OWN):
            continue
        _keep(newest, str(status.get("updated_at") or ""), _from_status(status))
    return [check for _, check in sorted(newest.values(), key=lambda kept: kept[1].name)]


def _keep(newest: dict[str, tuple[str, Check]], when: str, check: Check) -> None:
    if check.name not in newest or when >= newest[check.name][0]:
        newest[check.name] = (when, check)


def _check_runs(requester: Requester, url: str) -> Iterator[dict[str, Any]]:
    params: dict[str, Any] | None = {"per_page": 100, "filter": "latest"}
    next_url: str | None = url
    while next_url is not None:
        headers, data = requester.requestJsonAndCheck("GET", next_url, params)
        yield from (data or {}).get("check_runs") or []
        found = _NEXT.search(str(headers.get("link") or ""))
        next_url, params = (found.group(1), None) if found else (None, None)


def _from_run(requester: Requester, repo_url: str, run: dict[str, Any]) -> Check:
    conclusion = str(run.get("conclusion") or "")
    state: CheckState
    if run.get("status") != "completed":
        state = "pending"
    else:
        state = "success" if conclusion in PASSED else "failure"
    summary = log = ""
    if state == "failure":
        output = run.get("output") or {}
        parts = (output.get("title"), output.get("summary"), output.get("text"))
        summary = "\n".join(str(p).strip() for p in parts if p and str(p).strip())
        if (run.get("app") or {}).get("slug") == "github-actions" and run.get("id"):
            log = _job_log_tail(requester, repo_url, int(run["id"]))
    return Check(
        name=str(run.get("name") or ""),
        state=state,
        conclusion=conclusion or str(run.get("status") or ""),
        summary=summary,
        log_tail=log,
        url=str(run.get("html_url") or run.get("details_url") or ""),
    )


def _from_status(status: dict[str, Any]) -> Check:
    word = str(status.get("state") or "pending")
    state: CheckState = "failure"  # failure or error
    if word in ("pending", "success"):
        state = "pending" if word == "pending" else "success"
    return Check(
        name=str(status.get("context") or ""),
        state=state,
        conclusion=word,
        summary=str(status.get("description") or "") if state == "failure" else "",
        url=str(status.get("target_url") or ""),
    )


def _job_log_tail(requester: Requester, repo_url: str, job: int) -> str:
    """The end of an Actions job's log; empty when GitHub gives none (expired, no
    permission): the summary still says what failed."""
    import requests
    from github import GithubException

    try:
        headers, _ = requester.requestBlobAndCheck("GET", f"{repo_url}/actions/jobs/{job}/logs")
    except GithubException:
        return ""
    location = str(headers.get("location") or "")
    api = urlsplit(repo_url)
    where = urlsplit(location)
    if where.scheme != "https" and where.netloc != api.netloc:
        return ""  # a signed https URL, or (a server of one's own) the API's host
    try:
        with requests.get(location, stream=True, timeout=LOG_SECONDS) as answer:
            if answer.status_code != 200:
                return ""
            tail = b""
            for chunk in answer.iter_content(chunk_size=16 * 1024):
                tail = (tail + chunk)[-LOG_BYTES:]
    except requests.RequestException:
        return ""
    return _readable(tail.decode("utf-8", errors="replace"))


_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ", re.MULTILINE)


def _readable(log: str) -> str:
    """The log without the timestamp GitHub puts before every line."""
    return _STAMP.sub("", log)
