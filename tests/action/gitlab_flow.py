"""What the GitLab CI tests share: GitLab's recorded webhook bodies and GitLab CI jobs.

A "job" is what a GitLab CI pipeline does: a fresh clone of the bare ``file://`` origin
(``GIT_DEPTH: 0``), then ``git agentrun action --forge gitlab`` as a process with the
variables GitLab CI sets and the webhook body as the file ``TRIGGER_PAYLOAD``, against
the fake GitLab (``support.gitlab_api``). Bodies are the ones go-gitlab recorded from
GitLab (Debian's golang-github-xanzy-go-gitlab-dev), adapted only in the project, iids,
labels, logins and note text.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from github_flow import read_outputs, run_action, start_action
from runner.helpers import cli_env
from support.gitlab_api import PROJECT, TESTDATA, GitLabAPI

DEVELOPER, REPORTER = 30, 20


def webhook(name: str) -> dict[str, Any]:
    """GitLab's recorded body of webhook ``name``, in the test project."""
    payload: dict[str, Any] = json.loads((TESTDATA / "webhooks" / f"{name}.json").read_text())
    payload["project"].update(path_with_namespace=PROJECT, default_branch="main")
    return payload


def _user(login: str) -> dict[str, Any]:
    return {"id": 1, "name": login.title(), "username": login, "email": f"{login}@example.com"}


def issue_event(iid: int, login: str, action: str = "update") -> dict[str, Any]:
    payload = webhook("issue")
    payload["object_attributes"].update(iid=iid, action=action)
    payload["user"] = _user(login)
    return payload


def note_event(iid: int, login: str, text: str, on: str = "Issue") -> dict[str, Any]:
    """A note on issue (or, ``on="MergeRequest"``, merge request) ``iid``; what the note
    says and who wrote it are whatever the test makes the payload claim."""
    payload = webhook("note_issue" if on == "Issue" else "note_merge_request")
    payload["object_attributes"].update(note=text, noteable_type=on)
    payload["issue" if on == "Issue" else "merge_request"]["iid"] = iid
    payload["user"] = _user(login)
    return payload


def merge_request_event(iid: int, branch: str, action: str, login: str) -> dict[str, Any]:
    payload = webhook("merge_request")
    payload["object_attributes"].update(iid=iid, source_branch=branch, action=action)
    payload["user"] = _user(login)
    return payload


@dataclass
class Pipeline:
    """One GitLab CI job in ``checkout``: a webhook's (``payload``) or a scheduled one."""

    checkout: Path
    api: GitLabAPI
    payload: dict[str, Any] | None
    source: str = "trigger"
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def output(self) -> Path:
        return self.checkout.parent / f"{self.checkout.name}.env"

    def env(self) -> dict[str, str]:
        env = {
            **self.api.env(),
            "GITLAB_CI": "true",
            "CI_PIPELINE_SOURCE": self.source,
            "CI_DEFAULT_BRANCH": "main",
            "AGENTRUN_OUTPUT": str(self.output),
            **self.extra_env,
        }
        if self.payload is not None:
            path = self.checkout.parent / f"{self.checkout.name}.payload.json"
            path.write_text(json.dumps(self.payload))
            env["TRIGGER_PAYLOAD"] = str(path)
        return cli_env(env)

    def popen(self) -> subprocess.Popen[str]:
        return start_action(self.checkout, self.env(), ())

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_action(self.checkout, self.env(), args)

    def outputs(self) -> dict[str, str]:
        return read_outputs(self.output)
