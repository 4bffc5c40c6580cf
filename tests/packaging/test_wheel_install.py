"""The wheel installed as people install a tool: pip without the github extra, pipx and
uv tool. Local builds need no PyGithub; the github forge, asked for without it, is one
line that names the command adding it, for the installer that was used."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from runner.helpers import configure
from wheelhouse import (  # noqa: F401 (fixtures)
    BIN,
    Dist,
    Venv,
    bare_fixture,
    check,
    dist_fixture,
    env,
    run,
)

import agentrun

pytestmark = pytest.mark.slow

NO_PYGITHUB = "import importlib.util, sys; sys.exit(importlib.util.find_spec('github') is not None)"
VERSIONS = (
    "import agentrun, importlib.metadata as m;"
    "print(agentrun.__version__, m.version('git-agentrun'))"
)
HINT_TAIL = "which is not installed here: "


def github_clone(path: Path, kind: str | None = None) -> Path:
    """A repository whose origin is on github.com, set up for the scripted agent."""
    path.mkdir(parents=True)
    check(["git", "init", "-q", "-b", "main"], path)
    (path / "README.md").write_text("hello\n")
    check(["git", "add", "-A"], path)
    check(["git", "commit", "-q", "-m", "initial"], path)
    check(["git", "remote", "add", "origin", "https://github.com/example/project.git"], path)
    configure(path, extra=f'[forge]\nkind = "{kind}"\n' if kind else "")
    return path


def agentrun_in(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``git agentrun ARGS`` with ``bin_dir`` the only place git-agentrun is found."""
    return run(["git", "agentrun", *args], cwd, Venv(bin_dir.parent).env())


def refused_for_want_of_pygithub(done: subprocess.CompletedProcess[str], command: str) -> list[str]:
    """The one line of a refusal, checked: exit 1, naming ``command``; its words."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip()
    assert line.startswith("agentrun: the github forge needs PyGithub"), line
    assert line.endswith(HINT_TAIL + command), line
    return shlex.split(line.rpartition(HINT_TAIL)[2])


def nothing_built(bin_dir: Path, cwd: Path) -> None:
    done = agentrun_in(bin_dir, cwd, "status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["builds"] == []


def test_the_versions_agree_and_pygithub_is_not_installed(bare: Venv) -> None:
    check([bare.bin / "python", "-c", NO_PYGITHUB])
    package, distribution = check([bare.bin / "python", "-c", VERSIONS]).stdout.split()
    shown = check([bare.bin / "git-agentrun", "--version"]).stdout.strip()
    assert package == distribution == agentrun.__version__
    assert shown == f"agentrun {agentrun.__version__}"


IMPORT_ALL = """
import importlib, pkgutil, sys
import agentrun
CLIENTS = ("agentrun.forge.github", "agentrun.forge.github_http", "agentrun.forge.gitlab_http")
names = [m.name for m in pkgutil.walk_packages(agentrun.__path__, "agentrun.")]
for name in names:
    if name not in CLIENTS and name != "agentrun.__main__":  # __main__ runs the CLI
        importlib.import_module(name)
