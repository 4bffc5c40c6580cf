"""The ``aider`` runtime: aider, one ``aider --message-file`` process per turn.

aider edits files with SEARCH/REPLACE blocks in its replies, but cannot run commands
on its own (``--yes-always`` does not run the shell commands a model suggests), so it
cannot run ``git agentrun agent …``. Instead the agent ends its last reply with a
fenced block tagged ``agentrun`` holding the verb, and this adapter reports it
in-process, validated like any verb (DESIGN §6). The block syntax::

    ```agentrun
    VERB [ARGUMENTS]
    [MORE LINES]
    ```

``VERB [ARGUMENTS]`` is read like a shell command line (quotes group words); a leading
``git agentrun agent`` is allowed. The lines after the first give the text when the
arguments do not:

- ``plan`` — the plan is the lines that follow;
- ``approve``;
- ``revise --finding "TEXT" [--finding "TEXT" …]`` — or one finding a line below;
- ``done [--summary "TEXT"]`` — or the summary on the lines below;
- ``pass``; ``fail --reason "TEXT"`` — or the reason below;
- ``escalate "QUESTION"`` — or the question below.

The last such block of the last reply counts. The prompt gets a paragraph saying so.

aider runs with its own commits off (agentrun makes the phase commit), without
touching ``.gitignore``, with ``--edit-format diff`` unless ``extra_args`` names one
(aider's "whole" format would read the ``agentrun`` block as a file), and with its
histories in the scratch folder. A producer's next round restores the previous
session's chat history (``--restore-chat-history``) when it is still in the
worktree. Usage comes from aider's "Tokens: … sent, … received." lines (aider's own
count, rounded: ``1.8k``) and its "Cost: … session." line when it knows the price.

aider retries a failing API for about a minute (and then exits 0): past the runtime's
``max_retries`` the adapter ends it and reports the runtime ``unavailable``, so that
an alternate takes over. A rejected key is ``auth``, naming the provider's variable.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pygit2

from agentrun import procs
from agentrun.agent.verbs import report
from agentrun.environment import key_variable
from agentrun.errors import AgentrunError, VerbError
from agentrun.events import Usage
from agentrun.kernel.verbs import VerbReport
from agentrun.runtimes.agent_cli import (
    CliHandle,
    CliRuntime,
    CliTurn,
    EitherEvent,
    failed,
    one_line,
    register_cli,
    scratch_dir,
    stopped,
)
from agentrun.runtimes.base import TurnResult

FLAGS = (
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-analytics",
    "--no-pretty",
    "--no-fancy-input",
    "--no-show-model-warnings",
    "--no-auto-lint",
    "--no-auto-test",
    "--no-suggest-shell-commands",
    "--no-detect-urls",
)
INSTRUCTIONS = """

## Reporting from aider

You cannot run commands here. Instead of running `git agentrun agent VERB …`, end
your reply with a fenced block tagged `agentrun` that holds the verb and its
arguments, for example:

```agentrun
done --summary "Added the parser"
```

For `plan`, write the plan on the lines after `plan` instead of passing a file. For
`revise`, give one `--finding "…"` per finding. Only the last such block counts.
"""
_BLOCK = re.compile(r"^```agentrun[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_TOKENS = re.compile(r"Tokens: ([\d.]+k?) sent(?:, [\d.]+k? cache \w+)*, ([\d.]+k?) received")
_COST = re.compile(r"Cost: \$[\d.]+ message, \$([\d.]+) session")
_ERROR = re.compile(r"litellm\.\w+Error|not able to authenticate|servers are down")
_VERB_OPTIONS = {"revise": "--finding", "done": "--summary", "fail": "--reason"}
_TAGS_CACHE = ".aider.tags.cache.v*"


def last_reply(history: str) -> str:
    """The assistant's text after the last user message of an aider chat history file.

    aider writes user input as ``#### `` lines and its own notes as ``> `` lines.
    """
    lines = history.splitlines()
    last_user = max((i for i, line in enumerate(lines) if line.startswith("####")), default=-1)
    return "\n".join(line for line in lines[last_user + 1 :] if not line.startswith(">"))


def parse_block(reply: str) -> VerbReport | None:
    """The verb in the reply's last ``agentrun`` block; None when there is none."""
    blocks = _BLOCK.findall(reply)
    if not blocks:
        return None
    first, _, rest = blocks[-1].strip("\n").partition("\n")
    try:
        words = shlex.split(first)
    except ValueError as exc:
        raise VerbError(f"cannot read the agentrun block's first line {first!r}: {exc}") from None
    if words[:3] == ["git", "agentrun", "agent"]:
        words = words[3:]
    if not words:
        raise VerbError("the agentrun block is empty: it needs a verb (done, approve, …)")
    verb, args = words[0], words[1:]
    body = rest.strip()
    option = _VERB_OPTIONS.get(verb)
    values = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == option]
    loose = [a for i, a in enumerate(args) if a != option and (i == 0 or args[i - 1] != option)]
    if verb == "revise":
        lines = [line.strip().removeprefix("- ").strip() for line in body.splitlines()]
        return VerbReport(verb, findings=tuple(values or [line for line in lines if line]))
    if verb == "plan":
        return VerbReport(verb, text=body)
    return VerbReport(verb, text=" ".join(values or loose) or body)


