"""The environment an agent session (or a check running the agent's code) gets.

Built from an allow-list, never inherited whole: forge tokens (GITHUB_TOKEN, …) and
the variables the config marks secret stay with the runner (DESIGN §11). Each runtime
gets its own provider's variables (Claude Code's ANTHROPIC_*, aider's GEMINI_API_KEY, …)
and no other runtime gets them; what a test suite needs (CI, JAVA_HOME, GOPATH, …) is
passed to every session and check, and ``pass_env`` extends that per runtime or step.
``PATH`` stays the user's, with one folder before it holding only ``git-agentrun``: a
check's ``python3 -m pytest`` must find the project's Python, not agentrun's.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentrun.config import RuntimeConfig

ALLOWED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ",
        "TMPDIR", "TEMP", "TMP", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
        "VIRTUAL_ENV", "PYTHONPATH", "NODE_PATH", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
        "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL",
    }
)  # fmt: skip
ALLOWED_PREFIXES = ("LC_", "GIT_AUTHOR_", "GIT_COMMITTER_")
# What real test suites and toolchains read, for every session and check (tox-style patterns).
DEFAULT_PASS = (
    "CI", "GITHUB_ACTIONS", "GITLAB_CI", "JAVA_HOME", "GOPATH", "GOFLAGS", "GOCACHE",
    "GOMODCACHE", "GOROOT", "CARGO_HOME", "RUSTUP_HOME", "NVM_DIR", "NVM_BIN", "PYENV_*",
    "RBENV_*", "GEM_HOME", "GEM_PATH", "GRADLE_USER_HOME", "MAVEN_OPTS", "DOTNET_ROOT",
)  # fmt: skip
# Each runtime's provider variables; no other runtime gets them (the README has the table).
# The API runtimes talk to their model from inside agentrun: their shell tool gets none.
PROVIDER_PASS: dict[str, tuple[str, ...]] = {
    "claude": ("ANTHROPIC_*", "CLAUDE_CODE_*", "CLAUDE_CONFIG_DIR", "DISABLE_AUTOUPDATER"),
    "codex": ("OPENAI_*", "CODEX_*", "AZURE_OPENAI_*"),
    "aider": (
        "AIDER_*", "LITELLM_*", "OPENAI_*", "ANTHROPIC_*", "GEMINI_API_KEY",
        "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "AZURE_*", "OLLAMA_*",
    ),
}  # fmt: skip
# Claude Code on Bedrock or Vertex (switched on by these variables) needs the cloud's too.
CLAUDE_CLOUDS = {
    "CLAUDE_CODE_USE_BEDROCK": ("AWS_*",),
    "CLAUDE_CODE_USE_VERTEX": ("CLOUD_ML_REGION", "VERTEX_REGION_*", "GOOGLE_*", "GCLOUD_*"),
}
# The forge tokens: never an agent's, never in git, whatever the config says.
ALWAYS_SECRET = ("GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", "GL_TOKEN", "CI_JOB_TOKEN")
CREDENTIAL_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
BIN = "bin"


def provider_patterns(kind: str | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The provider variables a runtime of ``kind`` gets."""
    patterns = PROVIDER_PASS.get(kind or "", ())
    if kind == "claude":
        for switch, extra in CLAUDE_CLOUDS.items():
            if environ.get(switch):
                patterns = (*patterns, *extra)
    return patterns


def _allowed(name: str) -> bool:
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES)


def matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def session_env(
    build: str,
    phase: str,
    round_: int,
    session: str,
    *,
    git_dir: Path,
    secret: Iterable[str] = (),
    keep: Iterable[str] = (),
    kind: str | None = None,
    pass_env: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    task: str | None = None,
) -> dict[str, str]:
    """The allow-listed environment, the agent variables, and ``git-agentrun`` on PATH.

    ``kind``: the runtime's (None for a check), whose provider variables pass.
    ``pass_env``: the runtime's or step's own patterns. ``secret`` names are removed
    (except those in ``keep``: the runtime's own key). ``git_dir``: the repository's
    common git dir, where the agent's verbs read the log and ``git-agentrun`` is linked.
    """
    source = os.environ if environ is None else environ
    kept = set(keep)
    removed = (set(secret) | set(ALWAYS_SECRET)) - kept
    passed = (*DEFAULT_PASS, *provider_patterns(kind, source), *pass_env)
    env = {
        key: value
        for key, value in source.items()
        if key not in removed and (key in kept or _allowed(key) or matches(key, passed))
    }
    # No empty entry: it would put the current folder (the worktree) on PATH.
    entries = [str(entry_point(git_dir)), *env.get("PATH", "").split(os.pathsep)]
    env["PATH"] = os.pathsep.join(dict.fromkeys(e for e in entries if e))
    env.update(AGENTRUN_BUILD=build, AGENTRUN_PHASE=f"{phase}@{round_}", AGENTRUN_SESSION=session)
    if task is not None:
        env["AGENTRUN_TASK"] = task
    env["AGENTRUN_GIT_DIR"] = str(git_dir)
    return env


def entry_point(git_dir: Path) -> Path:
    """A folder holding only ``git-agentrun``: this agentrun, run by its own Python."""
    folder = git_dir / "agentrun" / BIN
    script = folder / "git-agentrun"
    text = (
        "#!/bin/sh\n"
        "# git-agentrun for agents and checks: agentrun without its environment's programs.\n"
        f"exec '{sys.executable}' -m agentrun \"$@\"\n"
    )
    try:
        if script.read_text() == text:
            return folder
    except OSError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".git-agentrun-{os.getpid()}"
    partial.write_text(text)
    partial.chmod(0o755)
    partial.replace(script)
    return folder


KEY_VARIABLES = {
    "claude": "ANTHROPIC_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "codex": "OPENAI_API_KEY",
    "openai": "OPENAI_API_KEY",
    "aider": "OPENAI_API_KEY",
}


# Aider talks to many providers: its key follows the model's provider prefix.
AIDER_KEY_VARIABLES = {
    "openai/": "OPENAI_API_KEY",
    "anthropic/": "ANTHROPIC_API_KEY",
    "claude": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter/": "OPENROUTER_API_KEY",
}


def key_variable(config: RuntimeConfig) -> str:
    """The environment variable that holds a runtime's API key ("" when it needs none)."""
    if config.api_key_env is not None:
        return config.api_key_env
    if config.kind == "aider":
        model = (config.model or "").lower()
        found = (v for prefix, v in AIDER_KEY_VARIABLES.items() if model.startswith(prefix))
        return next(found, "OPENAI_API_KEY")
    return KEY_VARIABLES.get(config.kind, "")
