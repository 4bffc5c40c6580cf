"""What a check records: a verify or finalize command's start, its result, its cut-off.

The runner runs the command and makes the phase commit; these turn what happened (the
exit code, the output, the commit) into the events to append. A verify command passes on
exit 0; a finalize command is failure-tolerant: a failed step is noted, and the build
goes on (DESIGN §5).
"""

from __future__ import annotations

from agentrun import events as ev
from agentrun.kernel.decide import RunCheck, RunFinalizeStep, SkipVerify
from agentrun.kernel.draft import Draft
from agentrun.kernel.ladder import fingerprint

GAVE_UP = "gave up: the step kept being cut short (Ctrl-C or a runner that stopped)"
REASON_TAIL = 2000  # characters of a failed check's output its reason quotes


def check_started(work: RunCheck) -> Draft:
    return Draft(ev.VerifyStarted(step=work.step, round=work.round, attempt=work.attempt))


def report_name(work: RunCheck) -> str:
    task = f"{work.task}-" if work.task else ""
    return f"verify-{task}{work.step}-r{work.round}-a{work.attempt}.txt"


def check_completed(
    work: RunCheck, exit_code: int | None, status: str, output: str, report: bytes, head: str
) -> Draft:
    """The command ended: ``status`` says how (``exit 1``, ``timed out after …``)."""
    passed = exit_code == 0
    completed = ev.VerifyCompleted(
        step=work.step,
        round=work.round,
        attempt=work.attempt,
        outcome="pass" if passed else "fail",
        exit_code=exit_code,
        report=report_name(work),
        reason="" if passed else f"`{work.command}` {status}:\n{output[-REASON_TAIL:]}",
        head=head,
        failure=None if passed else fingerprint(work.step, output),
    )
    return Draft(completed, artifacts={report_name(work): report})


def skipped(work: SkipVerify) -> Draft:
    return Draft(
        ev.VerifyCompleted(
            step=work.step, round=work.round, attempt=0, outcome="skipped", reason=work.reason
        )
    )


def cut_short(phase: str, round_: int, attempt: int, why: str = "Ctrl-C") -> Draft:
    """A check's command was interrupted (or cancelled by an abort): it runs again."""
    return Draft(
        ev.PhaseFailed(
            phase=phase,
            round=round_,
            attempt=attempt,
            error=f"interrupted ({why})",
            interrupted=True,
        )
    )


def finalize_started(work: RunFinalizeStep) -> Draft:
    return Draft(ev.FinalizeStarted(step=work.step, attempt=work.attempt))


def finalize_report_name(work: RunFinalizeStep) -> str:
    return f"finalize-{work.step}-a{work.attempt}.txt"


def finalize_ended(
    work: RunFinalizeStep, head: str | None, note: str, report: bytes | None = None
) -> list[Draft]:
    """A finalize step ended: ``head`` its commit when it succeeded, else ``note`` says why.

    ``report`` is the command's output (none when the step was given up).
    """
    ok = head is not None
    arts = {finalize_report_name(work): report} if report is not None else {}
    drafts = [
        Draft(ev.FinalizeStepCompleted(step=work.step, ok=ok, note=note, head=head), artifacts=arts)
    ]
    if not ok:
        drafts.append(Draft(ev.ObservationRecorded(phase=f"finalize:{work.step}", text=note)))
    return drafts + ([Draft(ev.FinalizeCompleted())] if work.last else [])


def given_up(work: RunFinalizeStep) -> list[Draft]:
    """A finalize step that kept being cut short is noted and left."""
    return finalize_ended(work, None, GAVE_UP)
