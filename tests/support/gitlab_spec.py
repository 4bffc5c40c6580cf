"""GitLab's own description of the REST v4 requests the gitlab forge makes, as a checker.

Each request is matched to an endpoint of ``gitlab/api-v4-subset.json``
(GitLab's own generated OpenAPI description, trimmed; see ``gitlab/README.md``) and
checked against its parameters: an unknown endpoint, an unknown query or body parameter,
a missing required one, or a value of the wrong type (``integer``, ``boolean``,
``string``, ``array`` and its items, an ``enum``) is a *violation*: answered 400 and
recorded, and ``assert_accepted()`` (run by the fixtures after every test) fails the test.

That description lacks some endpoints the forge calls. They are checked against the
parameters GitLab's API documentation (doc/api/notes.md, discussions.md, users.md) and
python-gitlab's managers (``gitlab/v4/objects``) give, written in ``DOCUMENTED`` below:

- ``GET/POST /projects/:id/issues/:issue_iid/notes``, ``PUT …/notes/:note_id``, and the
  same three for ``merge_requests/:merge_request_iid`` (body ``body`` required;
  ``internal``, ``created_at`` optional; list: ``sort`` asc|desc, ``order_by``
  created_at|updated_at, ``page``, ``per_page``);
- ``GET /projects/:id/merge_requests/:merge_request_iid/discussions`` (``page``,
  ``per_page``);
- ``GET /users`` (``username``, ``search``, ``active``, ``page``, ``per_page``) and
  ``GET /user`` (no parameters);
- ``GET /projects/:id/issues`` (doc/api/issues.md, python-gitlab's
  ``ProjectIssueManager``: ``labels`` a comma-separated string, ``state``
  opened|closed|all, ``order_by`` created_at|updated_at|…, ``sort`` asc|desc, ``page``,
  ``per_page``).

(The description's own ``absent`` list also names ``POST …/discussions``: the forge does
not call it.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SPEC = Path(__file__).parent / "gitlab" / "api-v4-subset.json"
CI_SPEC = SPEC.with_name("api-v4-ci.json")  # the pipelines, jobs and trace the CI gate reads
_P = {"name": "id", "in": "path", "type": "string", "required": True}
_PAGES = [
    {"name": "page", "in": "query", "type": "integer"},
    {"name": "per_page", "in": "query", "type": "integer"},
]
_LIST_NOTES = [
    *_PAGES,
    {"name": "sort", "in": "query", "type": "string", "enum": ["asc", "desc"]},
    {"name": "order_by", "in": "query", "type": "string", "enum": ["created_at", "updated_at"]},
]
_NOTE_BODY = {
    "name": "note",
    "in": "body",
    "required": True,
    "properties": [
        {"name": "body", "type": "string", "required": True},
        {"name": "internal", "type": "boolean", "required": False},
        {"name": "created_at", "type": "string", "required": False},
    ],
}


def _documented() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for kind, iid in (("issues", "issue_iid"), ("merge_requests", "merge_request_iid")):
        base = f"/api/v4/projects/{{id}}/{kind}/{{{iid}}}/notes"
        path_params = [_P, {"name": iid, "in": "path", "type": "integer", "required": True}]
        note = {"name": "note_id", "in": "path", "type": "integer", "required": True}
        found[f"GET {base}"] = {"params": [*path_params, *_LIST_NOTES]}
        found[f"POST {base}"] = {"params": [*path_params, _NOTE_BODY]}
        found[f"PUT {base}/{{note_id}}"] = {"params": [*path_params, note, _NOTE_BODY]}
    mr = [_P, {"name": "merge_request_iid", "in": "path", "type": "integer", "required": True}]
    threads = "/api/v4/projects/{id}/merge_requests/{merge_request_iid}/discussions"
    found[f"GET {threads}"] = {"params": [*mr, *_PAGES]}
    users = [
        {"name": "username", "in": "query", "type": "string"},
        {"name": "search", "in": "query", "type": "string"},
        {"name": "active", "in": "query", "type": "boolean"},
        *_PAGES,
    ]
    found["GET /api/v4/users"] = {"params": users}
    found["GET /api/v4/user"] = {"params": []}
    issues = [
        _P,
        {"name": "labels", "in": "query", "type": "string"},
        {"name": "state", "in": "query", "type": "string", "enum": ["opened", "closed", "all"]},
        {
            "name": "order_by",
            "in": "query",
            "type": "string",
            "enum": ["created_at", "updated_at", "priority", "due_date", "relative_position"],
        },
        {"name": "sort", "in": "query", "type": "string", "enum": ["asc", "desc"]},
        *_PAGES,
    ]
    found["GET /api/v4/projects/{id}/issues"] = {"params": issues}
    return found


DOCUMENTED = _documented()


class Description:
    """The endpoints of ``SPEC`` and ``DOCUMENTED``: which one a request is, and what in it
    breaks the description."""

    def __init__(self) -> None:
        self.spec = {
            **json.loads(SPEC.read_text())["endpoints"],
            **json.loads(CI_SPEC.read_text())["endpoints"],
            **DOCUMENTED,
        }
        self._routes = [(key, *_template(key)) for key in self.spec]

    def pages(self, endpoint: str) -> bool:
        """Whether the endpoint's answer is paginated (it takes ``page``)."""
        return any(p["name"] == "page" for p in self.spec[endpoint]["params"])

    def match(self, method: str, segments: list[str]) -> tuple[str, dict[str, str]]:
        for key, verb, parts in self._routes:
            if verb != method or len(parts) != len(segments):
                continue
            params: dict[str, str] = {}
            for part, segment in zip(parts, segments, strict=True):
                if part.startswith("{"):
                    params[part[1:-1]] = segment
                elif part != segment:
                    break
            else:
                return key, params
        return "", {}

    def check(
        self, endpoint: str, path: dict[str, str], query: dict[str, list[str]], body: Any
    ) -> list[str]:
        if not endpoint:
            return ["no such endpoint in GitLab's description or documentation"]
        problems: list[str] = []
        declared = self.spec[endpoint]["params"]
        by_place = {p["in"]: [] for p in declared}
        for p in declared:
            by_place[p["in"]].append(p)
        for p in by_place.get("path", []):
            problems += _typed(p, path.get(p["name"]), "path")
        known = {p["name"]: p for p in by_place.get("query", [])}
        for name, values in query.items():
            spec = known.get(name) or known.get(name.removesuffix("[]"))
            if spec is None:
                problems.append(f"unknown query parameter {name!r}")
                continue
            for value in values:
                problems += _typed(spec, value, "query")
        for p in by_place.get("query", []):
            if p.get("required") and p["name"] not in query:
                problems.append(f"missing required query parameter {p['name']!r}")
        bodies = by_place.get("body", [])
        if bodies:
            if not isinstance(body, dict):
                return [*problems, "the body is not a JSON object"]
            props = {p["name"]: p for p in bodies[0]["properties"]}
            for name, value in body.items():
                if name not in props:
                    problems.append(f"unknown body parameter {name!r}")
                else:
                    problems += _json_typed(props[name], value)
            for name, p in props.items():
                if p.get("required") and name not in body:
                    problems.append(f"missing required body parameter {name!r}")
        elif body not in (None, {}, ""):
            problems.append("a body where the endpoint takes none")
        return problems


