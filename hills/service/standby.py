"""The service's warm path (docs/service-warm.md): per hill, one keeper, a
fresh fork of the listener that holds a standby evaluator (hills.run.standby)
for the next plain eval of that hill, hands it to the one connection that
claims it, runs that eval and exits. The listener forks keepers and drops
them; it never runs an eval."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, field

from ..base.errors import leave_now

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..run.standby import Standby
    from .protocol import Connection

# A keeper serves one eval and exits. Switched off only by a test, to show
# what that holds off: a keeper that serves eval after eval in one
# interpreter, with the same standby's run folder and process.
ONE_EVAL = True
# A keeper nobody claimed for this long ends (its run folder and processes go).
IDLE_S = 600.0
# How long a connection waits for a keeper it found waiting to answer its claim.
CLAIM_S = 5.0
# A hill a keeper could make no standby for gets no other for this long (a
# hill with an exclusive resource, say, would otherwise cost a fork per eval).
BARREN_S = 60.0
READY, TOOK, GO, NONE = b"R", b"T", b"G", b"N"


def say(message: str) -> None:
    """One line in the service's own log (its stderr), never the caller's."""
    stream = sys.__stderr__
    if stream is None:
        return
    try:
        stream.write(f"hills service: {message}\n")
        stream.flush()
    except (OSError, ValueError):
        pass


@dataclass
class Keeper:
    """The listener's view of one keeper: its hill, pid, the listener's end
    of the channel a connection claims it on (inherited by every connection
    forked after it), the pipe on which it says it is ready, and whether it
    said so."""

    hill: str
    pid: int
    channel: socket.socket
    notify: int
    ready: bool = False


@dataclass
class Keepers:
    """Every keeper of the service, by hill name; at most one per hill."""

    folder: str
    by_hill: dict[str, Keeper] = field(default_factory=dict)
    pids: set[int] = field(default_factory=set)  # every keeper not yet waited for, dropped ones too
    barren: dict[str, float] = field(default_factory=dict)  # hill -> when its keeper could make no standby

    def fds(self) -> list[int]:
        """The pipes the listener waits on."""
        return [keeper.notify for keeper in self.by_hill.values()]

    def ready(self) -> dict[str, socket.socket]:
        """The channel of each keeper that waits with its standby."""
        return {name: keeper.channel for name, keeper in self.by_hill.items() if keeper.ready}

    def heard(self, readable: list[Any]) -> None:
        """Act on what the keepers said: ready, taken (it serves its one
        eval and ends), or gone (the end of its pipe)."""
        for name, keeper in list(self.by_hill.items()):
            if keeper.notify not in readable:
                continue
            try:
                said = os.read(keeper.notify, 1 << 14)
            except OSError:
                said = b""
            words = _words(said)
            for word, where in words:
                if word == READY:
                    keeper.ready = True
                    say(f"keeper {keeper.pid}: standby of hill '{name}' waits in {where}")
                elif word == NONE:
                    self.barren[name] = time.monotonic()
            if said and not any(word in (TOOK, NONE) for word, _ in words):
                continue
            self._forget(name)  # gone, or busy with the one eval it serves

    def want(self, hill: str, body: Callable[[str, socket.socket, int], None], close: Callable[[], None]) -> None:
        """A keeper for `hill`, unless one lives (after an eval of it): a
        fork of the listener that runs `body(hill, channel, notify)` after
        `close()` shut what is the listener's alone, and never returns."""
        if hill in self.by_hill or time.monotonic() - self.barren.get(hill, -BARREN_S) < BARREN_S:
            return
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                mine.close()
                os.close(read_end)
                close()
                self.close_in_child()
                body(hill, theirs, write_end)
            finally:
                leave_now(3)
        theirs.close()
        os.close(write_end)
        self.by_hill[hill] = Keeper(hill, pid, mine, read_end)
        self.pids.add(pid)

    def drop_all(self, why: str) -> None:
        """End every keeper (a version was committed or pinned: the plans
        they were made for may be stale)."""
        for name, keeper in list(self.by_hill.items()):
            try:
                os.kill(keeper.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            say(f"standby of hill '{name}' dropped: {why}")
            self._forget(name)
        self.barren.clear()

    def reap(self) -> None:
        """Wait for the keepers that ended and remove what they left."""
        from ..warm.server import ended

        for pid in ended(self.pids):
            self.pids.discard(pid)
            shutil.rmtree(os.path.join(self.folder, f"{pid}-standby"), ignore_errors=True)

    def _forget(self, name: str) -> None:
        keeper = self.by_hill.pop(name)
        keeper.channel.close()
        os.close(keeper.notify)

    def close_in_child(self) -> None:
        """In a fork: the listener's pipes are not its business (the
        channels stay: a connection claims a keeper on them)."""
        for keeper in self.by_hill.values():
            os.close(keeper.notify)
        self.by_hill = {}


def _words(said: bytes) -> list[tuple[bytes, str]]:
    """What a keeper said on its pipe, in order: READY with its run folder
    (up to a newline), TOOK, NONE."""
    words = []
    while said:
        word, said = said[:1], said[1:]
        where = ""
        if word == READY:
            line, _, said = said.partition(b"\n")
            where = line.decode("utf-8", "replace")
        words.append((word, where))
    return words


def keep(hill: str, folder: str, channel: socket.socket, notify: int,
         run: Callable[[Connection, list[str], str, Standby], int]) -> None:
    """The keeper of `hill`, in a fresh fork of the listener: make a standby
    for a plain eval of it, wait for the connection that claims it, and run
    that eval with it (`run(conn, argv, user, standby)`); then exit."""
    from ..commands import eval as command
    from ..run import standby as run_standby

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    placeholder = os.path.join(folder, f"{os.getpid()}-standby")
    standby: Standby | None = None
    try:
        # Before any seed is drawn, as a same-user spare does (docs/standby.md):
        # no other process of the service user (an unconfined evaluator of a
        # hill declared `sandbox: none`) may read them from this one.
        if not _undumpable():
            say(f"no standby for hill '{hill}': cannot make the keeper's memory unreadable")
            os.write(notify, NONE)
            return
        os.mkdir(placeholder, 0o700)
        while True:
            # The submission is not part of what a standby is made for: a
            # placeholder, empty; the eval that claims it names its own.
            asked = command.standby_request([placeholder, "-H", hill])
            standby = run_standby.reserve(asked) if asked is not None else None
            if standby is None:
                say(f"no standby for hill '{hill}': not a plain eval a standby can be made for")
                os.write(notify, NONE)
                return
            # Said in the log by the listener once it knows: a connection
            # that comes after the line is handed this keeper.
            os.write(notify, READY + standby.ctx.run_dir.encode("utf-8", "surrogateescape") + b"\n")
            claimed = _claim(channel)
            if claimed is None:
                say(f"standby of hill '{hill}' ended: nobody claimed it in {IDLE_S:.0f} s")
                return
            conn, reply, argv, user = claimed
            # Taken: a drop (a commit meanwhile) no longer ends it; its eval
            # runs to its end as a connection's own would.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if ONE_EVAL:
                channel.close()  # a claim sent after this one is refused, and that eval runs cold
                os.write(notify, TOOK)  # the listener forgets it now: the next eval's keeper is another
            run_dir = standby.ctx.run_dir
            try:
                code = run(conn, argv, user, standby)
            finally:
                used = standby.used
                standby.discard()
                standby = None
            if used:
                say(f"keeper {os.getpid()}: eval of hill '{hill}' for user '{user}' took the standby in {run_dir}")
            else:  # its plan did not fit (another version, a broken seal, --final...): it ran cold, here
                say(f"keeper {os.getpid()}: eval of hill '{hill}' for user '{user}' did not fit the standby in "
                    f"{run_dir}: it ran cold")
            try:
                reply.send(json.dumps({"exit": code}).encode())
            except OSError:
                pass
            reply.close()
            conn.sock.close()
            if ONE_EVAL:
                return
            signal.signal(signal.SIGTERM, _stop)
    except _Stopped:
        pass
    except Exception as exc:  # said in the service's log; the next evals of the hill run cold
        say(f"keeper of hill '{hill}' failed: {type(exc).__name__}: {exc}")
        if standby is None:  # no standby made: none for a while (a hill that cannot have one)
            try:
                os.write(notify, NONE)
            except OSError:
                pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if standby is not None:
            standby.discard()
        shutil.rmtree(placeholder, ignore_errors=True)
        leave_now(0)


def _claim(channel: socket.socket) -> tuple[Connection, socket.socket, list[str], str] | None:
    """The next claim that goes through: a connection's socket, its reply
    channel, the eval's argv and the caller's user; None when idle too long."""
    import select

    from .protocol import Connection

    deadline = time.monotonic() + IDLE_S
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([channel], [], [], min(left, 5.0))[0]:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(channel, 1 << 16, 2)
        except OSError:
            return None
        if not message:
            return None  # the listener is gone
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            continue
        from .protocol import IDLE_DEADLINE_S

        conn_sock, reply = socket.socket(fileno=fds[0]), socket.socket(fileno=fds[1])
        conn_sock.settimeout(IDLE_DEADLINE_S)  # as the connection's own process has it
        try:
            job = json.loads(message)
            reply.settimeout(CLAIM_S)
            reply.send(TOOK)
            if reply.recv(8) != GO:  # the connection gave up meanwhile and ran cold
                raise OSError("no go")
        except (OSError, ValueError):
            conn_sock.close()
            reply.close()
            continue
        reply.settimeout(None)
        return Connection(conn_sock), reply, [str(arg) for arg in job["argv"]], str(job["user"])
    return None


def _undumpable() -> bool:
    """Whether this process's memory and /proc files are now closed to the
    other processes of its user (PR_SET_DUMPABLE 0)."""
    from ..run import runner

    try:
        return runner.prctl(4, 0) == 0
    except (OSError, AttributeError, ImportError, TypeError):
        return False


class _Stopped(Exception):
    pass


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


def claim(channel: socket.socket, conn_sock: socket.socket, argv: list[str], user: str) -> int | None:
    """Run an eval on the keeper at `channel`, from a connection's process:
    its exit code, or None when the keeper did not take it (it had just
    been claimed, or ended) and the eval is to run here, cold."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        try:
            socket.send_fds(channel, [json.dumps({"argv": argv, "user": user}).encode()],
                            [conn_sock.fileno(), theirs.fileno()])
        except OSError:
            return None
        finally:
            theirs.close()
        mine.settimeout(CLAIM_S)
        try:
            if mine.recv(8) != TOOK:
                return None
            mine.send(GO)
        except OSError:
            return None
        # From here the keeper runs the eval: it writes to the caller.
        mine.settimeout(None)
        answer = mine.recv(1 << 12)
        if not answer:
            raise RuntimeError("the keeper that took this eval ended before it said how the eval ended")
        return int(json.loads(answer)["exit"])
    finally:
        mine.close()

