"""Who asked for what a report records, and through which trust mode:
`same-user` (the caller's own machine state) unless the evaluation
service says it is answering a caller (docs/service.md). The service's
process says so in its environment, so that what it starts (the trials of
`hills tune`) records the same caller."""

from __future__ import annotations

import os

SAME_USER, SERVICE = "same-user", "service"
SERVED_FOR = "HILLS_SERVED_FOR"


def serve_for(user: str) -> None:
    """Record that this process, and what it starts, answers `user` for
    the evaluation service, and never sends a command to a service."""
    os.environ[SERVED_FOR] = user
    os.environ["HILLS_SERVICE"] = "off"


def trust() -> str:
    """The report's `trust`: service or same-user. (Only the signer's key
    says who signed: in same-user mode the caller holds the key and could
    write anything here.)"""
    return SERVICE if os.environ.get(SERVED_FOR) else SAME_USER


def user() -> str:
    """The name of the user the report is made for."""
    served = os.environ.get(SERVED_FOR)
    if served:
        return served
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
