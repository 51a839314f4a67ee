"""The spare (docs/standby.md, "Moving parts"): a fork of the server that
becomes the caller of the request served last, makes a standby for it, and
serves the next connection if it is that request again, handing its
standby to that eval; any other request gets RETRY and goes to the server."""

from __future__ import annotations

import os
from ..base.errors import leave_now
from dataclasses import dataclass
from typing import Any

from . import common, protocol, worker
from .common import Host
from .protocol import Request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..run.standby import Standby

_PR_SET_DUMPABLE = 4


@dataclass
class Spare:
    """One spare's state: the request it was made for (as sent, and read),
    the server that forked it, the listening socket it shares with that
    server, the pipe on which it tells the server where it is
    (protocol.SPARE_*), and its standby once made."""

    payload: bytes
    request: Request
    host: Host
    listener: Any
    notify: int
    standby: Standby | None = None

    def tell(self, word: bytes) -> None:
        """Tell the server where the spare is."""
        os.write(self.notify, word)

    def log(self, message: str) -> None:
        common.log(self.host.path, f"spare {os.getpid()} {message}")


def run(listener: Any, payload: bytes, host: Host, notify: int) -> None:
    """Become the caller of `payload`, the last request served, make a
    standby for it and serve the next connection with it, if that is the
    same request (docs/standby.md)."""
    import signal


    common.leave_the_server(host)
    signal.signal(signal.SIGTERM, common.on_stop)
    signal.signal(signal.SIGHUP, common.on_stop)
    spare: Spare | None = None
    try:
        # Before any seed is drawn: the caller's shell must not read them
        # from this process while it waits (docs/standby.md).
        if not undumpable():
            common.log(host.path, f"spare {os.getpid()}: no standby: cannot make its memory unreadable")
            return
        request = Request.decode(payload)
        if worker.mismatch(request, list(request.passed)) or worker.become(request, None):
            return
        spare = Spare(payload, request, host, listener, notify)
        spare.standby = standby_for(spare)
        if spare.standby is None:
            return
        spare.tell(protocol.SPARE_WAITS)
        spare.log(f"waits with a standby in {spare.standby.ctx.run_dir}")
        _serve_next(spare)
    except common.Stopped:
        pass
    finally:
        # A stop that comes while it cleans up must not cut that short and
        # leave its run folder: the server waits for it to end.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if spare is not None and spare.standby is not None:
            spare.standby.discard()
        leave_now(0)


def _serve_next(spare: Spare) -> None:
    """Take the next connection of this user; serve it with the standby
    when it is the spare's request, else answer RETRY and return."""
    import select
    import signal
    import time

    while True:
        if not select.select([spare.listener], [], [], 1.0)[0]:
            continue
        try:
            conn, _ = spare.listener.accept()
        except (BlockingIOError, InterruptedError):
            continue  # the server took it
        if common.same_user(conn):
            break
        common.log(spare.host.path, "refused a connection from another user")
        conn.close()
    forked = time.monotonic()
    try:
        asked, fds = worker.receive(conn)
    except (OSError, ValueError) as exc:
        spare.log(f"refused a request: {exc}")
        spare.tell(protocol.SPARE_GAVE_WAY)
        return
    if asked != spare.payload:
        spare.log(f"gave way to another request ({difference(spare.request, asked)})")
        spare.tell(protocol.SPARE_GAVE_WAY)  # the server listens again at once
        try:
            conn.sendall(protocol.reply(protocol.RETRY))
        except OSError:
            pass
        return
    spare.tell(protocol.SPARE_TOOK)  # kept open: its end tells the server this worker ended
    spare.listener.close()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    standby = spare.standby
    assert standby is not None
    reason = worker.mismatch(spare.request, fds) or worker.context_difference(conn, spare.request, spare.host)
    if reason is not None:
        standby.discard()
        worker.decline(conn, spare.host.path, reason)
    worker.streams(dict(zip(spare.request.passed, fds)))
    worker.run(conn, spare.host.path, spare.request, forked, standby)


def difference(expected: Request, payload: bytes) -> str:
    """What differs in `payload` from the request a spare was made for,
    named without a value (an environment variable may hold a secret)."""
    try:
        other = Request.decode(payload)
    except ValueError:
        return "a request it cannot read"
    for name in protocol.COMPARED:
        if getattr(expected, name) != getattr(other, name):
            return f"its {name}" if name != "passed" else "its open standard streams"
    changed = sorted(set(expected.env.items()) ^ set(other.env.items()))
    return f"its environment variable {changed[0][0]}" if changed else "its bytes"


def standby_for(spare: Spare) -> Standby | None:
    """A standby for the spare's request, when it is a plain `hills eval`
    one can be made for; None otherwise (and why, in the log, when it failed)."""
    from .. import entry

    request = spare.request
    verb = entry.fast_verb(request.program, request.args)
    if verb != "eval":
        return None
    rest = request.args[1:] if request.program in ("hills", "git-hill") else request.args
    try:
        from ..run import standby
        from ..commands import eval as command

        asked = command.standby_request(rest)
        return standby.reserve(asked) if asked is not None else None
    except Exception as exc:  # a bad request: its own eval will say what is wrong
        common.log(spare.host.path, f"spare {os.getpid()}: no standby: {type(exc).__name__}: {exc}")
        return None


def undumpable() -> bool:
    """Close this process's memory and /proc files (environ, mem, fd) to
    other processes of its user, as a spare's must be: it holds its eval's
    seeds while it waits (root, or CAP_SYS_PTRACE, keeps them). Whether it
    did; dumpable again only at an exec, which the spare never does."""
    from ..run import runner

    try:
        return runner.prctl(_PR_SET_DUMPABLE, 0) == 0
    except (OSError, AttributeError, ImportError, TypeError):
        return False