def _template(key: str) -> tuple[str, list[str]]:
    method, path = key.split(" ", 1)
    return method, path.split("/")


def _typed(spec: dict[str, Any], value: str | None, where: str) -> list[str]:
    """A path or query value (a string on the wire) against its declared type."""
    name = spec["name"]
    if value is None:
        return [f"missing {where} parameter {name!r}"] if spec.get("required") else []
    kind = spec.get("type")
    if kind == "array":
        kind = (spec.get("items") or {}).get("type", "string")
    if kind == "integer" and not re.fullmatch(r"-?\d+", value):
        return [f"{where} parameter {name!r}={value!r} is not an integer"]
    if kind == "boolean" and value not in ("true", "false"):
        return [f"{where} parameter {name!r}={value!r} is not a boolean"]
    if "enum" in spec and value not in spec["enum"]:
        return [f"{where} parameter {name!r}={value!r} is not one of {spec['enum']}"]
    return []


def _json_typed(spec: dict[str, Any], value: Any) -> list[str]:
    """A JSON body value against its declared type."""
    name, kind = spec["name"], spec.get("type")
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    check = checks.get(str(kind))
    if check is not None and not check(value):
        return [f"body parameter {name!r}={value!r} is not of type {kind}"]
    if kind == "array":
        item = {**(spec.get("items") or {}), "name": f"{name}[]"}
        return [p for v in value for p in _json_typed(item, v)]
    if "enum" in spec and value not in spec["enum"]:
        return [f"body parameter {name!r}={value!r} is not one of {spec['enum']}"]
    return []
