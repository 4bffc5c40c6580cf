"""`.agentrun.toml` (DESIGN §10): what it may say, and how it is read.

The package: ``schema`` (one frozen pydantic model per table, and ``Config`` over them)
and ``load`` (reading the file, and errors in the words of the TOML the user wrote).
"""

from __future__ import annotations

from agentrun.config.load import (
    CONFIG_FILE,
    check_role_overrides,
    check_roles,
    config_from_data,
    load_config,
    parse_config,
)
from agentrun.config.runtimes import BUILTIN_RUNTIMES, Price, RuntimeConfig, RuntimeKind
from agentrun.config.schema import (
    PHASE_ROLES,
    Budget,
    Candidates,
    Config,
    ForgeConfig,
    Isolation,
    Ladder,
    Pipeline,
    Policy,
    Protect,
    Secrets,
    StateLabels,
    SyncConfig,
)
from agentrun.config.steps import FinalizeStep, SetupStep, VerifyStep

__all__ = [
    "BUILTIN_RUNTIMES",
    "CONFIG_FILE",
    "PHASE_ROLES",
    "Budget",
    "Candidates",
    "Config",
    "FinalizeStep",
    "ForgeConfig",
    "Isolation",
    "Ladder",
    "Pipeline",
    "Policy",
    "Price",
    "Protect",
    "RuntimeConfig",
    "RuntimeKind",
    "Secrets",
    "SetupStep",
    "StateLabels",
    "SyncConfig",
    "VerifyStep",
    "check_role_overrides",
    "check_roles",
    "config_from_data",
    "load_config",
    "parse_config",
]
