"""The running warm servers of this user (docs/warm.md, "What the user
sees"): what each serves and how long it stays, and stopping the one named
(`hills warm status|stop`, `python -m hills.warm list|stop`). A stop names
its servers: by id or pid, else those of this call's HILLS_HOME; every
server of the user only when asked for all."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from ..base import errors
from . import client

# How long `hills warm stop` waits for a server it asked to end (its spare
# ends its standby first, within 10 s).
STOP_WAIT_S = 20.0


@dataclass(frozen=True)
class Running:
    """A running server, as its info file beside the socket says (the
    server rewrites it as it goes) and the socket's name."""

    id: str  # the socket's name less `.sock`: the key of docs/warm.md, "Which server"
    socket: str
    pid: int
    hills_home: str
    info: dict[str, Any]

    @property
    def spare(self) -> int | None:
        """The pid of the spare that waits with a standby, if one does."""
        pid = self.info.get("spare")
        return pid if isinstance(pid, int) and _alive(pid) else None

    def idle_left(self, now: float) -> float | None:
        """Seconds until it stops for want of a request (while no eval runs)."""
        idle_s, active = self.info.get("idle_s"), self.info.get("active")
        if not isinstance(idle_s, (int, float)) or not isinstance(active, (int, float)):
            return None
        return max(0.0, idle_s - (now - active))

    def as_json(self, now: float) -> dict[str, Any]:
        started = self.info.get("started")
        spare = self.spare
        return {"id": self.id, "pid": self.pid, "hills_home": self.hills_home, "socket": self.socket,
                "hills": self.info.get("hills"), "python": self.info.get("python"),
                "age_s": round(now - started, 1) if isinstance(started, (int, float)) else None,
                "idle_s": self.info.get("idle_s"), "idle_left_s": _rounded(self.idle_left(now)),
                "spare": {"pid": spare, "standby": True} if spare is not None else None}


def servers() -> list[Running]:
    """The running servers of this user: their info files, where the
    process still lives."""
    import json

    folder = client.socket_dir()
    found: list[Running] = []
    if folder is None:
        return found
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".sock.json"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                info = json.load(handle)
            pid = int(info["pid"])
            home = str(info["hills_home"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(pid):
            continue
        found.append(Running(name[:-len(".sock.json")], os.path.join(folder, name[:-len(".json")]), pid, home, info))
    return found


def select(names: list[str], everyone: bool = False, home: str | None = None) -> list[Running]:
    """The servers a stop names: each of `names` (an id, or a prefix of one,
    as `hills warm status` shows it, or a pid), else every one with
    `everyone`, else those serving `home` (this call's HILLS_HOME). A name
    that names no running server, or several, is a usage error."""
    running = servers()
    if everyone:
        if names:
            raise errors.UsageError("--all stops every warm server of this user: it takes no SERVER")
        return running
    if not names:
        from ..base import state

        wanted = os.path.realpath(home if home is not None else state.home())
        return [server for server in running if os.path.realpath(server.hills_home) == wanted]
    chosen: list[Running] = []
    for name in names:
        matches = [server for server in running
                   if (name.isdigit() and server.pid == int(name)) or (len(name) >= 4 and server.id.startswith(name))]
        if not matches:
            raise errors.UsageError(f"no warm server '{name}' is running for this user",
                                    hint="see 'hills warm status' for the servers' ids and pids")
        if len(matches) > 1:
            raise errors.UsageError(f"'{name}' names {len(matches)} warm servers",
                                    hint="give more of the id, as 'hills warm status' shows it")
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return chosen


def ask_to_stop(server: Running) -> None:
    """Ask `server` to stop: a stop file beside its socket, and a connection
    that wakes it (its worker finds no request and leaves)."""
    import _socket

    with open(server.socket + ".stop", "w", encoding="utf-8"):
        pass
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(server.socket)
    except OSError:
        pass
    finally:
        conn.close()


# How often a server that has not ended yet is asked again while a stop waits.
ASK_AGAIN_S = 1.0


def stop(chosen: list[Running], timeout: float = STOP_WAIT_S) -> list[Running]:
    """Ask every server of `chosen` to stop and wait for them all, up to
    `timeout` seconds in all; those still running then. One not ended yet
    is asked again each ASK_AGAIN_S: the connection that was to wake it may
    have gone to its spare, or come while it was busy, and a stop the
    caller was told of must not wait for a second call."""
    for server in chosen:
        ask_to_stop(server)
    deadline = time.monotonic() + timeout
    left = list(chosen)
    while left:
        left = [server for server in left if not ended(server, 0.0)]
        if not left or time.monotonic() >= deadline:
            break
        again = time.monotonic() + ASK_AGAIN_S
        while left and time.monotonic() < min(again, deadline):
            time.sleep(0.05)
            left = [server for server in left if not ended(server, 0.0)]
        for server in left:
            ask_to_stop(server)
    return left


def ended(server: Running, timeout: float) -> bool:
    """Whether `server` ended within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while _alive(server.pid) and os.path.exists(server.socket + ".json"):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's pid now: not ours to judge, and not this user's server either
    return True


def _rounded(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def main(argv: list[str]) -> int:
    """`python -m hills.warm list`, or `stop [--all | SERVER...]`: the
    plain forms, printing on stdout; a stop waits, as `hills warm stop`
    does, until every server it named has ended."""
    if argv == ["list"]:
        for server in servers():
            print(f"{server.pid}\t{server.hills_home}\t{server.socket}")
        return 0
    if argv[:1] == ["stop"]:
        everyone = "--all" in argv[1:]
        try:
            chosen = select([name for name in argv[1:] if name != "--all"], everyone=everyone)
        except errors.UsageError as exc:
            import sys

            print(f"error: {exc.message}", file=sys.stderr)
            return errors.EXIT_USAGE
        late = stop(chosen)
        done = len(chosen) - len(late)
        print(f"stopped {done} warm server{'s' if done != 1 else ''}")
        if late:
            import sys

            print(f"error: {len(late)} warm server(s) asked to stop have not ended within {STOP_WAIT_S:.0f} s: "
                  + ", ".join(f"{server.id[:12]} (pid {server.pid})" for server in late), file=sys.stderr)
            return errors.EXIT_NO
        return 0
    return -1
