"""Which isolation level is in force, and why (``[isolation] mode``).

``auto`` takes the strongest level this machine allows when GitHub Actions or GitLab CI
runs the build (a shared machine holding the forge token), and ``none`` elsewhere (a
person's laptop, where the agent acts for its owner). A level asked for that cannot be
had is an error, never a silent downgrade.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agentrun.config import Isolation
from agentrun.errors import AgentrunError
from agentrun.isolation import probe

CI_VARIABLES = ("GITHUB_ACTIONS", "GITLAB_CI")
ACCEPT = '[isolation] mode = "none"'

Mode = Literal["none", "namespace", "user"]


class IsolationError(AgentrunError):
    """The isolation asked for (or that CI needs) is not possible on this machine."""


@dataclass(frozen=True)
class Level:
    mode: Mode
    why: str
    account: str = ""


def on_ci(environ: Mapping[str, str]) -> str | None:
    """The CI variable that is set to true, if any (plain ``CI`` is not enough)."""
    return next((name for name in CI_VARIABLES if environ.get(name, "").lower() == "true"), None)


def resolve(config: Isolation, environ: Mapping[str, str] | None = None) -> Level:
    """The level in force for ``config`` here; raises ``IsolationError`` when impossible."""
    env = os.environ if environ is None else environ
    if config.mode == "none":
        return Level("none", 'configured: [isolation] mode = "none"')
    if config.mode == "namespace":
        found = probe.namespace()
        if not found.ok:
            raise IsolationError(
                f'[isolation] mode = "namespace" is not possible here: {found.detail}'
            )
        return Level("namespace", f"configured; {found.detail}")
    if config.mode == "user":
        found = probe.account(config.user)
        if not found.ok:
            raise IsolationError(f'[isolation] mode = "user" is not possible here: {found.detail}')
        return Level("user", f"configured; {found.detail}", config.user)
    ci = on_ci(env)
    if ci is None:
        return Level("none", "auto: not on GitHub Actions or GitLab CI (GITHUB_ACTIONS, GITLAB_CI)")
    namespace = probe.namespace()
    if namespace.ok:
        return Level("namespace", f"auto ({ci}=true): {namespace.detail}")
    user = probe.account(config.user)
    if user.ok:
        why = f"auto ({ci}=true): namespaces unavailable ({namespace.detail}); {user.detail}"
        return Level("user", why, config.user)
    raise IsolationError(
        f"{ci}=true asks for isolation and none is possible here (namespace: "
        f"{namespace.detail}; user: {user.detail}): install bubblewrap, or set "
        f"{ACCEPT} in .agentrun.toml to accept the risk"
    )
