"""Who asked for what a report records, and through which trust mode:
`same-user` (the caller's own machine state) unless the evaluation
service answers a caller (docs/service.md). Only the service's own process
may say so: one whose user is the service user that `hills setup service`
recorded, as root, beside the state folder its key is in (`service_process`).
The service's connection process is told in-process (`serve_for`); the
processes it starts (the trials of `hills tune`) read the caller from
`HILLS_SERVED_FOR`, which the same check guards, since only the service
user can set the environment of a process that passes it."""

from __future__ import annotations

import os

from ..base.errors import EnvironmentProblem

SAME_USER, SERVICE, SELF_REPORTED = "same-user", "service", "self-reported"
TRUST_MODES = (SERVICE, SAME_USER, SELF_REPORTED)
SERVED_FOR = "HILLS_SERVED_FOR"
SERVICE_CONFIG = "service.json"

# The caller the service's connection process answers; set by `serve_for`,
# never from anything the caller passes.
_served: str | None = None
# (euid, HILLS_HOME) -> why this process is not the service's, "" when it is.
_checked: dict[tuple[int, str], str] = {}


def serve_for(user: str) -> None:
    """Record that this process, and what it starts, answers `user` for
    the evaluation service, and never sends a command to a service."""
    global _served
    _served = user
    os.environ[SERVED_FOR] = user
    os.environ["HILLS_SERVICE"] = "off"


def not_the_service() -> str:
    """Why this process is not the evaluation service's own, or "" when it
    is: its machine state is `STATE/home` of a state folder that its user
    owns and no one else may enter, beside a `service.json` that root owns
    and no one else may write, naming this user as the service's."""
    from ..base import state

    home = state.home()
    key = (os.geteuid(), home)
    if key not in _checked:
        _checked[key] = _why_not(home, key[0])
    return _checked[key]


def _why_not(home: str, euid: int) -> str:
    import json
    import stat

    state_dir = os.path.dirname(home)
    config = os.path.join(state_dir, SERVICE_CONFIG)
    if euid == 0:
        return "it runs as root, and the service never does"
    if os.path.basename(home) != "home":
        return f"its machine state '{home}' is not the home of a service's state folder"
    try:
        folder, record = os.lstat(state_dir), os.lstat(config)
    except OSError:
        return f"'{config}', the record 'hills setup service' writes, is not there"
    if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != euid or folder.st_mode & 0o077:
        return f"its state folder '{state_dir}' is not its own user's alone"
    if not stat.S_ISREG(record.st_mode) or record.st_uid != 0 or record.st_mode & 0o022:
        return f"'{config}' was not written by root ('hills setup service')"
    try:
        with open(config, encoding="utf-8") as handle:
            named = json.load(handle).get("user")
        import pwd

        if not isinstance(named, str) or pwd.getpwnam(named).pw_uid != euid:
            return f"'{config}' names another service user ({named!r})"
    except (OSError, ValueError, AttributeError, KeyError):
        return f"'{config}' names no service user this machine knows"
    return ""


def served_for() -> str | None:
    """The user the service answers, or None in same-user mode. A caller
    named where the process is not the service's (HILLS_SERVED_FOR set by
    the caller, a `hills serve` of the caller's own) is refused: its key
    is not the service's, and a report it signed could not say so."""
    name = _served or os.environ.get(SERVED_FOR)
    if not name:
        return None
    why = not_the_service()
    if why:
        raise EnvironmentProblem(f"'{SERVED_FOR}' names user '{name}', but this process is not the hills "
                                 f"service: {why}",
                                 hint=f"unset {SERVED_FOR}: only the service's own key signs a report made for "
                                      "another user; a report this machine's key signs says trust 'same-user'")
    return name


def trust() -> str:
    """The report's `trust`: service or same-user (refused when the process
    would claim the service without being it)."""
    return SERVICE if served_for() else SAME_USER


def user() -> str:
    """The name of the user the report is made for."""
    served = served_for()
    if served:
        return served
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
