"""The forge credential: held in this process's memory, given only to its own fetch and push.

The token comes from the environment (``GITHUB_TOKEN``, ``GH_TOKEN``, ``GITLAB_TOKEN``,
``GL_TOKEN``, ``CI_JOB_TOKEN``) or, so that no environment in the process tree holds it,
from the file descriptor ``AGENTRUN_TOKEN_FD`` names (read once, then closed). Each of
agentrun's own ``git fetch``/``git push`` gets it as ``http.<server>/.extraheader`` through
``GIT_CONFIG_*`` of that one process (``gitcli``); it is never written to a file.

Under GitHub Actions or GitLab CI, a credential the job persisted in the repository —
``http.<url>.extraheader`` in ``.git/config`` or a file it includes (actions/checkout),
or a token in a remote's URL (GitLab's ``CI_JOB_TOKEN``) — is readable by every agent
working in a worktree of that repository. ``withdrawn`` takes it out before any agent
starts, uses it from memory, and puts it back when the command ends: normally, on an
error, on Ctrl-C or SIGTERM (taken as Ctrl-C). A SIGKILL cannot be answered: the config
then stays without the credential (the job ends anyway; a rerun checks out afresh).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

from agentrun import gitcli, secrets
from agentrun.errors import AgentrunError

TOKEN_FD = "AGENTRUN_TOKEN_FD"
GITHUB_VARS = ("GITHUB_TOKEN", "GH_TOKEN")
# (variable, the user name GitLab expects with it over HTTPS)
GITLAB_VARS = (
    ("GITLAB_TOKEN", "oauth2"),
    ("GL_TOKEN", "oauth2"),
    ("CI_JOB_TOKEN", "gitlab-ci-token"),
)


class CredentialError(AgentrunError):
    """The token could not be read, or a persisted one could not be taken out."""


@dataclass(frozen=True)
class Credential:
    """One ``http.<url>.extraheader`` entry: ``key`` names the server it is sent to."""

    key: str
    header: str


@dataclass
class _Taken:
    """What was taken out of one config file, and how to put it back."""

    path: Path
    original: bytes
    stripped: bytes = b""
    headers: list[Credential] = field(default_factory=list)
    urls: list[tuple[str, str, str]] = field(default_factory=list)  # key, with token, without
    derived: list[Credential] = field(default_factory=list)  # headers made from those URLs


_lock = threading.Lock()
_fd_token: str | None = None
_fd_read = False
_held: list[Credential] = []


# --- the token ---------------------------------------------------------------------------


def under_ci(environ: Mapping[str, str] | None = None) -> bool:
    """A GitHub Actions or GitLab CI job (not merely ``CI``, which many tools set)."""
    env = os.environ if environ is None else environ
    return env.get("GITHUB_ACTIONS") == "true" or env.get("GITLAB_CI") == "true"


def github_token() -> str | None:
    """The GitHub token: from ``AGENTRUN_TOKEN_FD``, else ``GITHUB_TOKEN``/``GH_TOKEN``."""
    return _from_fd() or _first(GITHUB_VARS)


def gitlab_token() -> str | None:
    """The GitLab token: from ``AGENTRUN_TOKEN_FD``, else ``GITLAB_TOKEN``/``GL_TOKEN``
    (not ``CI_JOB_TOKEN``: it cannot write notes, labels or merge requests)."""
    return _from_fd() or _first(tuple(name for name, _ in GITLAB_VARS[:2]))


def git_config(remote_urls: Sequence[str]) -> list[tuple[str, str]]:
    """The credentials of one fetch or push, as config entries for ``GIT_CONFIG_*``.

    Those taken out of the repository go back under their own keys; a token from the
    environment or the descriptor is for its forge's server only (``GITHUB_SERVER_URL``,
    ``CI_SERVER_URL``), never for whatever URL a remote names. Only credentials for a
    server one of ``remote_urls`` (the repository's remotes) is on are passed at all:
    a push to a ``file://`` or SSH remote carries none.
    """
    with _lock:
        found = list(_held)
    taken = {c.key.lower() for c in found}
    for credential in _from_environment():
        if credential.key.lower() not in taken:
            found.append(credential)
    urls = [url.lower() for url in remote_urls]
    return [(c.key, c.header) for c in found if _serves(c, urls)]


def _serves(credential: Credential, urls: list[str]) -> bool:
    """``http.<url>.extraheader`` applies to a remote whose URL starts with ``<url>``."""
    server = credential.key[len("http.") : -len(".extraheader")].lower()
    if not server:
        return True  # http.extraheader: every server
    prefix = server if server.endswith("/") else server + "/"
    bare = [without_userinfo(url) for url in urls]
    return any(url.startswith(prefix) or url == server for url in bare)


def without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=_host(parts.netloc))) if parts.netloc else url


def _from_environment() -> list[Credential]:
    found = []
    token = github_token()
    if token:
        server = os.environ.get("GITHUB_SERVER_URL") or "https://github.com"
        found.append(_basic(server, "x-access-token", token))
    for name, user in GITLAB_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            server = os.environ.get("CI_SERVER_URL") or "https://gitlab.com"
            found.append(_basic(server, user, value))
            break
    return found


def _basic(server: str, user: str, password: str) -> Credential:
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return Credential(f"http.{server.rstrip('/')}/.extraheader", f"AUTHORIZATION: basic {pair}")


def _first(names: tuple[str, ...]) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _from_fd() -> str | None:
    """The token on ``AGENTRUN_TOKEN_FD``, read once; the descriptor is closed after."""
    global _fd_token, _fd_read
    with _lock:
        if _fd_read:
            return _fd_token
        _fd_read = True
        named = os.environ.get(TOKEN_FD, "").strip()
        if not named:
            return None
        try:
            fd = int(named)
            with os.fdopen(fd, "rb") as stream:
                data = stream.read()
        except (ValueError, OSError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a number"
            raise CredentialError(
                f"{TOKEN_FD}={named} names no readable file descriptor ({why}): pass the "
                f'token as `{TOKEN_FD}=3 git agentrun … 3<<<"$TOKEN"`'
            ) from None
        token = data.decode("utf-8", "replace").strip()
        if not token:
            raise CredentialError(f"{TOKEN_FD}={named} gave an empty token")
        _fd_token = token
    secrets.remember([token])
    return token


# --- credentials persisted in the repository -------------------------------------------------


@contextlib.contextmanager
def withdrawn(common_dir: Path, say: Callable[[str], None]) -> Iterator[None]:
    """While agents may run: the repository's persisted credentials out, used from memory.

    Only under GitHub Actions or GitLab CI; elsewhere the repository's config is the
    user's own business. ``say`` gets the one line that tells what was taken out.
    """
    _from_fd()  # before any agent starts, and so the descriptor is closed
    if not under_ci():
        yield
        return
    taken = _take_out(common_dir)
    if not taken:
        yield
        return
    held = [c for t in taken for c in t.headers]
    with _lock:
        _held.extend(held)
    names = ", ".join(sorted({str(t.path) for t in taken}))
    say(
        f"agentrun: took the credential persisted in {names} out of the repository's config "
        "while agents run; agentrun's own fetch and push use it from memory, and it is put "
        "back at exit"
    )
    previous = _answer_sigterm()
    try:
        yield
    finally:
        with _lock:
            for credential in held:
                _held.remove(credential)
        _put_back(taken)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _answer_sigterm() -> signal.Handlers | None:
    """A SIGTERM (a cancelled job) is taken as Ctrl-C: the agent's tree is ended, the
    session recorded as interrupted, the lease released, and the credential put back."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    return signal.SIG_DFL


_EXTRAHEADER = re.compile(r"^http\.(?:.+\.)?extraheader$", re.IGNORECASE)
_REMOTE_URL = re.compile(r"^remote\..+\.(?:url|pushurl)$", re.IGNORECASE)
_INCLUDE = re.compile(r"^(?:include|includeif\..+)\.path$", re.IGNORECASE)


def _take_out(common_dir: Path) -> list[_Taken]:
    """Every credential in the repository's config files (and what they include), removed."""
    files = [common_dir / "config", common_dir / "config.worktree"]
    files += sorted((common_dir / "worktrees").glob("*/config.worktree"))
    seen: set[Path] = set()
    taken: list[_Taken] = []
    while files:
        path = files.pop(0)
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        entries = _entries(path)
        for key, value in entries:
            if _INCLUDE.match(key):
                files.append(_included(path, value))
        found = _credentials_in(path, entries)
        if found is not None:
            taken.append(found)
    return taken


def _credentials_in(path: Path, entries: list[tuple[str, str]]) -> _Taken | None:
    found = _Taken(path, path.read_bytes())
    for key, value in entries:
        if _EXTRAHEADER.match(key) and value.lower().startswith("authorization:"):
            found.headers.append(Credential(key, value))
        elif _REMOTE_URL.match(key):
            parts = urlsplit(value)
            if parts.scheme in ("http", "https") and parts.password:
                server = urlunsplit((parts.scheme, _host(parts.netloc), "/", "", ""))
                user = parts.username or ""
                derived = _basic(server, user, parts.password)
                found.headers.append(derived)
                found.derived.append(derived)
                clean = urlunsplit(parts._replace(netloc=_host(parts.netloc)))
                found.urls.append((key, value, clean))
    if not found.headers:
        return None
    for credential in dict.fromkeys(found.headers):
        if credential not in found.derived:
            _config(path, "--fixed-value", "--unset-all", credential.key, credential.header)
    for key, with_token, without in found.urls:
        _config(path, "--fixed-value", key, without, with_token)
    found.stripped = path.read_bytes()
    secrets.remember(part for c in found.headers for part in _secret_parts(c.header))
    return found


def _put_back(taken: list[_Taken]) -> None:
    """Each file as it was, byte for byte; one that changed meanwhile gets the entries back."""
    for item in taken:
        try:
            current = item.path.read_bytes()
        except OSError:
            current = None
        if current is None or current == item.stripped:
            _write(item.path, item.original)
            continue
        # Something (a person, git) changed the file meanwhile: keep that, add ours again.
        for credential in item.headers:
            if credential not in item.derived:
                _config(item.path, "--add", credential.key, credential.header)
        for key, with_token, without in item.urls:
            _config(item.path, "--fixed-value", key, with_token, without)


def _write(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=".agentrun-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _secret_parts(header: str) -> list[str]:
    """What of an Authorization header must never be written: its value, and for Basic
    the password inside."""
    value = header.split()[-1]
    try:
        password = base64.b64decode(value, validate=True).decode().partition(":")[2]
    except ValueError:
        return [value]
    return [value, password]


def _host(netloc: str) -> str:
    return netloc.rpartition("@")[2]


def _included(path: Path, value: str) -> Path:
    target = Path(os.path.expanduser(value))
    return target if target.is_absolute() else (path.parent / target)


def _entries(path: Path) -> list[tuple[str, str]]:
    """(key, value) of one config file alone, as git itself parses it."""
    done = _config(path, "--no-includes", "--null", "--list")
    entries = []
    for record in done.split("\0"):
        if record:
            key, _, value = record.partition("\n")
            entries.append((key, value))
    return entries


def _config(path: Path, *args: str) -> str:
    done = gitcli.run(["config", "--file", str(path), *args], cwd=path.parent)
    if done.returncode != 0:
        raise CredentialError(
            f"cannot edit {path} with `git config` ({done.stderr.strip() or 'no output'}): "
            "the credential persisted there could not be taken out before agents run"
        )
    return done.stdout
