"""What `.agentrun.toml` may say: one frozen pydantic model per table (DESIGN §10).

The models check what one value or one table can check on its own (a step names one
kind, ``pass_env`` never reaches a secret); ``config/load.py`` reads the file and puts
the models' complaints in TOML's words.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PHASE_ROLES = (
    "plan",
    "plan-review",
    "implement",
    "code-review",
    "verify",
    "finalize",
    "reconcile",
    "select",
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]!]+$")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


RuntimeKind = Literal["script", "command", "claude", "codex", "aider", "openai", "anthropic"]
BUILTIN_RUNTIMES: tuple[RuntimeKind, ...] = ("claude", "codex", "aider", "openai", "anthropic")
# The output tokens one model response may take, unless ``max_output_tokens`` says: what
# the API runtimes send as the request's cap, and Claude Code's own default
# (CLAUDE_CODE_MAX_OUTPUT_TOKENS); for Codex and aider, which set no cap of their own, a
# response of today's models at its common largest. ``script`` and ``command`` agents
# are programs, not one model: their output is not capped. A role's first session is
# estimated at its prompt plus this (DESIGN §4).
DEFAULT_MAX_OUTPUT_TOKENS: dict[RuntimeKind, int] = {
    "anthropic": 8192,
    "openai": 16384,
    "claude": 32000,
    "codex": 32000,
    "aider": 8192,
    "script": 0,
    "command": 0,
}


class RuntimeConfig(_Model):
    """One named runtime (DESIGN §7).

    ``script`` plays a scripted agent; ``command`` runs any program; ``claude``,
    ``codex`` and ``aider`` run those CLIs; ``openai`` (any OpenAI-compatible
    chat-completions endpoint) and ``anthropic`` talk to model APIs over HTTP.
    The built-in kinds may be named in ``roles`` without a table of their own.
    """

    kind: RuntimeKind
    script: str | None = None
    command: tuple[str, ...] | None = None
    prompt: Literal["stdin", "arg"] = "stdin"
    env: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    binary: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    allowed_tools: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    shell: bool = False
    max_retries: int = Field(default=3, ge=0)
    request_timeout_seconds: float = Field(default=300, gt=0)
    max_output_tokens: int | None = Field(default=None, gt=0)  # per model response
    pass_env: tuple[str, ...] = ()  # more variables (fnmatch patterns) for this runtime

    @model_validator(mode="after")
    def _needs_its_input(self) -> RuntimeConfig:
        if self.kind == "script" and not self.script:
            raise ValueError('a script runtime needs `script = "path/to/script.toml"`')
        if self.kind == "command" and not self.command:
            raise ValueError('a command runtime needs `command = ["program", "arg", ...]`')
        return self

    @property
    def output_cap(self) -> int:
        """The output tokens one model response may take: ``max_output_tokens``, else the
        kind's default (DEFAULT_MAX_OUTPUT_TOKENS)."""
        return self.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS[self.kind]


