"""``git agentrun doctor``: which runtimes can run here, which one ``run`` would pick, what
a local model costs, and the isolation level agents would run at (and why)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pygit2

from agentrun.config import BUILTIN_RUNTIMES, Config, RuntimeConfig, load_config
from agentrun.errors import ConfigError
from agentrun.prices import is_local, price_of
from agentrun.runtimes.base import Probe, probe_runtime

# The order in which `run` tries runtimes when no role is configured.
AUTO_ORDER = ("claude", "codex", "anthropic", "openai", "aider")


@dataclass(frozen=True)
class RuntimeRow:
    name: str
    kind: str
    roles: tuple[str, ...]
    probe: Probe


@dataclass(frozen=True)
class Diagnosis:
    rows: list[RuntimeRow]
    default: tuple[str, ...]  # what the default role runs on (picked when not configured)
    default_ok: bool
    picked: bool  # the default was picked here, not configured
    isolation: str = ""  # "isolation: namespace (auto (GITHUB_ACTIONS=true): ...)"
    isolation_ok: bool = True
    forge: str = ""  # "forge: local (auto: origin is on neither github.com nor …)"
    forge_ok: bool = True
    prices: tuple[str, ...] = ()  # "price: local runs llama3 on this machine (…): $0 …"
    budgets: tuple[str, ...] = ()  # budgets no runtime can hold (unenforced_budgets)
    checks: tuple[str, ...] = ()  # the CI gate's ([forge] require_checks), and its token


def forge_line(repo: pygit2.Repository, config: Config) -> tuple[str, bool]:
    """The forge builds here would use, and why; not ok when one asked for cannot open."""
    from agentrun import extras
    from agentrun.forge.base import forge_kind, origin_on_github

    asked = config.forge.kind
    kind = forge_kind(repo, asked)
    if asked != "auto":
        if kind in extras.EXTRAS and not extras.installed(kind):
            needs = extras.EXTRAS[kind][1]
            return (
                f"forge: {kind} (configured) cannot open: it needs {needs}: "
                f"{extras.install_command(kind)}",
                False,
            )
        return f"forge: {kind} (configured)", True
    if kind == "github":
        return "forge: github (auto: origin is on github.com)", True
    if kind == "gitlab":
        return "forge: gitlab (auto: origin is on gitlab.com or on [forge] url's host)", True
    if origin_on_github(repo):
        return (
            "forge: local (auto: origin is on github.com, but the github forge is not "
            f"installed: {extras.install_command('github')})",
            True,
        )
    return "forge: local (auto: origin is on neither github.com nor a GitLab host)", True


# Said by `doctor` and by `git agentrun action` when the gate is on.
WORKFLOW_TOKEN = (
    "pushes made with the workflow's own token (github.token) start no workflows, so your "
    "CI does not run on agentrun's pushes and [forge] require_checks would wait for checks "
    "that never come: give the action a GitHub App's token (github-token; the README's "
    "GitHub App section)"
)
DEFAULT_TOKEN = "AGENTRUN_DEFAULT_TOKEN"  # action.yml: "true" when github-token is github.token


def checks_lines(repo: pygit2.Repository, config: Config, environ: Mapping[str, str]) -> list[str]:
    """What the CI gate waits for, and whether agentrun's pushes can start that CI."""
    from agentrun.forge.base import forge_kind

    wanted = config.forge.require_checks
    if wanted is None:
        return []
    kind = forge_kind(repo, config.forge.kind)
    names = "every check" if wanted == "all" else ", ".join(wanted)
    minutes = f"{config.forge.checks_timeout_minutes:g}"
    if kind == "local":
        return [f"checks: [forge] require_checks ({names}) needs a hosted forge; this is local"]
    lines = [f"checks: ready waits for {names} on the head (a question after {minutes} min)"]
    if kind == "github":
        if environ.get(DEFAULT_TOKEN) == "true":
            lines.append(f"checks: warning: {WORKFLOW_TOKEN}")
        else:
            lines.append(
                "checks: note: pushes made with the workflow's own token start no workflows; "
                "in Actions, give agentrun a GitHub App's token (the README's GitHub App section)"
            )
    return lines


def price_line(name: str, runtime: RuntimeConfig, config: Config) -> str | None:
    """What a local model's sessions cost (None for a runtime that is not local)."""
    if not is_local(runtime):
        return None
    model = runtime.model or "its default model"
    where = f"price: {name} runs {model} on this machine ({runtime.base_url})"
    price = price_of(runtime.model, config.prices)
    if price is None:
        return f'{where}: it costs $0 unless [prices."{runtime.model or "MODEL"}"] prices it'
    return f"{where}: priced at ${price.input:g} in, ${price.output:g} out per million tokens"


