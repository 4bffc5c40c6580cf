"""The agent tools' catalogue: each tool's name, description and arguments, once.

The files of the worktree, an optional shell, ``context``, and the agent verbs of
DESIGN §6 as tools (a phase gets only the verbs that fit it). Each wire adapter wraps a
:class:`ToolSpec`'s schema in its provider's shape; :mod:`agentrun.runtimes.tools` runs
the calls and answers a :class:`ToolResult`. ``git agentrun mcp`` (:mod:`agentrun.cli.mcp_server`)
offers the verbs from here too, named as the verbs are, with :meth:`ToolSpec.problem`
checking the arguments and :func:`report_of` making the verb's report of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrun.kernel.verbs import PHASE_VERBS, VerbReport


@dataclass(frozen=True)
class ToolSpec:
    """One tool, described once; each wire adapter wraps :meth:`schema` in its own shape."""

    name: str
    description: str
    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    optional: tuple[str, ...] = ()
    # A schema given whole (an MCP server's tool's own), instead of ``properties``.
    input_schema: dict[str, Any] | None = None

    def schema(self) -> dict[str, Any]:
        if self.input_schema is not None:
            return self.input_schema
        return {
            "type": "object",
            "properties": self.properties,
            "required": [key for key in self.properties if key not in self.optional],
            "additionalProperties": False,
        }

    def problem(self, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` against the schema (None: nothing), in words a
        model can act on."""
        for key in arguments:
            if key not in self.properties:
                known = ", ".join(self.properties) or "none"
                return f"`{self.name}` takes no argument {key!r} (its arguments: {known})"
        for key, schema in self.properties.items():
            if key not in arguments:
                if key in self.optional:
                    continue
                return f"`{self.name}` needs `{key}`: {schema.get('description', '')}"
            if not _fits(arguments[key], schema):
                return f"`{key}` must be {_kind(schema)}"
        return None


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


def _fits(value: object, schema: dict[str, Any]) -> bool:
    kind = schema.get("type", "string")
    if isinstance(value, bool) and kind != "boolean":
        return False  # JSON's true is no number
    if not isinstance(value, _TYPES[kind]):
        return False
    if isinstance(value, int) and value < schema.get("minimum", value):
        return False
    items = schema.get("items")
    return not (isinstance(value, list) and items and not all(_fits(v, items) for v in value))


def _kind(schema: dict[str, Any]) -> str:
    kind = str(schema.get("type", "string"))
    if kind == "array":
        return f"a list of {schema.get('items', {}).get('type', 'string')}s"
    if kind == "integer" and "minimum" in schema:
        return f"an integer of at least {schema['minimum']}"
    return {"integer": "an integer", "array": "a list"}.get(kind, f"a {kind}")


@dataclass(frozen=True)
class ToolResult:
    text: str
    error: bool = False
    terminal: bool = False  # a verb that ends the phase was recorded