class Price(_Model):
    """US dollars per million tokens: input billed at the full rate, output, and input read
    from or written to a prompt cache. A cache rate left out is priced as
    ``agentrun.prices.cost_of`` says (never below what a provider charges)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class Budget(_Model):
    """Hard limits per build; crossing one parks the build with a policy escalation."""

    max_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_minutes: float | None = Field(default=None, gt=0)


class Policy(_Model):
    max_phase_attempts: int = Field(default=2, ge=1)
    max_review_rounds: int = Field(default=3, ge=1)
    # Agent sessions at once: of one build's tasks, and of all builds of the repository
    # on this machine (checks do not count).
    max_parallel: int = Field(default=4, ge=1)
    max_sessions: int = Field(default=8, ge=1)
    # The same failure this many implement rounds in a row parks the build (a stall).
    stall_rounds: int = Field(default=2, ge=1)
    session_budget_seconds: float = Field(default=1800, gt=0)
    check_timeout_seconds: float = Field(default=600, gt=0)
    # Who lets an approved plan go on to implement: its review ("agent"), or a person
    # too ("human"): the build then parks with the plan as its question.
    plan_approval: Literal["agent", "human"] = "agent"


class Pipeline(_Model):
    plan_review: bool = True
    code_review: bool = True


class Candidates(_Model):
    """Best of N: each implement round runs N candidates side by side, and one goes on.

    ``implement``: the runtimes, one candidate each (entries as in ``[roles]``); or
    ``count``: that many candidates on the implement role's own runtime.
    """

    implement: tuple[str, ...] = ()
    count: int | None = Field(default=None, ge=2, le=8)

    @model_validator(mode="after")
    def _one_way(self) -> Candidates:
        if self.implement and self.count is not None:
            raise ValueError("give implement (the runtimes) or count, not both")
        if len(self.implement) == 1:
            raise ValueError("implement needs two runtimes or more (one is not a choice)")
        if len(self.implement) > 8:
            raise ValueError("at most 8 candidates")
        return self


class Ladder(_Model):
    """A role's model ladder: its sessions run on the cheapest rung first and climb to the
    next after ``climb_after`` failed rounds (or when a phase runs out of attempts).

    ``rungs``: cheapest first, entries as in ``[roles]`` (``NAME`` or ``NAME:MODEL``).
    """

    rungs: tuple[str, ...]
    climb_after: int = Field(default=1, ge=1, strict=True)

    @field_validator("rungs")
    @classmethod
    def _a_ladder(cls, rungs: tuple[str, ...]) -> tuple[str, ...]:
        if not 2 <= len(rungs) <= 8:
            raise ValueError(
                f"a ladder needs 2 to 8 rungs, cheapest first (it has {len(rungs)}); "
                "one runtime is a [roles] entry"
            )
        twice = sorted({r for r in rungs if rungs.count(r) > 1})
        if twice:
            raise ValueError(f"a rung is named twice: {', '.join(twice)}")
        return rungs


class VerifyStep(_Model):
    """A deterministic ``command`` run in the worktree, or an ``agent`` verify (a role name)."""

    name: str
    command: str | None = None
    agent: str | None = None
    paths: tuple[str, ...] = ()
    pass_env: tuple[str, ...] = ()  # more variables (fnmatch patterns) for this step

    @model_validator(mode="after")
    def _one_kind(self) -> VerifyStep:
        if (self.command is None) == (self.agent is None):
            raise ValueError(f"step {self.name!r} needs exactly one of `command` or `agent`")
        if not (self.command or self.agent or "").strip():
            raise ValueError(f"step {self.name!r} has an empty `command` or `agent`")
        return self

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value or any(c in value for c in " /@:\t\n"):
            raise ValueError("a step name must be a plain word (no spaces, '/', '@' or ':')")
        return value


class FinalizeStep(VerifyStep):
    """Failure-tolerant: a failure is recorded as an observation, never turns a build red."""


class SetupStep(_Model):
    """A command that prepares each build worktree (dependencies, a virtualenv): run before
    the first session or check there, and again when a file ``inputs`` matches changed."""

    command: str | tuple[str, ...] | None = None  # a string runs in bash, a list as is
    timeout_seconds: float = Field(default=1800, gt=0)
    inputs: tuple[str, ...] = ()  # gitignore-style patterns: "requirements*.txt", ...
    pass_env: tuple[str, ...] = ()

    @field_validator("command")
    @classmethod
    def _something(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        if value is not None and not (value if isinstance(value, str) else "".join(value)).strip():
            raise ValueError("the setup command is empty: leave it out, or say what to run")
        return value


class StateLabels(_Model):
    """The labels that show a build's state on its issue and proposal (hosted forges)."""

    running: str = "agentrun:running"
    parked: str = "agentrun:parked"
    done: str = "agentrun:done"
    failed: str = "agentrun:failed"


class ForgeConfig(_Model):
    """Where proposals go: ``auto`` picks the forge of ``origin``'s host, else ``local``."""

    kind: Literal["auto", "local", "github", "gitlab"] = "auto"
    url: str = "https://gitlab.com"  # the GitLab instance's web URL (CI_SERVER_URL wins)
    label: str = "agentrun"  # the issue label that starts a build
    labels: StateLabels = StateLabels()
    allow_bots: tuple[str, ...] = ()  # bot logins whose /agentrun commands are accepted
    closes_issue: bool = True  # put `Closes #N` in the proposal's body
    # The forge's CI as a gate before ready: exact check or status names, or "all" (every
    # check on the head but agentrun's own agentrun/<step> statuses); None: no gate.
    require_checks: tuple[str, ...] | Literal["all"] | None = None
    checks_timeout_minutes: float = Field(default=60, ge=0)  # for a check to appear

    @field_validator("require_checks")
    @classmethod
    def _check_names(
        cls, value: tuple[str, ...] | Literal["all"] | None
    ) -> tuple[str, ...] | Literal["all"] | None:
        if isinstance(value, tuple) and any(not name.strip() for name in value):
            raise ValueError('a check name is the exact name of a check or status, e.g. "test"')
        return value


class SyncConfig(_Model):
    """With ``remote`` set, the runner claims builds there and syncs at every phase boundary."""

    remote: str | None = None


