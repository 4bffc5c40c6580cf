"""A full disk is one line and exit 1, and loses nothing: once space is freed, work goes on.

The repository lives on a 3 MiB tmpfs mounted in a mount namespace of the test's own
(``unshare -m``), filled up with ``dd`` after the build parked on a question.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from runner.helpers import VENV_BIN, cli_env

SCRIPT = r"""
set -u
mount -t tmpfs -o size=3m tmpfs "$MNT"
cd "$MNT" && git init -q -b main repo && cd repo
printf '[roles]\ndefault = ["s"]\n' >.agentrun.toml
printf '[runtimes.s]\nkind = "script"\nscript = "s.toml"\n' >>.agentrun.toml
printf '[[step]]\nphase = "plan"\nattempt = 1\nverb = "escalate"\ntext = "Go on?"\n' >s.toml
printf '[[step]]\nphase = "implement"\nwrite = { "done.txt" = "done" }\n' >>s.toml
git add -A && git commit -qm start
git agentrun run "Fill the disk" >/dev/null 2>&1
dd if=/dev/zero of="$MNT/filler" bs=64k count=100000 2>/dev/null
for cmd in "answer fill-the-disk yes" "resume fill-the-disk" "run Another"; do
  git agentrun $cmd >/dev/null 2>"$ERR"; echo "$? $(cat "$ERR")"  # $ERR: not on the tmpfs
done
rm "$MNT/filler"
git agentrun answer fill-the-disk yes >/dev/null 2>&1; echo "$? answered"
git agentrun resume fill-the-disk >/dev/null 2>&1; echo "$? resumed"
git agentrun status --json |
  python3 -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['state'])"
"""


def test_a_full_disk_is_one_line_and_resume_works_once_space_is_freed(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-m", "-r"]
    env = cli_env(
        {"MNT": str(mnt), "ERR": str(tmp_path / "err"), "AGENTRUN_WORKTREES": str(mnt / "wt")}
    )
    assert str(VENV_BIN) in env["PATH"]
    done = subprocess.run(
        [*unshare, "bash", "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 6, done.stdout + done.stderr
    for line in lines[:3]:
        code, _, said = line.partition(" ")
        assert code == "1", line
        assert said.startswith("agentrun: no space left on the device while writing "), line
        assert "nothing already recorded is lost" in said and "\n" not in said
    assert lines[3:] == ["0 answered", "0 resumed", "complete"]
