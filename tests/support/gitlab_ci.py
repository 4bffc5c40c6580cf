"""The fake GitLab's pipelines and jobs, and how GitLab answers about them (``gitlab_state``
serves them).

Bodies follow GitLab's API documentation (doc/api/pipelines.md, doc/api/jobs.md): a
pipeline as the list gives it (``PipelineBasic``), a job with its ``pipeline``,
``failure_reason``, ``allow_failure`` and ``web_url``. GitLab's behaviour the forge
relies on: jobs and commit statuses are one kind of object with one id sequence
(``next_id``), so ``GET …/repository/commits/:sha/statuses`` lists the jobs of the
commit's pipelines as well as external statuses; a retried job is left out of a
pipeline's jobs (and of the statuses) unless asked for; a pipeline list is newest first;
a trace is plain text, not JSON (``Text``).
"""

from __future__ import annotations

import itertools
from typing import Any


class Text(str):
    """An answer GitLab gives as ``text/plain`` (a job's trace)."""


class CIState:
    """Pipelines and jobs of the one project, and the commit statuses of ``statuses``."""

    def __init__(self, url: str, project: str, project_id: int, now: Any) -> None:
        """``now``: the state's clock (a callable giving GitLab's time format)."""
        self.url, self.project, self.project_id, self._now = url, project, project_id, now
        self._ids = itertools.count(501)  # jobs and commit statuses: one sequence
        self.pipelines: dict[int, dict[str, Any]] = {}
        self.jobs: dict[int, dict[str, Any]] = {}
        self.traces: dict[int, str] = {}

    def next_id(self) -> int:
        return next(self._ids)

    def add_pipeline(
        self, sha: str, ref: str, status: str = "running", source: str = "push"
    ) -> int:
        pipeline_id = len(self.pipelines) + 31
        self.pipelines[pipeline_id] = {
            "id": pipeline_id,
            "iid": len(self.pipelines) + 1,
            "project_id": self.project_id,
            "sha": sha,
            "ref": ref,
            "status": status,
            "source": source,
            "name": None,
            "created_at": self._now(),
            "updated_at": self._now(),
            "web_url": f"{self.url}/{self.project}/-/pipelines/{pipeline_id}",
        }
        return pipeline_id

    def add_job(
        self,
        pipeline_id: int,
        name: str,
        status: str,
        *,
        allow_failure: bool = False,
        failure_reason: str | None = None,
        trace: str = "",
        stage: str = "test",
    ) -> int:
        """A job of pipeline ``pipeline_id``; its trace is ``trace``."""
        pipeline = self.pipelines[pipeline_id]
        job_id = self.next_id()
        self.jobs[job_id] = {
            "id": job_id,
            "name": name,
            "stage": stage,
            "status": status,
            "allow_failure": allow_failure,
            "failure_reason": failure_reason if status == "failed" else None,
            "ref": pipeline["ref"],
            "tag": False,
            "coverage": None,
            "created_at": self._now(),
            "started_at": None,
            "finished_at": None,
            "duration": None,
            "retried": False,
            "pipeline": {k: pipeline[k] for k in ("id", "project_id", "ref", "sha", "status")},
            "web_url": f"{self.url}/{self.project}/-/jobs/{job_id}",
            "commit": {"id": pipeline["sha"], "short_id": pipeline["sha"][:8]},
        }
        self.traces[job_id] = trace
        return job_id

    def retry(self, job_id: int, status: str, **changes: Any) -> int:
        """Retry job ``job_id``: the old run is kept as retried, the new one is newest."""
        old = self.jobs[job_id]
        old["retried"] = True
        new = self.add_job(old["pipeline"]["id"], old["name"], status, **changes)
        return new

    # --- GitLab's answers ------------------------------------------------------------

    def answer(
        self, route: str, p: dict[str, str], query: dict[str, list[str]], statuses: list[Any]
    ) -> tuple[int, Any]:
        if route == "/projects/{id}/pipelines":
            sha = (query.get("sha") or [None])[0]
            found = [v for v in self.pipelines.values() if sha in (None, v["sha"])]
            descending = (query.get("sort") or ["desc"])[0] == "desc"
            return 200, sorted(found, key=lambda v: int(v["id"]), reverse=descending)
        if route == "/projects/{id}/pipelines/{pipeline_id}/jobs":
            pipeline_id = int(p["pipeline_id"])
            if pipeline_id not in self.pipelines:
                return 404, {"message": "404 Not found"}
            retried = (query.get("include_retried") or ["false"])[0] == "true"
            jobs = [
                _public(j)
                for j in self.jobs.values()
                if j["pipeline"]["id"] == pipeline_id and (retried or not j["retried"])
            ]
            return 200, sorted(jobs, key=lambda j: int(j["id"]), reverse=True)
        if route == "/projects/{id}/jobs/{job_id}/trace":
            job_id = int(p["job_id"])
            if job_id not in self.jobs or job_id not in self.traces:  # erased, or expired
                return 404, {"message": "404 Not found"}
            return 200, Text(self.traces[job_id])
        if route == "/projects/{id}/repository/commits/{sha}/statuses":
            every = (query.get("all") or ["false"])[0] == "true"
            jobs = [
                _as_status(j)
                for j in self.jobs.values()
                if j["pipeline"]["sha"] == p["sha"] and (every or not j["retried"])
            ]
            return 200, sorted([*jobs, *statuses], key=lambda s: int(s["id"]))
        return 404, {"message": "404 Not Found"}


def _public(job: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in job.items() if k != "retried"}


def _as_status(job: dict[str, Any]) -> dict[str, Any]:
    """A job as the commit statuses endpoint shows it (``CommitStatus``)."""
    return {
        "id": job["id"],
        "sha": job["pipeline"]["sha"],
        "ref": job["ref"],
        "status": job["status"],
        "name": job["name"],
        "target_url": job["web_url"],
        "description": None,
        "created_at": job["created_at"],
        "started_at": None,
        "finished_at": None,
        "allow_failure": job["allow_failure"],
        "coverage": None,
        "pipeline_id": job["pipeline"]["id"],
    }
