"""The warm server (docs/warm.md, "Moving parts"): `python -m hills.warm
serve PATH MODULE...`, started by a client that found none. It preloads the
modules that client's eval loaded, listens on PATH, and forks a worker for
each connection of its user, and a spare between calls (docs/standby.md).
It never runs an eval itself. It exits when idle (HILLS_WARM_IDLE_S), when
its HILLS_HOME goes away, when its socket is replaced, or when stopped
(`hills warm stop`)."""

from __future__ import annotations

import os
import sys
from ..base.errors import leave_now
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import common, protocol, spare, worker
from .common import Host

IDLE_S = 600
# How often at most the info file beside the socket is rewritten for the
# activity it shows (`hills warm status`'s idle time left).
_PUBLISH_S = 1.0


def serve(path: str, modules: list[str], idle_s: float | None = None) -> int:
    """Listen at `path` until idle, stopped or replaced; one forked worker
    per request. Only one server holds a path (a lock beside it)."""
    import fcntl
    import socket

    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server has it
    try:
        os.unlink(path + ".stop")
    except FileNotFoundError:
        pass
    _preload(modules)
    host = Host(path, lock, worker.security_context("self"))
    from ..base import state

    home = state.home()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old_mask)
    listener.listen(64)
    # Non-blocking, for the server and its spare alike (they share it): each
    # accepts once select says a connection waits, and one may take it first.
    listener.setblocking(False)
    inode = os.stat(path).st_ino
    if idle_s is None:
        idle_s = _idle_seconds(path)
    server = _Server(listener, host, home, idle_s)
    server.publish()
    common.log(path, f"server {os.getpid()} started for HILLS_HOME {home}")
    reason = "idle"
    import signal

    signal.signal(signal.SIGTERM, common.on_stop)
    signal.signal(signal.SIGHUP, common.on_stop)
    try:
        while True:
            if server.wait(1.0):
                server.active()
            if server.accepting():
                server.active(publish=False)  # written after the fork, off the caller's path
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue  # the spare took it
                if stopped(path):
                    conn.close()
                    reason = "stopped"
                    break
                if not common.same_user(conn):
                    common.log(path, "refused a connection from another user")
                    conn.close()
                    continue
                server.fork_worker(conn)
                server.active()
                continue
            if stopped(path):  # its spare may have taken the connection that was to wake it
                reason = "stopped"
                break
            if not _still_ours(path, inode):
                reason = "its socket was replaced"
                break
            if home and not os.path.isdir(home):
                reason = "HILLS_HOME is gone"
                break
            if not server.children and server.idle_for() > idle_s:
                break
            server.fork_spare()
    except common.Stopped as exc:
        reason = f"stopped by {exc}"
    finally:
        server.end_spare()
        if _still_ours(path, inode):
            for leftover in (path, path + ".json", path + ".stop", path + ".lock"):
                try:
                    os.unlink(leftover)
                except OSError:
                    pass
        listener.close()
        common.log(path, f"server {os.getpid()} stopped: {reason}")
    return 0


@dataclass
class SpareSlot:
    """The server's view of its spare: the process, the read end of the
    pipe on which it says where it is, and whether it said it waits (the
    server then leaves the listening socket to it)."""

    pid: int
    fd: int
    waits: bool = False