def usage_of(output: str) -> Usage:
    tokens_in = tokens_out = 0
    for sent, received in _TOKENS.findall(output):
        tokens_in += _count(sent)
        tokens_out += _count(received)
    costs = _COST.findall(output)
    return Usage(
        tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=float(costs[-1]) if costs else None
    )


def _count(text: str) -> int:
    return round(float(text[:-1]) * 1000) if text.endswith("k") else int(float(text))


class AiderRuntime(CliRuntime):
    binary = "aider"
    hint = "install it with `pipx install aider-chat` or set `binary`"

    def argv(self, binary: str, message: Path, history: Path) -> list[str]:
        argv = [binary, "--message-file", str(message), *FLAGS]
        argv += ["--chat-history-file", str(history)]
        argv += ["--input-history-file", str(history.with_suffix(".input"))]
        if not any(a in ("--edit-format", "--chat-mode") for a in self.config.extra_args):
            argv += ["--edit-format", "diff"]
        if self.config.model:
            argv += ["--model", self.config.model]
        return argv + list(self.config.extra_args)

    def _run(self, turn: CliTurn) -> TurnResult:
        handle, control, resume = turn.handle, turn.control, turn.resume
        spec = handle.spec
        folder = scratch_dir(spec.workdir, "aider")
        history = folder / f"{spec.session}.chat.md"
        turns = len(list(folder.glob(f"{spec.session}.prompt-*.md")))
        message = folder / f"{spec.session}.prompt-{turns + 1}.md"
        message.write_text(turn.prompt + INSTRUCTIONS, encoding="utf-8")
        argv = self.argv(turn.binary, message, history)
        if resume:
            argv[1:1] = self._restore(handle, folder, history, resume)
        caches = set(spec.workdir.glob(_TAGS_CACHE))
        give_up = EitherEvent(control.cancel)
        retries = 0

        def line(text: str) -> None:
            nonlocal retries
            handle.transcript.append(text + "\n")
            if text.strip():
                control.on_activity(one_line(text))
            if text.startswith("Retrying in "):
                retries += 1
                if retries > self.config.max_retries:
                    give_up.set()  # aider would back off for a minute more; let an alternate in

        done = turn.run(argv, line, cancel=give_up)
        for cache in set(spec.workdir.glob(_TAGS_CACHE)) - caches:
            shutil.rmtree(cache, ignore_errors=True)  # aider's, not the build's
        handle.runtime_session_id = str(history.relative_to(spec.workdir))
        if not isinstance(done, procs.Finished):
            return done
        if done.cancelled and not control.cancel.is_set():
            handle.transcript.append(f"[agentrun] gave up after {retries - 1} retries\n")
            errors = [t for t in done.output.splitlines() if "litellm." in t] or ["retries"]
            usage = usage_of(done.output)
            return failed("aider", errors[-1], usage, self._key_var(), unavailable=True)
        return self._outcome(done, handle, history)

    def _restore(self, handle: CliHandle, folder: Path, history: Path, resume: str) -> list[str]:
        """Continue from an earlier chat history of this worktree, when it is still there."""
        previous = (handle.spec.workdir / resume).resolve()
        if previous.parent != folder.resolve() or not previous.is_file():
            handle.transcript.append(f"[agentrun] chat history {resume} is gone; starting fresh\n")
            return []
        if previous != history.resolve():
            handle.transcript.append(f"[agentrun] restoring aider's chat history {resume}\n")
            shutil.copyfile(previous, history)
        return ["--restore-chat-history"]

    def _outcome(self, done: procs.Finished, handle: CliHandle, history: Path) -> TurnResult:
        spec = handle.spec
        usage = usage_of(done.output)
        halted = stopped(done, handle, usage)
        if halted is not None:
            return halted
        try:
            reply = last_reply(history.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            reply = ""
        errors = [line for line in done.output.splitlines() if _ERROR.search(line)]
        try:
            rep = parse_block(reply)
            if rep is None:
                if errors or done.exit_code != 0:
                    raised = [line for line in errors if "litellm." in line] or errors
                    tail = done.output.strip().splitlines()[-1:] or [f"exit {done.exit_code}"]
                    return failed("aider", (raised or tail)[-1], usage, self._key_var())
                error = "no-terminal: aider's last reply held no ```agentrun block"
                handle.transcript.append(f"[agentrun] {error}\n")
                return TurnResult(ok=False, usage=usage, error=error, cause="no-terminal")
            env = spec.agent_env()
            repo = pygit2.Repository(str(spec.log_repository()))
            said = report(repo, env, rep)
        except AgentrunError as exc:
            handle.transcript.append(f"[agentrun] the agentrun block was refused: {exc}\n")
            return TurnResult(ok=False, usage=usage, error=f"agentrun block refused: {exc}")
        handle.transcript.append(f"[agentrun] {said}\n")
        return TurnResult(ok=True, text=reply, usage=usage)

    def _key_var(self) -> str:
        return key_variable(self.config)


register_cli("aider", AiderRuntime)
