"""GitHub's GraphQL endpoint, as far as agentrun uses it, checked against GitHub's schema.

``@octokit/graphql-schema`` ships GitHub's public schema (``schema.json``, introspection
format). Every query is parsed, validated and executed against it with graphql-core, so
a misspelt field, a wrong argument type or a missing variable is an error exactly as
GitHub would report it. Only ``markPullRequestReadyForReview`` and
``convertPullRequestToDraft`` have resolvers (REST has no way to change a pull request's
draft state); any other root field resolves to null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from graphql import (
    GraphQLSchema,
    build_client_schema,
    graphql_sync,
    parse,
    validate,
)
from graphql.error import GraphQLError

SCHEMA_JSON = (
    Path(__file__).resolve().parents[1]
    / "clients"
    / "node_modules"
    / "@octokit"
    / "graphql-schema"
    / "schema.json"
)


@cache
def github_schema() -> GraphQLSchema:
    if not SCHEMA_JSON.exists():
        raise RuntimeError(
            f"{SCHEMA_JSON} is missing: run `npm ci --prefix tests/clients` (scripts/check does)"
        )
    return build_client_schema(json.loads(SCHEMA_JSON.read_text()))


@dataclass
class GraphQLStub:
    """Answers GraphQL requests; remembers the pull requests it marked ready (by node id)."""

    readied: list[str] = field(default_factory=list)
    drafted: list[str] = field(default_factory=list)

    def answer(self, request: Any) -> tuple[dict[str, Any], list[str]]:
        """The JSON answer to one request body, and the errors found (empty when valid)."""
        if not isinstance(request, dict) or not isinstance(request.get("query"), str):
            message = 'a GraphQL request is a JSON object with a "query" string'
            return {"errors": [{"message": message}]}, [message]
        variables = request.get("variables") or {}
        schema = github_schema()
        try:
            document = parse(request["query"])
        except GraphQLError as exc:
            return {"errors": [{"message": exc.message}]}, [exc.message]
        problems = validate(schema, document)
        if problems:
            messages = [p.message for p in problems]
            return {"errors": [{"message": m} for m in messages]}, messages
        result = graphql_sync(
            schema,
            request["query"],
            root_value={
                "markPullRequestReadyForReview": self._mark_ready,
                "convertPullRequestToDraft": self._mark_draft,
            },
            variable_values=variables,
            operation_name=request.get("operationName"),
        )
        answer: dict[str, Any] = {"data": result.data}
        if result.errors:
            answer["errors"] = [{"message": e.message} for e in result.errors]
        return answer, [e.message for e in result.errors or ()]

    def _mark_ready(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        node = input["pullRequestId"]
        self.readied.append(node)
        return {
            "clientMutationId": input.get("clientMutationId"),
            "pullRequest": {"id": node, "isDraft": False, "state": "OPEN"},
        }

    def _mark_draft(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        node = input["pullRequestId"]
        self.drafted.append(node)
        return {
            "clientMutationId": input.get("clientMutationId"),
            "pullRequest": {"id": node, "isDraft": True, "state": "OPEN"},
        }
