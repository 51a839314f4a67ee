"""Who asked for what a report records, and through which trust mode:
`same-user` (the caller's own machine state) unless the evaluation
service says it is answering a caller (docs/service.md)."""

from __future__ import annotations

import os

SAME_USER, SERVICE = "same-user", "service"
_current: dict[str, str] = {}


def serve_for(user: str) -> None:
    """Record that this process answers `user` for the evaluation service."""
    _current.update(trust=SERVICE, user=user)


def trust() -> str:
    """The report's `trust`: service or same-user."""
    return _current.get("trust", SAME_USER)


def user() -> str:
    """The name of the user the report is made for."""
    if "user" not in _current:
        import pwd

        try:
            _current["user"] = pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:
            _current["user"] = str(os.geteuid())
    return _current["user"]