print(len(names), "github" in sys.modules, "gitlab" in sys.modules)
"""


def test_only_the_forge_client_modules_import_pygithub_or_python_gitlab(bare: Venv) -> None:
    count, github, gitlab = check([bare.bin / "python", "-c", IMPORT_ALL]).stdout.split()
    assert int(count) > 50 and (github, gitlab) == ("False", "False")


def test_the_demo_runs_without_the_github_extra(bare: Venv, tmp_path: Path) -> None:
    done = agentrun_in(bare.bin, tmp_path, "demo")
    assert done.returncode == 0, done.stderr
    assert "== next: in your own repository ==" in done.stdout


def test_a_run_on_a_github_clone_uses_the_local_forge(bare: Venv, tmp_path: Path) -> None:
    repo = github_clone(tmp_path / "project")
    done = agentrun_in(bare.bin, repo, "run", "change a file")
    assert done.returncode == 0, done.stdout + done.stderr
    (build,) = json.loads(agentrun_in(bare.bin, repo, "status", "--json").stdout)["builds"]
    assert build["state"] == "complete"
    assert build["proposal"]["forge"] == "local"
    assert "agentrun/change-a-file" in agentrun_in(bare.bin, repo, "pulls").stdout


def test_the_github_forge_asked_for_is_one_line_naming_the_extra(
    bare: Venv, tmp_path: Path
) -> None:
    repo = github_clone(tmp_path / "project", kind="github")
    done = agentrun_in(bare.bin, repo, "run", "change a file")
    refused_for_want_of_pygithub(done, "pip install 'git-agentrun[github]'")
    nothing_built(bare.bin, repo)


def test_doctor_says_which_forge_and_refuses_one_that_cannot_open(
    bare: Venv, tmp_path: Path
) -> None:
    repo = github_clone(tmp_path / "project")
    done = agentrun_in(bare.bin, repo, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        "forge: local (auto: origin is on github.com, but the github forge is not installed: "
        "pip install 'git-agentrun[github]')"
    )
    asked = github_clone(tmp_path / "asked", kind="github")
    done = agentrun_in(bare.bin, asked, "doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        "forge: github (configured) cannot open: it needs PyGithub: "
        "pip install 'git-agentrun[github]'"
    )


def test_a_folder_named_github_on_the_path_is_not_pygithub(bare: Venv, tmp_path: Path) -> None:
    """A checkout's ``github/`` folder (a namespace package to Python) passes for no
    library: auto still builds locally, and the github forge is still refused."""
    shadow = tmp_path / "shadow"
    (shadow / "github").mkdir(parents=True)
    (shadow / "github" / "Github.py").write_text("raise SystemExit('imported the shadow')\n")
    on_path = bare.env({"PYTHONPATH": str(shadow)})
    repo = github_clone(tmp_path / "project")
    done = run(["git", "agentrun", "run", "change a file"], repo, on_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (build,) = json.loads(agentrun_in(bare.bin, repo, "status", "--json").stdout)["builds"]
    assert build["proposal"]["forge"] == "local"
    asked = github_clone(tmp_path / "asked", kind="github")
    done = run(["git", "agentrun", "run", "change a file"], asked, on_path)
    refused_for_want_of_pygithub(done, "pip install 'git-agentrun[github]'")


def test_the_action_without_the_extra_is_one_line_naming_it(bare: Venv, tmp_path: Path) -> None:
    repo = github_clone(tmp_path / "project")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "labeled", "issue": {"number": 1}}))
    outputs = tmp_path / "outputs"
    job = {"GITHUB_EVENT_NAME": "issues", "GITHUB_EVENT_PATH": str(event)}
    job |= {"GITHUB_REPOSITORY": "octocat/Hello-World", "GITHUB_OUTPUT": str(outputs)}
    done = run(["git", "agentrun", "action"], repo, bare.env(job))
    refused_for_want_of_pygithub(done, "pip install 'git-agentrun[github]'")
    nothing_built(bare.bin, repo)
    assert "state=" in outputs.read_text()  # the job's outputs are written, empty


def installed_tool(bin_dir: Path, tmp_path: Path, hint: str) -> list[str]:
    """What every tool install gives: the version, the demo, and the refusal naming
    ``hint``; returns the hinted command's words."""
    shown = check([bin_dir / "git-agentrun", "--version"]).stdout.strip()
    assert shown == f"agentrun {agentrun.__version__}"
    done = agentrun_in(bin_dir, tmp_path, "demo")
    assert done.returncode == 0, done.stderr
    assert "== next: in your own repository ==" in done.stdout
    repo = github_clone(tmp_path / "project", kind="github")
    return refused_for_want_of_pygithub(agentrun_in(bin_dir, repo, "run", "a goal"), hint)


def test_pipx_install_of_the_wheel(dist: Dist, tmp_path: Path) -> None:
    homes = {
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    check([BIN / "pipx", "install", dist.wheel], environ=env(homes))
    hint = "pipx inject git-agentrun 'PyGithub>=2.8' 'requests>=2.28'"
    words = installed_tool(tmp_path / "bin", tmp_path, hint)
    # The hinted command, as it is, adds PyGithub and keeps this wheel's git-agentrun.
    check([BIN / words[0], *words[1:]], environ=env(homes))
    python = tmp_path / "pipx/venvs/git-agentrun/bin/python"
    assert run([python, "-c", NO_PYGITHUB]).returncode == 1  # found now


def test_uv_tool_install_of_the_wheel(dist: Dist, tmp_path: Path) -> None:
    homes = {
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
        "UV_PYTHON_DOWNLOADS": "never",
    }
    check([BIN / "uv", "tool", "install", dist.wheel], environ=env(homes))
    words = installed_tool(tmp_path / "bin", tmp_path, "uv tool install 'git-agentrun[github]'")
    spec = f"git-agentrun[github] @ {dist.wheel.as_uri()}"
    local = [spec if w == "git-agentrun[github]" else w for w in words]
    check([BIN / local[0], *local[1:]], environ=env(homes))
    python = tmp_path / "tools/git-agentrun/bin/python"
    assert run([python, "-c", NO_PYGITHUB]).returncode == 1  # found now