def unenforced_budgets(config: Config) -> list[str]:
    """A token or dollar budget on a runtime whose usage only its agent reports (a
    ``command`` runtime routed to a role): one line per such runtime, naming its roles,
    the budget and what makes it enforceable. Said by ``doctor`` and when ``run`` starts."""
    from agentrun.agent.usage import reported_by_agent

    budget = config.budget
    named = [f"max_tokens = {budget.max_tokens}"] if budget.max_tokens is not None else []
    named += [f"max_cost_usd = {budget.max_cost_usd:g}"] if budget.max_cost_usd else []
    if not named:
        return []
    roles: dict[str, list[str]] = {}
    for role in dict.fromkeys((*config.roles, *config.ladder)):
        ladder = config.ladder.get(role)
        for entry in (*config.roles.get(role, ()), *(ladder.rungs if ladder else ())):
            runtime = config.runtime(entry)
            if runtime is not None and reported_by_agent(runtime.kind):
                roles.setdefault(f"{entry.partition(':')[0]} ({runtime.kind}", []).append(role)
    lines = []
    for name, routed in roles.items():
        which = list(dict.fromkeys(routed))
        lines.append(
            f"budget: {' and '.join(named)} cannot be enforced on runtime {name}, "
            f"role{'s' if len(which) > 1 else ''} {', '.join(which)}): its usage is unreported "
            "unless the agent reports it with `git agentrun agent usage`, which makes the "
            "budget enforceable"
        )
    return lines


def isolation_line(config: Config, environ: Mapping[str, str]) -> tuple[str, bool]:
    from agentrun.isolation import IsolationError, resolve

    try:
        level = resolve(config.isolation, environ)
    except IsolationError as exc:
        return f"isolation: impossible: {exc}", False
    return f"isolation: {level.mode} ({level.why})", True


def diagnose(config: Config, environ: Mapping[str, str] | None = None) -> Diagnosis:
    env = os.environ if environ is None else environ
    isolation, isolation_ok = isolation_line(config, env)
    names: dict[str, list[str]] = {}
    for role, entries in config.roles.items():
        for entry in entries:
            names.setdefault(entry, []).append(role)
    for role, ladder in config.ladder.items():
        for rung, entry in enumerate(ladder.rungs):
            names.setdefault(entry, []).append(f"{role} (rung {rung})")
    for name in config.runtimes:
        names.setdefault(name, [])
    if not config.roles:
        for name in AUTO_ORDER:
            names.setdefault(name, [])
    rows, lines = [], []
    for name, roles in names.items():
        runtime = config.runtime(name)
        if runtime is None:
            rows.append(RuntimeRow(name, "?", tuple(roles), Probe(False, "not configured")))
            continue
        rows.append(RuntimeRow(name, runtime.kind, tuple(roles), probe_runtime(runtime, env)))
        lines += [line] if (line := price_line(name, runtime, config)) else []
    ok, prices = {row.name for row in rows if row.probe.ok}, tuple(lines)
    if config.roles:
        default = config.runtimes_for("default") or config.runtimes_for("implement")
        usable = any(d in ok for d in default)
        return Diagnosis(rows, default, usable, False, isolation, isolation_ok, prices=prices)
    picked = next((name for name in AUTO_ORDER if name in ok), None)
    chosen = (picked,) if picked else ()
    return Diagnosis(rows, chosen, picked is not None, True, isolation, isolation_ok, prices=prices)


def doctor(repo: pygit2.Repository) -> Diagnosis:
    config = load_config(Path(repo.workdir)) if repo.workdir else Config()
    forge, forge_ok = forge_line(repo, config)
    budgets = tuple(unenforced_budgets(config))
    checks = tuple(checks_lines(repo, config, os.environ))
    found = diagnose(config)
    return replace(found, forge=forge, forge_ok=forge_ok, budgets=budgets, checks=checks)


def auto_pick(config: Config, environ: Mapping[str, str] | None = None) -> tuple[Config, str]:
    """With no roles configured: the first built-in runtime that can run here."""
    found = diagnose(config, environ)
    if not found.default:
        tried = "; ".join(
            f"{r.name}: {r.probe.detail}" for r in found.rows if r.kind in BUILTIN_RUNTIMES
        )
        raise ConfigError(
            "no agent runtime is configured and none can run here "
            f"({tried}). Run `git agentrun init` and set a runtime in .agentrun.toml "
            "(`git agentrun doctor` checks the setup)"
        )
    name = found.default[0]
    detail = next(r.probe.detail for r in found.rows if r.name == name)
    data = config.model_dump(mode="json")
    data["roles"] = {"default": [name]}
    return Config.model_validate(data), f"{name} ({detail})"
