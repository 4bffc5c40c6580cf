"""The environment an agent session (or a check running the agent's code) gets.

Built from an allow-list, never inherited whole: forge tokens (GITHUB_TOKEN, …) and
the variables the config marks secret stay with the runner (DESIGN §11). A runtime's
own API key variable is kept, since the agent cannot work without it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path

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
ALLOWED_PREFIXES = (
    "LC_",
    "GIT_AUTHOR_",
    "GIT_COMMITTER_",
    # The agents' own settings and keys: Claude Code, Codex, Aider and the model APIs.
    "ANTHROPIC_",
    "CLAUDE_CODE_",
    "OPENAI_",
    "CODEX_",
    "AIDER_",
    "LITELLM_",
    "OLLAMA_",
)
CREDENTIAL_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")


def _key(name: str) -> bool:
    """A credential: an agent gets only its own runtime's (``keep``), not other providers'."""
    return name.endswith(CREDENTIAL_SUFFIXES)


def session_env(
    build: str,
    phase: str,
    round_: int,
    session: str,
    secret: Iterable[str] = (),
    keep: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    git_dir: Path | None = None,
) -> dict[str, str]:
    """The allow-listed environment, the agent variables, and ``git-agentrun`` on PATH.

    ``secret`` names are removed (except those in ``keep``: the runtime's own key).
    ``git_dir``: the repository's common git dir, where the agent's verbs read the log.
    """
    source = os.environ if environ is None else environ
    kept = set(keep)
    removed = set(secret) - kept
    env = {
        key: value
        for key, value in source.items()
        if (key in kept or key in ALLOWED or (key.startswith(ALLOWED_PREFIXES) and not _key(key)))
        and key not in removed
    }
    scripts = sysconfig.get_path("scripts")
    bindir = str(Path(sys.executable).parent)
    # No empty entry: it would put the current folder (the worktree) on PATH.
    entries = [scripts, bindir, *env.get("PATH", "").split(os.pathsep)]
    env["PATH"] = os.pathsep.join(dict.fromkeys(e for e in entries if e))
    env.update(AGENTRUN_BUILD=build, AGENTRUN_PHASE=f"{phase}@{round_}", AGENTRUN_SESSION=session)
    if git_dir is not None:
        env["AGENTRUN_GIT_DIR"] = str(git_dir)
    return env