def _str(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _bool(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


PATH = _str("a path relative to the worktree root, e.g. src/app.py")
ENDS = "; this ends the phase."
FILE_TOOLS = (
    ToolSpec("read_file", "Read a text file of the worktree.", {"path": PATH}),
    ToolSpec(
        "list_files",
        "List the files under a folder of the worktree, recursively (.git and what git "
        "ignores left out).",
        {"path": _str("a folder relative to the worktree root; default: the root")},
        ("path",),
    ),
    ToolSpec(
        "search",
        "Find the lines of the worktree's files that contain `pattern` (plain text, or a "
        "Python regular expression when `regex` is true). Answers path:line: text.",
        {
            "pattern": _str("the text or regular expression to find"),
            "path": _str("a folder or file to search; default: the whole worktree"),
            "regex": _bool("treat pattern as a regular expression"),
        },
        ("path", "regex"),
    ),
    ToolSpec(
        "write_file",
        "Create or overwrite a file of the worktree with `content`.",
        {"path": PATH, "content": _str("the whole new content of the file")},
    ),
    ToolSpec(
        "edit_file",
        "Replace the exact text `old` with `new` in a file. `old` must occur exactly once "
        "(include surrounding lines to make it unique) unless `replace_all` is true.",
        {
            "path": PATH,
            "old": _str("the exact text to replace"),
            "new": _str("the replacement"),
            "replace_all": _bool("replace every occurrence"),
        },
        ("replace_all",),
    ),
)
SHELL = ToolSpec(
    "shell",
    "Run a bash command in the worktree (e.g. the tests). Answers its exit status and output.",
    {"command": _str("the bash command line")},
)
CONTEXT = ToolSpec(
    "context", "Everything known about this build: goal, plan, feedback for this round, answers."
)
FINDINGS = {"type": "array", "items": {"type": "string"}, "description": "what to change"}
# The verbs of DESIGN §6 by verb name; the tool name is what the model sees.
VERB_TOOLS: dict[str, ToolSpec] = {
    "plan": ToolSpec("submit_plan", "Submit the plan" + ENDS, {"plan": _str("the plan")}),
    "approve": ToolSpec("approve", "Approve what you reviewed" + ENDS),
    "revise": ToolSpec("revise", "Ask for a revision" + ENDS, {"findings": FINDINGS}),
    "done": ToolSpec(
        "done",
        "Report the work finished" + ENDS,
        {"summary": _str("one line: what changed")},
        ("summary",),
    ),
    "pass": ToolSpec("pass", "The change passes this verify step" + ENDS),
    "fail": ToolSpec("fail", "The change fails this verify step" + ENDS, {"reason": _str("why")}),
    "escalate": ToolSpec(
        "escalate",
        "Ask a human; the build waits for the answer" + ENDS,
        {"question": _str("the question")},
    ),
    "select": ToolSpec(
        "select",
        "Choose the candidate to keep (select phase)" + ENDS,
        {"number": {"type": "integer", "minimum": 1, "description": "its number, from 1"}},
    ),
}
# The argument that carries a verb's text.
VERB_TEXT = {"plan": "plan", "done": "summary", "fail": "reason", "escalate": "question"}
# Verbs any phase takes, which end nothing (kernel.verbs.ANY_PHASE_VERBS, and usage).
REMEMBER = ToolSpec(
    "remember",
    "Propose a fact for later builds of this repository (a person accepts it before any "
    "prompt carries it); this does not end the phase.",
    {
        "text": _str("the fact, one or two sentences"),
        "paths": {"type": "array", "items": {"type": "string"}, "description": "globs it concerns"},
    },
    ("paths",),
)
USAGE = ToolSpec(
    "usage",
    "Report tokens this session spent (a command agent's only way; each call adds).",
    {
        "tokens_in": {"type": "integer", "description": "input tokens at the full rate"},
        "tokens_out": {"type": "integer", "description": "output tokens"},
        "cache_read": {"type": "integer", "description": "input tokens read from a cache"},
        "cache_write": {"type": "integer", "description": "input tokens written to a cache"},
        "cost": {"type": "number", "description": "what they cost in USD"},
        "model": _str("the model they were spent on, to price them"),
    },
    ("cache_read", "cache_write", "cost", "model"),
)


def verbs_of(phase: str) -> tuple[str, ...]:
    return PHASE_VERBS.get(phase.split(":", 1)[0], ())


def tool_specs(phase: str, shell: bool) -> tuple[ToolSpec, ...]:
    """The tools a session of ``phase`` gets: files, maybe the shell, its verbs, context,
    and ``remember`` (every phase may propose a fact; it ends nothing)."""
    verbs = tuple(VERB_TOOLS[v] for v in verbs_of(phase))
    return (*FILE_TOOLS, *((SHELL,) if shell else ()), *verbs, CONTEXT, REMEMBER)


def report_of(verb: str, arguments: dict[str, Any]) -> VerbReport:
    """The report a verb's tool call makes, its arguments already checked by
    :meth:`ToolSpec.problem`; the verb's own rules (an empty plan, …) are the kernel's."""
    if verb == "revise":
        findings = tuple(f for f in arguments.get("findings", ()) if f.strip())
        return VerbReport(verb, findings=findings)
    if verb == "select":
        return VerbReport(verb, str(arguments["number"]))
    if verb == "remember":
        return VerbReport(verb, arguments["text"], paths=tuple(arguments.get("paths", ())))
    key = VERB_TEXT.get(verb)
    return VerbReport(verb, str(arguments.get(key, "")) if key else "")
