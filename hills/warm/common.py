"""What the warm server and its forks (worker, spare) share: the record a
fork gets of its server, the log beside the socket, the peer check and the
stop signal."""

from __future__ import annotations

import os
import sys
from typing import Any, NamedTuple

from .protocol import MAX_REQUEST


class Host(NamedTuple):
    """The server a fork was made by: its socket's path, its lock on that
    path (which no fork keeps: -1 in a process that holds none) and its own
    security context, read once before it forks (its forks' own)."""

    path: str
    lock: int
    context: dict[str, str]


class Stopped(BaseException):
    """A stop signal reached the server (or its spare): not an error any
    `except Exception` on the way may take for its own."""


def on_stop(signum: int, frame: Any) -> None:
    """The server's (and its spare's) handler of SIGTERM and SIGHUP."""
    import signal

    raise Stopped(signal.Signals(signum).name)


def same_user(conn: Any) -> bool:
    """Whether the peer of `conn` (SO_PEERCRED) is this process's user."""
    import socket

    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except OSError:
        return False
    uid = int.from_bytes(raw[4:8], sys.byteorder)
    return uid == os.getuid()


def log(path: str, message: str) -> None:
    """One line in warm.log beside the socket at `path`, kept under 1 MiB."""
    import time

    log = os.path.join(os.path.dirname(path), "warm.log")
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {os.path.basename(path)[:12]} {message}\n"
    try:
        if os.path.getsize(log) > MAX_REQUEST:
            os.replace(log, log + ".1")
    except OSError:
        pass
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


def flush() -> None:
    """Flush stdout and stderr; a reader that went away is no error here."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


def leave_the_server(host: Host) -> None:
    """A fork's first step: the server's lock and signal handlers are not its own."""
    import signal

    if host.lock >= 0:
        os.close(host.lock)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setpgid(0, 0)
