"""GitLab's users as the gitlab forge asks for them: by username (which GitLab matches
without regard to case), once per forge object, and the token's own owner."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any


class Users:
    """Who a username is (its id, and whether it is a bot), asked of the API once."""

    def __init__(self, gl: Any, errors: Callable[[str], AbstractContextManager[None]]) -> None:
        """``gl``: the python-gitlab client; ``errors``: the forge's translation of
        python-gitlab's errors, around each request."""
        self.gl, self._errors = gl, errors
        self._found: dict[str, tuple[int, bool] | None] = {}

    def is_bot(self, login: str) -> bool:
        found = self.user(login)
        return found is not None and found[1]

    def id_of(self, login: str) -> int | None:
        found = self.user(login)
        return None if found is None else found[0]

    def user(self, login: str) -> tuple[int, bool] | None:
        """The id of the account named ``login``, and whether it is a bot (None: none)."""
        if login not in self._found:
            with self._errors(f"find the user {login}"):
                found = self.gl.users.list(username=login, get_all=False)
            users = [u for u in found if str(u.username).lower() == login.lower()]
            self._found[login] = (
                (int(users[0].id), bool(users[0].attributes.get("bot"))) if users else None
            )
        return self._found[login]

    def me(self) -> str:
        """The username of the token's owner (``GET /user``, once)."""
        if self.gl.user is None:
            self.gl.auth()
        return str(self.gl.user.username) if self.gl.user is not None else ""