class _Server:
    """The server's children: the workers (each with a pipe on which it
    sends the request it serves, and whose end says it ended), and at most
    one spare (docs/standby.md), which says on its own pipe when it waits
    for a connection, when it took one, and when it gave up."""

    def __init__(self, listener: Any, host: Host, home: str, idle_s: float) -> None:
        import time

        self.listener, self.host, self.path = listener, host, host.path
        self.children: set[int] = set()
        self.reports: dict[int, tuple[int, bytearray]] = {}
        self.last_request: bytes | None = None
        self.spare: SpareSlot | None = None
        self.leaving: set[int] = set()  # spares that gave way, ending their standby
        self._ready: list[Any] = []
        self._last = _now()
        self._published = 0.0
        self._info = {"pid": os.getpid(), "hills_home": home, "hills": _version(), "python": sys.executable,
                      "package": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "started": time.time(), "idle_s": idle_s, "active": time.time(), "spare": None}

    def active(self, publish: bool = True) -> None:
        """A request came (or the spare took one): the idle time starts
        again; said in the info file when `publish` and it is due."""
        self._last = _now()
        if publish and self._last - self._published >= _PUBLISH_S:
            self.publish()

    def idle_for(self) -> float:
        return _now() - self._last

    def publish(self) -> None:
        """Write what `hills warm status` shows beside the socket (PATH.json):
        the server, its last activity, and its spare while one waits."""
        import json
        import time

        self._published = _now()
        self._info["active"] = time.time() - (self._published - self._last)
        self._info["spare"] = self.spare.pid if self.spare is not None and self.spare.waits else None
        staged = self.path + ".json.tmp"
        try:
            with open(staged, "w", encoding="utf-8") as handle:
                json.dump(self._info, handle)
            os.replace(staged, self.path + ".json")
        except OSError:
            pass

    def wait(self, timeout: float) -> bool:
        """Wait for a connection or word from a child; whether a spare took
        a connection (that is activity too)."""
        import select

        watched: list[Any] = [fd for fd, _ in self.reports.values()]
        if self.spare is not None:
            watched.append(self.spare.fd)
        if self.spare is None or not self.spare.waits:
            watched.append(self.listener)
        try:
            self._ready = select.select(watched, [], [], timeout)[0]
        except InterruptedError:
            self._ready = []
        took = False
        for pid, (fd, got) in list(self.reports.items()):
            if fd in self._ready:
                chunk = read_some(fd)
                if chunk:
                    got += chunk
                    continue
                os.close(fd)
                del self.reports[pid]
                if _reaped(pid, 1.0):  # its pipe closes as it exits: reaped now, so a spare can follow
                    self.children.discard(pid)
                if got:
                    self.last_request = bytes(got)
        if self.spare is not None and self.spare.fd in self._ready:
            took = self._heard(self.spare, read_some(self.spare.fd))
        reap(self.children)
        self.leaving &= self.children
        return took

    def _heard(self, slot: SpareSlot, said: bytes) -> bool:
        """Act on what the spare said; whether it took a connection."""
        if protocol.SPARE_WAITS in said:
            slot.waits = True
            self.publish()
        if protocol.SPARE_TOOK in said:
            # A worker now, serving the request it was made for: the end
            # of its pipe says when it ended, as a worker's does.
            self.children.add(slot.pid)
            self.reports[slot.pid] = (slot.fd, bytearray())
            self.spare = None
            self.publish()
            return True
        if not said or protocol.SPARE_GAVE_WAY in said:
            self.last_request = None  # made for nothing, or for another request: not again
            self.children.add(slot.pid)  # reaped with the workers; it is leaving
            self.leaving.add(slot.pid)
            os.close(slot.fd)
            self.spare = None
            self.publish()
        return False

    def accepting(self) -> bool:
        """Whether a connection waits and is the server's: none is, once its
        spare said it waits (that one wakes for it too)."""
        return self.listener in self._ready and (self.spare is None or not self.spare.waits)

    def fork_worker(self, conn: Any) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                self.listener.close()
                worker.serve(conn, self.host, write)
            finally:
                # Whatever happens in a worker, it never goes back into
                # the server's loop or its clean-up.

                leave_now(3)
        os.close(write)
        conn.close()
        self.children.add(pid)
        self.reports[pid] = (read, bytearray())

    def fork_spare(self) -> None:
        """A spare for the last request served, once no worker runs."""
        if self.spare is not None or self.children or self.reports or self.last_request is None:
            return
        if not standby_enabled():
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                spare.run(self.listener, self.last_request, self.host, write)
            finally:

                leave_now(3)
        os.close(write)
        self.spare = SpareSlot(pid, read)

    def end_spare(self) -> None:
        """Stop the spare (it ends its standby and removes its run folder),
        unless it has just taken a connection; wait for those leaving."""
        for pid in self.leaving:
            _wait_for(pid, 10.0)
        self.leaving.clear()
        if self.spare is None:
            return
        said = read_some(self.spare.fd, block=False)
        if protocol.SPARE_TOOK not in said:
            import signal

            try:
                os.kill(self.spare.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            _wait_for(self.spare.pid, 10.0)
        os.close(self.spare.fd)
        self.spare = None


def read_some(fd: int, block: bool = True) -> bytes:
    """What a child wrote on its pipe, up to 64 KiB; b"" at its end (or,
    not `block`, when it wrote nothing)."""
    if not block:
        import select

        if not select.select([fd], [], [], 0)[0]:
            return b""
    try:
        return os.read(fd, 1 << 16)
    except OSError:
        return b""


def _reaped(pid: int, timeout: float) -> bool:
    """Whether the child `pid` ended and was waited for within `timeout`;
    one still running is left alone."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)


def _wait_for(pid: int, timeout: float) -> None:
    """Wait for the child `pid` to end, killing it after `timeout`."""
    if _reaped(pid, timeout):
        return
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def standby_enabled() -> bool:
    """Whether this server makes spares (`HILLS_WARM_STANDBY=off` says no)."""
    return os.environ.get("HILLS_WARM_STANDBY", "").lower() not in ("off", "0", "no", "false")


def _idle_seconds(path: str) -> float:
    """HILLS_WARM_IDLE_S, at least a second; a value that is not a number
    is said in the log, and the default kept."""
    given = os.environ.get("HILLS_WARM_IDLE_S")
    if given is None:
        return float(IDLE_S)
    try:
        value = float(given)
    except ValueError:
        value = float("nan")
    if not value >= 1.0 or value == float("inf"):
        common.log(path, f"HILLS_WARM_IDLE_S={given!r} is not a number of seconds (at least 1): {IDLE_S} s instead")
        return float(IDLE_S)
    return value


def _now() -> float:
    import time

    return time.monotonic()


# The modules an eval loads, for a server told nothing else (the evaluation
# service); the warm server preloads those its first eval loaded.
EVAL_MODULES = ("hills.commands.eval", "hills.cli.summary", "hills.run.evaluate", "hills.run.runner",
                "hills.run.sandbox", "hills.evidence.chain", "hills.evidence.report", "hills.run.measures",
                "hills.run.seeds", "hills.run.kept", "hills.base.gitobjects", "hills.run.snapshot",
                "hills.disk.locks", "hills.disk.uvenv", "hills.disk.pin", "hills.disk.manifest",
                "hills.run.replicates", "hills.base.progress", "hills.evidence.signing", "hills.evidence.trust",
                "hills.disk.hill", "hills.spaces", "hills.sdk", "hills.evidence.caller", "hills.base.names",
                "hills.disk.verdicts", "hills.disk.yamlfile", "hills.disk.schema", "hills.scoringhook",
                "hills.base.startup", "subprocess", "json")


def preload(modules: Iterable[str] = EVAL_MODULES) -> None:
    """Load `modules`, the signature library and the SHA-1 of large notes
    in a process that forks one process per request, then freeze what is
    loaded, so the forks share it and their collections never walk it."""
    _preload(list(modules))


def _preload(modules: list[str]) -> None:
    import importlib

    for name in modules:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # a module that cannot load alone loads in the worker, as it would cold
            continue
    try:
        import _hashlib  # noqa: F401  (a large note's SHA-1, hills.gitobjects)
    except ImportError:
        pass
    # The signature library is imported on a thread in a cold eval; here it
    # is loaded before any fork, so no worker starts a thread for it.
    from ..evidence import trust

    trust.load_library()
    import gc

    # What is loaded now stays: the workers' collections never walk it, so
    # they do not copy the server's pages by touching it.
    gc.collect()
    gc.freeze()


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def ended(children: Iterable[int]) -> list[int]:
    """The forks among `children` that have ended, waited for without
    blocking (a server forking per request: this one and the evaluation
    service)."""
    gone = []
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            gone.append(pid)
    return gone


def reap(children: set[int]) -> None:
    """Forget the forks in `children` that have ended."""
    children.difference_update(ended(children))


def stopped(path: str) -> bool:
    return os.path.exists(path + ".stop")




def _version() -> str:
    from .. import __version__

    return __version__
