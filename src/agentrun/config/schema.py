"""What `.agentrun.toml` may say: one frozen pydantic model per table (DESIGN §10).

The models check what one value or one table can check on its own (a step names one
kind, ``pass_env`` never reaches a secret); ``config/load.py`` reads the file and puts
the models' complaints in TOML's words.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agentrun.config.base import ENV_NAME, PATTERN, Table
from agentrun.config.mcp import McpConfig
from agentrun.config.runtimes import (
    BUILTIN_RUNTIMES,
    Price,
    RuntimeConfig,
)
from agentrun.config.steps import FinalizeStep, SetupStep, VerifyStep

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


class Budget(Table):
    """Hard limits per build; crossing one parks the build with a policy escalation."""

    max_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_wall_minutes: float | None = Field(default=None, gt=0)


class Policy(Table):
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


class Pipeline(Table):
    plan_review: bool = True
    code_review: bool = True


class Candidates(Table):
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


class Ladder(Table):
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


class StateLabels(Table):
    """The labels that show a build's state on its issue and proposal (hosted forges)."""

    running: str = "agentrun:running"
    parked: str = "agentrun:parked"
    done: str = "agentrun:done"
    failed: str = "agentrun:failed"


class ForgeConfig(Table):
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


class SyncConfig(Table):
    """With ``remote`` set, the runner claims builds there and syncs at every phase boundary."""

    remote: str | None = None


class Protect(Table):
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


class Secrets(Table):
    """Environment variables whose values must never be committed (besides known token shapes)."""

    env: tuple[str, ...] = ()

    @field_validator("env")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in value if not ENV_NAME.match(name)]
        if bad:
            raise ValueError(
                f"{bad[0]!r} is not an environment variable name (letters, digits and '_')"
            )
        return value


class Isolation(Table):
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


class MemoryConfig(Table):
    """Memory across builds: at most ``max_chars`` characters of accepted facts in a prompt."""

    max_chars: int = Field(default=4000, ge=0)


class Config(Table):
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
                if not PATTERN.match(pattern):
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
