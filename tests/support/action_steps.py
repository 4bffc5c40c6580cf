"""Run ``action.yml``'s steps as the Actions runner would, on this machine.

Each ``run:`` step is written to a file and run with ``bash --noprofile --norc -eo
pipefail FILE`` (what ``shell: bash`` means) in the workspace, with the variables a runner
gives every step (``GITHUB_ACTION_PATH``, ``GITHUB_OUTPUT`` of its own, ``RUNNER_TEMP``,
``RUNNER_TOOL_CACHE``, ...), the job's environment, and the step's ``env:`` with its
``${{ }}`` expressions evaluated (``inputs.*`` with their defaults, ``steps.ID.outputs.*``,
``github.*``, ``runner.*``). What a step writes to ``$GITHUB_OUTPUT`` becomes its outputs.

``uses:`` steps cannot run here; each has a stand-in, and its time is not measured:

- ``actions/setup-python`` (only with ``update-environment: false``: the stand-in cannot
  change the job's PATH, so it refuses to pretend it did): this machine's Python as
  ``python-path`` and its version as ``python-version``.
- ``actions/cache``: nothing (the tool cache folder the caller gives is kept or not,
  which is what a hit or a miss would leave).

An expression or a key this does not know (an ``if:``, a function call) is an error, so
a change to ``action.yml`` cannot pass by being skipped. ``$GITHUB_ENV`` and
``$GITHUB_PATH`` are files of their own, left for the caller to read: what the Action
would change in the rest of the user's job.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXPRESSION = re.compile(r"\$\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}")
STEP_KEYS = {"name", "id", "shell", "run", "env", "uses", "with"}


@dataclass
class StepRun:
    name: str
    uses: str | None  # the action a stand-in replaced; None for a run: step
    seconds: float | None  # None: not measured (a stand-in)
    outputs: dict[str, str]
    output: str = ""


@dataclass
class Runner:
    """One job's runner: where its folders are, the job's environment, the inputs."""

    workspace: Path  # the checkout (GITHUB_WORKSPACE), where steps run
    home: Path  # RUNNER_TEMP, RUNNER_TOOL_CACHE and the step files live under it
    env: Mapping[str, str]  # the job's environment (GITHUB_EVENT_*, PATH, ...)
    inputs: Mapping[str, str] = field(default_factory=dict)
    token: str = "ghs_" + "T" * 36  # github.token, the github-token input's default
    action: Path = ROOT  # GITHUB_ACTION_PATH: the action's checkout (see ``checkout``)
    python: str = str(Path(sys.base_prefix) / "bin" / "python3")  # the machine's Python
    cache: Path | None = None  # RUNNER_TOOL_CACHE, when jobs share one (default: per job)

    @property
    def tool_cache(self) -> Path:
        return self.cache or self.home / "tool-cache"

    @property
    def temp(self) -> Path:
        return self.home / "temp"

    def files(self) -> dict[str, Path]:
        """The per-job files the runner hands every step."""
        return {
            "GITHUB_ENV": self.home / "env",
            "GITHUB_PATH": self.home / "path",
            "GITHUB_STEP_SUMMARY": self.home / "summary.md",
        }

    def steps(self) -> list[dict[str, Any]]:
        loaded = yaml.safe_load((self.action / "action.yml").read_text())
        steps: list[dict[str, Any]] = loaded["runs"]["steps"]
        for step in steps:
            unknown = set(step) - STEP_KEYS
            if unknown:
                raise ValueError(f"step {step.get('name')!r}: cannot run {sorted(unknown)}")
        return steps

    def run(
        self,
        last: Callable[[list[str], dict[str, str], Path], str] | None = None,
        until: str | None = None,
    ) -> list[StepRun]:
        """Every step in order (``until``: up to the step of that id); a step that fails
        raises with its output. ``last``, if given, runs the last step instead of
        ``subprocess.run`` (argv, env, cwd -> the output), for a caller that watches it."""
        for folder in (self.tool_cache, self.temp):
            folder.mkdir(parents=True, exist_ok=True)
        for path in self.files().values():
            path.touch()
        action = yaml.safe_load((self.action / "action.yml").read_text())
        inputs = {
            name: self.inputs.get(name, str(spec.get("default", "")))
            for name, spec in action.get("inputs", {}).items()
        }
        context: dict[str, str] = {
            "github.action_path": str(self.action),
            "github.token": self.token,
            "github.workspace": str(self.workspace),
            "runner.os": "Linux",
            "runner.arch": "X64",
            "runner.temp": str(self.temp),
            "runner.tool_cache": str(self.tool_cache),
        }
        context.update({f"inputs.{k}": self.evaluate(v, context) for k, v in inputs.items()})
        done: list[StepRun] = []
        steps = self.steps()
        for n, step in enumerate(steps):
            name = str(step.get("name") or step.get("uses") or step.get("id"))
            if "uses" in step:
                found = self.stand_in(name, step, context)
            else:
                is_last = last if n == len(steps) - 1 else None
                found = self.shell(n, name, step, context, is_last)
            done.append(found)
            for key, value in found.outputs.items():
                if step.get("id"):
                    context[f"steps.{step['id']}.outputs.{key}"] = value
            if until is not None and step.get("id") == until:
                break
        return done

    def evaluate(self, text: str, context: Mapping[str, str]) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in context:
                if name.startswith("steps."):
                    return ""  # an output a step did not set reads as empty, as in Actions
                raise ValueError(f"the harness cannot evaluate ${{{{ {name} }}}}")
            return context[name]

        return EXPRESSION.sub(value, str(text))

    def stand_in(self, name: str, step: dict[str, Any], context: Mapping[str, str]) -> StepRun:
        uses = str(step["uses"]).split("@", 1)[0]
        given = {k: self.evaluate(str(v), context) for k, v in (step.get("with") or {}).items()}
        if uses == "actions/setup-python":
            if (
                given.get("update-environment") != "False"
                and given.get("update-environment") != "false"
            ):
                raise ValueError(
                    "setup-python changes the job's PATH unless update-environment is false"
                )
            version = subprocess.run(
                [self.python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            return StepRun(
                name, uses, None, {"python-path": self.python, "python-version": version}
            )
        if uses == "actions/cache":
            if not given.get("path") or not given.get("key"):
                raise ValueError(f"actions/cache needs a path and a key, got {given}")
            return StepRun(name, uses, None, {"cache-hit": "false"})
        raise ValueError(f"the harness has no stand-in for {uses}")

    def shell(
        self,
        n: int,
        name: str,
        step: dict[str, Any],
        context: Mapping[str, str],
        last: Callable[[list[str], dict[str, str], Path], str] | None,
    ) -> StepRun:
        if step.get("shell") != "bash":
            raise ValueError(f"step {name!r}: only `shell: bash` runs here")
        script = self.temp / f"step-{n}.sh"
        script.write_text(str(step["run"]))
        output = self.home / f"step-{n}.output"
        output.write_text("")
        env = {
            **self.env,
            **{k: str(v) for k, v in self.files().items()},
            "GITHUB_ACTIONS": "true",
            "GITHUB_ACTION_PATH": str(self.action),
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_OUTPUT": str(output),
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "RUNNER_TEMP": str(self.temp),
            "RUNNER_TOOL_CACHE": str(self.tool_cache),
        }
        env.update({k: self.evaluate(str(v), context) for k, v in (step.get("env") or {}).items()})
        argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
        started = time.perf_counter()
        if last is not None:
            said = last(argv, env, self.workspace)
        else:
            done = subprocess.run(
                argv, cwd=self.workspace, env=env, capture_output=True, text=True, timeout=600
            )
            said = done.stdout + done.stderr
            if done.returncode != 0:
                raise StepFailed(name, done.returncode, said)
        seconds = time.perf_counter() - started
        return StepRun(name, None, seconds, read_outputs(output), said)


def checkout(dest: Path) -> Path:
    """The action's checkout as a runner downloads it: this repository's files (tracked,
    and new ones not ignored) as they are now, without .git, venvs or build output."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


class StepFailed(Exception):
    def __init__(self, name: str, code: int, output: str) -> None:
        super().__init__(f"step {name!r} exited {code}:\n{output}")
        self.code, self.output = code, output


def read_outputs(path: Path) -> dict[str, str]:
    """``$GITHUB_OUTPUT``: ``name=value`` lines, and ``name<<DELIMITER`` blocks."""
    found: dict[str, str] = {}
    lines = iter(path.read_text().splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            block = []
            for more in lines:
                if more == delimiter:
                    break
                block.append(more)
            found[key] = "\n".join(block)
        elif "=" in line:
            key, value = line.split("=", 1)
            found[key] = value
    return found


def step_env(base: Mapping[str, str]) -> dict[str, str]:
    """The job's environment without this test run's Python first on PATH: a job's PATH
    is the runner's, where agentrun is not installed."""
    keep = {k: v for k, v in base.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    venv = str(Path(sys.executable).parent)
    keep["PATH"] = os.pathsep.join(p for p in base.get("PATH", "").split(os.pathsep) if p != venv)
    return keep
