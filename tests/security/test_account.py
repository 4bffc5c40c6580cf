"""The agent account is created once even when several runners start at the same moment."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from collections.abc import Iterator

import pytest
from security.accounts import as_root

from agentrun.isolation import account

ENSURE = "import sys; from agentrun.isolation import account; print(*account.ensure(sys.argv[1]))"


@pytest.fixture
def fresh_name() -> Iterator[str]:
    name = f"agentrun-race-{os.getpid() % 100000}"
    yield name
    as_root("userdel", name)


def test_runners_creating_the_account_at_once_all_get_it(fresh_name: str) -> None:
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", ENSURE, fresh_name], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    said = [proc.communicate(timeout=60)[0].split() for proc in starts]

    assert [proc.returncode for proc in starts] == [0, 0, 0, 0]
    entry = pwd.getpwnam(fresh_name)
    assert said == [[str(entry.pw_uid), str(entry.pw_gid)]] * 4
    assert account.ensure(fresh_name) == (entry.pw_uid, entry.pw_gid)