class Protect(_Model):
    """Paths agents may not change (glob patterns, as in verify ``paths``).

    Enforced before every phase commit and by the pre-push hook on build branches.
    """

    paths: tuple[str, ...] = ()

    @field_validator("paths")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not p.strip() for p in value):
            raise ValueError('a protected path is a glob pattern such as "tests/acceptance/**"')
        return value


class Secrets(_Model):
    """Environment variables whose values must never be committed (besides known token shapes)."""

    env: tuple[str, ...] = ()

    @field_validator("env")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in value if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(
                f"{bad[0]!r} is not an environment variable name (letters, digits and '_')"
            )
        return value


class Isolation(_Model):
    """How agents (and the checks that run their code) are kept from the runner's secrets.

    ``auto``: the strongest level this machine allows under GitHub Actions or GitLab CI,
    ``none`` elsewhere. ``namespace``: bubblewrap (own user, PID, IPC and mount
    namespaces, read-only filesystem). ``user``: an unprivileged account (``user``).
    """

    mode: Literal["auto", "none", "namespace", "user"] = "auto"
    user: str = "agentrun-agent"

    @field_validator("user")
    @classmethod
    def _account(cls, value: str) -> str:
        if not re.match(r"^[a-z_][a-z0-9_-]{0,31}$", value):
            raise ValueError("an account name: lower-case letters, digits, '_' and '-'")
        return value


class MemoryConfig(_Model):
    """Memory across builds: at most ``max_chars`` characters of accepted facts in a prompt."""

    max_chars: int = Field(default=4000, ge=0)


_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class McpServer(_Model):
    """One MCP server the user's agents may call (``[mcp.servers.NAME]``).

    Either a program started over stdio (``command`` and ``args``; ``env`` set as written,
    ``pass_env`` copied from the runner's environment, scrubbed like every credential), or a
    streamable-HTTP server at ``url``. ``timeout_seconds`` bounds its start and each call.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    url: str | None = None
    timeout_seconds: float = Field(default=60, gt=0)

    @field_validator("command", mode="before")
    @classmethod
    def _program_alone(cls, value: object) -> object:
        if isinstance(value, list):
            raise ValueError(
                "`command` is the program alone (a string); its arguments go in `args`"
            )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                'a server is `command = "program"` (stdio) or `url = "https://…"` '
                "(streamable HTTP): exactly one"
            )
        if self.url is not None:
            if self.args or self.env or self.pass_env:
                raise ValueError("`args`, `env` and `pass_env` are for a `command` server")
            if not re.match(r"^https?://", self.url):
                raise ValueError(f"{self.url!r} is not an http:// or https:// URL")
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise ValueError(
                    f"env: {name!r} is not an environment variable name (letters, digits, '_')"
                )
        return self


class McpConfig(_Model):
    """The user's MCP servers, and which roles get which (``[mcp.roles]``; a role without
    an entry takes ``default``'s; with no ``[mcp.roles]`` at all every role gets every
    server). ``agentrun`` is the name of agentrun's own server and cannot be reused."""

    servers: dict[str, McpServer] = Field(default_factory=dict)
    roles: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> McpConfig:
        for name in self.servers:
            if name == "agentrun":
                raise ValueError(
                    "servers.agentrun: 'agentrun' is reserved for agentrun's own server; "
                    "give yours another name"
                )
            if not _SERVER_NAME.match(name):
                raise ValueError(f"servers.{name}: a server name is letters, digits, '_' and '-'")
        for role, names in self.roles.items():
            unknown = [n for n in names if n not in self.servers]
            if unknown:
                raise ValueError(
                    f"roles.{role}: {unknown[0]!r} is not a server of [mcp.servers]"
                    + (f" ({', '.join(sorted(self.servers))})" if self.servers else "")
                )
        return self

    def servers_for(self, role: str) -> tuple[str, ...]:
        """The names of the servers a role's sessions get, in the order configured."""
        if not self.roles:
            return tuple(self.servers)
        return self.roles.get(role, self.roles.get("default", ()))


