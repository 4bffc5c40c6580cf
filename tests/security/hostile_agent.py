"""A hostile ``command`` agent: it hunts for the forge token, then attacks the repository.

Everything it reads goes, raw, into ``.agentrun/run/loot/`` of its worktree (not into its
transcript, which the runner scrubs: a leak must not be hidden by the scrubber). What each
attack did goes to ``.agentrun/run/loot/attacks.json``. Then it reports ``done``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

loot = Path(".agentrun/run/loot")
loot.mkdir(parents=True, exist_ok=True)
sys.stdin.read()


def keep(name: str, data: bytes | str) -> None:
    (loot / name).write_bytes(data.encode() if isinstance(data, str) else data)


def run(*argv: str, stdin: str = "", env: dict | None = None) -> tuple[int, str]:
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=20, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return done.returncode, done.stdout + done.stderr


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        return f"<{exc.__class__.__name__}>".encode()


# --- the hunt ------------------------------------------------------------------
keep("uid", str(os.getuid()))
keep("own-environ", "\n".join(f"{k}={v}" for k, v in os.environ.items()))
pids = sorted(p.name for p in Path("/proc").iterdir() if p.name.isdigit())
keep("pids", " ".join(pids))
opened = 0
environs, cmdlines = [], []
for pid in pids:
    for kind, into in (("environ", environs), ("cmdline", cmdlines)):
        data = read(Path("/proc") / pid / kind)
        if not data.startswith(b"<"):
            opened += 1
        into.append(f"== {pid}\n".encode() + data.replace(b"\0", b"\n"))
keep("proc-environ", b"\n".join(environs))
keep("proc-cmdline", b"\n".join(cmdlines))
keep("proc-opened", str(opened))
keep("git-config", run("git", "config", "--list", "--show-origin", "--includes")[1])
git_dir = Path(os.environ.get("AGENTRUN_GIT_DIR", ".git"))
configs = [git_dir / "config", git_dir / "config.worktree", Path("/etc/gitconfig")]
keep("repo-config", b"\n".join(read(p) for p in configs))
creds_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}
asked = "protocol=https\nhost=github.com\n\n"
code, said = run("git", "credential", "fill", stdin=asked, env=creds_env)
keep("credential-fill", f"exit {code}\n{said}")
home = Path(os.environ["HOME"])
real_home = Path(os.environ["REAL_HOME"])
keep("git-credentials", read(home / ".git-credentials") + read(real_home / ".git-credentials"))
hosts = ".config/gh/hosts.yml"
keep("gh-hosts", read(home / hosts) + read(real_home / hosts))
code, said = run("sudo", "-n", "true")
keep("sudo", f"exit {code}\n{said}")

if os.environ.get("HUNT_ONLY") == "quiet":  # run by another program, which reports
    sys.exit(0)
if os.environ.get("HUNT_ONLY"):
    code, said = run("git", "agentrun", "agent", "done", "--summary", "looked around")
    sys.exit(code)

# An honest commit of its own still works (private git dir), and the report goes through.
Path("feature.txt").write_text("made by the hostile agent\n")
code, said = run("git", "add", "feature.txt")
code, said = run("git", "commit", "-q", "-m", "the agent's own commit")
keep("own-commit", f"exit {code}\n{said}")

# --- the attacks -----------------------------------------------------------------
marker = os.environ["MARKER"]
hook = f"#!/bin/sh\necho planted >> {marker}\n"
attacks: dict[str, object] = {}


def attempt(name: str, action) -> None:
    try:
        result = action()
        attacks[name] = {"ok": True, "said": str(result)[:300]}
    except Exception as exc:  # every failure is the attack being refused
        attacks[name] = {"ok": False, "said": f"{exc.__class__.__name__}: {exc}"[:300]}


def plant_shared_hook() -> str:
    for name in ("post-checkout", "pre-commit", "reference-transaction", "post-index-change"):
        target = git_dir / "hooks" / name
        target.write_text(hook)
        target.chmod(0o755)
    return "planted"


def plant_own_hooks() -> str:
    own = Path(run("git", "rev-parse", "--absolute-git-dir")[1].strip())
    (own / "hooks").mkdir(exist_ok=True)
    for name in ("post-checkout", "pre-commit", "reference-transaction", "post-index-change"):
        (own / "hooks" / name).write_text(hook)
        (own / "hooks" / name).chmod(0o755)
    return str(own)


def must(code_said: tuple[int, str]) -> str:
    code, said = code_said
    if code != 0:
        raise RuntimeError(f"exit {code}: {said.strip()}")
    return said


def shared(*args: str) -> str:
    return must(run("git", f"--git-dir={git_dir}", *args))


build = os.environ["AGENTRUN_BUILD"]
log_ref = f"refs/agentrun/builds/{build}"
fsmonitor = f"echo fsmonitor >> {marker}; false"
attempt("shared-hook", plant_shared_hook)
attempt("own-hooks", plant_own_hooks)
attempt("own-fsmonitor", lambda: must(run("git", "config", "core.fsmonitor", fsmonitor)))
attempt("shared-fsmonitor", lambda: shared("config", "core.fsmonitor", fsmonitor))
attempt("own-filter", lambda: must(run("git", "config", "filter.evil.clean", fsmonitor)))
Path(".gitattributes").write_text("* filter=evil\n")


def forge_event() -> str:
    tip = shared("rev-parse", log_ref).strip()
    tree = shared("rev-parse", f"{tip}^{{tree}}").strip()
    body = json.dumps({"v": 1, "type": "build.completed", "payload": {"summary_text": "forged"}})
    forged = must(
        run(
            "git",
            f"--git-dir={git_dir}",
            "commit-tree",
            tree,
            "-p",
            tip,
            "-m",
            f"build.completed: forged\n\n{body}",
        )
    ).strip()
    return shared("update-ref", log_ref, forged, tip)


attempt("forge-event", forge_event)
attempt("delete-log", lambda: shared("update-ref", "-d", log_ref))
attempt("move-main", lambda: shared("update-ref", "refs/heads/main", "HEAD"))
user_tree = Path(os.environ["USER_TREE"])
attempt("user-tree", lambda: (user_tree / "pwned.txt").write_text("written by the agent\n"))
keep("attacks.json", json.dumps(attacks, indent=1))

code, said = run("git", "agentrun", "agent", "done", "--summary", "looked around")
print(f"agent: done -> {code} {said.strip()}")
sys.exit(code)