class Config(_Model):
    roles: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    runtimes: dict[str, RuntimeConfig] = Field(default_factory=dict)
    policy: Policy = Policy()
    budget: Budget = Budget()
    prices: dict[str, Price] = Field(default_factory=dict)
    pipeline: Pipeline = Pipeline()
    verify: tuple[VerifyStep, ...] = ()
    finalize: tuple[FinalizeStep, ...] = ()
    setup: SetupStep = SetupStep()
    forge: ForgeConfig = ForgeConfig()
    sync: SyncConfig = SyncConfig()
    protect: Protect = Protect()
    secrets: Secrets = Secrets()
    isolation: Isolation = Isolation()
    candidates: Candidates = Candidates()
    ladder: dict[str, Ladder] = Field(default_factory=dict)
    memory: MemoryConfig = MemoryConfig()
    mcp: McpConfig = McpConfig()

    @field_validator("roles", mode="before")
    @classmethod
    def _role_lists(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _unique_steps(self) -> Config:
        for group, steps in (("verify", self.verify), ("finalize", self.finalize)):
            names = [s.name for s in steps]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"[[{group}]] step names must be unique: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _pass_env_keeps_secrets(self) -> Config:
        """``pass_env`` may extend what agents and checks see, never to a token or secret."""
        from agentrun.environment import ALWAYS_SECRET

        owned = [(f"runtimes.{n}", r.pass_env) for n, r in self.runtimes.items()]
        owned += [(f"verify.{s.name}", s.pass_env) for s in self.verify]
        owned += [(f"finalize.{s.name}", s.pass_env) for s in self.finalize]
        owned += [("setup", self.setup.pass_env)]
        owned += [(f"mcp.servers.{n}", s.pass_env) for n, s in self.mcp.servers.items()]
        guarded = {**{n: "a forge token" for n in ALWAYS_SECRET}}
        guarded |= {n: "named in [secrets] env" for n in self.secrets.env}
        for where, patterns in owned:
            for pattern in patterns:
                if not _PATTERN.match(pattern):
                    raise ValueError(
                        f"{where}.pass_env: {pattern!r} is not a variable name or pattern "
                        "(letters, digits, '_' and the wildcards * ? [...])"
                    )
                hit = next((n for n in guarded if fnmatch.fnmatchcase(n, pattern)), None)
                if hit is not None:
                    raise ValueError(
                        f"{where}.pass_env: {pattern!r} would pass {hit} ({guarded[hit]}); "
                        "agents and checks never get it"
                    )
        return self

    @model_validator(mode="after")
    def _one_way_to_implement(self) -> Config:
        if "default" in self.ladder:
            raise ValueError(
                "[ladder.default]: a ladder is for one role (plan, implement, code-review, …); "
                "name the role, as in [ladder.implement]"
            )
        both = sorted(set(self.ladder) & set(self.roles))
        if both:
            raise ValueError(
                f"roles.{both[0]} and [ladder.{both[0]}] both route {both[0]}: keep one "
                "(the ladder's rungs are the role's runtimes)"
            )
        if "implement" in self.ladder and self.candidate_runtimes():
            raise ValueError(
                "[ladder.implement] and [candidates] are two ways to run implement: "
                "keep one (candidates run side by side, a ladder one after another)"
            )
        return self

    @model_validator(mode="after")
    def _mcp_roles_exist(self) -> Config:
        known = self.role_names()
        unknown = [r for r in self.mcp.roles if r not in known]
        if unknown:
            raise ValueError(f"[mcp.roles]: {unknown[0]!r} is not a role ({', '.join(known)})")
        return self

    def role_names(self) -> tuple[str, ...]:
        """Every role ``roles`` may route: ``default``, the phases' and the agent steps'."""
        steps = [s.agent for s in (*self.verify, *self.finalize) if s.agent]
        return tuple(dict.fromkeys(("default", *PHASE_ROLES, *steps)))

    def runtime_names(self) -> tuple[str, ...]:
        """The names a ``roles`` entry may use: configured runtimes and the built-in kinds."""
        return tuple(dict.fromkeys((*self.runtimes, *BUILTIN_RUNTIMES)))

    def candidate_runtimes(self) -> tuple[str, ...]:
        """The runtime of each implement candidate (none: one implement, as without)."""
        if self.candidates.implement:
            return self.candidates.implement
        own = self.runtimes_for("implement")
        return own[:1] * self.candidates.count if self.candidates.count and own else ()

    def runtimes_for(self, role: str, rung: int = 0) -> tuple[str, ...]:
        """The runtimes a role is routed to, the first that can be reached runs: its
        ladder from ``rung`` up, else its own entry, else `default`, else empty."""
        ladder = self.ladder.get(role)
        if ladder is not None:
            return ladder.rungs[rung:]
        return self.roles.get(role) or self.roles.get("default") or ()

    def runtime(self, entry: str) -> RuntimeConfig | None:
        """The runtime a ``roles`` entry names: ``NAME`` or ``NAME:MODEL``.

        A configured ``[runtimes.NAME]`` wins; a built-in kind (claude, codex, aider,
        openai, anthropic) needs no table. ``:MODEL`` overrides the model.
        """
        name, _, model = entry.partition(":")
        found = self.runtimes.get(name)
        if found is None and name in BUILTIN_RUNTIMES:
            found = RuntimeConfig(kind=name)
        if found is not None and model:
            found = found.model_copy(update={"model": model})
        return found
