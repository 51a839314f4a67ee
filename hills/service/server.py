"""The evaluation service (`hills serve`): its state folder, the config of
users and roles, the socket loop that forks one process per connection,
and what a connection's process does with a request (docs/service.md)."""

from __future__ import annotations

import errno
import io
import json
import os
import pwd
import re
import select
import shutil
import socket
import stat as stat_module
import struct
import sys
import time

from ..base.errors import leave_now
from .. import entry
from . import protocol, requests as service_requests, standby as service_standby
from ..base.errors import EnvironmentProblem, HillsError, Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..run.standby import Standby

DEFAULT_USER = "hills"
DEFAULT_STATE = "/var/lib/hills"
DEFAULT_SOCKET = "/run/hills/hills.sock"
CONFIG_NAME = "service.json"
# The bounds of fair share (docs/service.md, Bounds), each a key of the
# service's config: its default, and the least value it may be set to.
LIMITS: dict[str, tuple[int, int]] = {
    "max_connections": (64, 1),        # connections served at once, all users
    "admin_reserve": (8, 0),           # of those, kept for admins
    "user_connections": (16, 1),       # connections one user may hold
    "user_evaluators": (8, 1),         # evaluators one user may run at once (tune --parallel K counts K)
    "user_upload_bytes": (2 << 30, 0),  # bytes one user's uploads may hold on the service's disk at once
    "min_free_bytes": (512 << 20, 0),  # free space an upload must leave in the state folder
}
CONFIG_KEYS = frozenset({"version", "user", "socket", "admins", "climbers", "ray_address", *LIMITS})
# Switched off only by a test, to show what the bounds hold off: slots
# taken at accept before the role is known, nothing per user.
FAIR = True
# Switched off only by a test, to show what it holds off: the same-user
# warm server and spare a `hills tune`'s trial evals start under the
# service user when the service's environment leaves HILLS_WARM on.
WARM_OFF = True


class Config:
    """The service's users and roles, its bounds and its Ray cluster, from
    STATE/service.json. A key it does not know is refused, by name."""

    def __init__(self, values: dict[str, Any], path: str) -> None:
        self.path = path
        self.user: str = values["user"]
        self.socket: str = values["socket"]
        self.admins: frozenset[str] = frozenset(values["admins"])
        self.climbers: frozenset[str] = frozenset(values["climbers"])
        self.ray_address: str | None = values.get("ray_address")
        self.limits: dict[str, int] = {key: values.get(key, default) for key, (default, _) in LIMITS.items()}

    @classmethod
    def load(cls, state_dir: str) -> "Config":
        path = os.path.join(state_dir, CONFIG_NAME)
        try:
            with open(path, encoding="utf-8") as handle:
                values = json.load(handle)
            check_config(values)
        except FileNotFoundError:
            raise EnvironmentProblem(f"state folder '{state_dir}' has no {CONFIG_NAME}",
                                     hint="set the service up first: hills setup service (as root)") from None
        except (OSError, ValueError) as exc:
            raise EnvironmentProblem(f"service config '{path}' cannot be read: {exc}",
                                     hint="see hills-service(5), CONFIG, for its keys") from None
        return cls(values, path)

    def role(self, user: str) -> str | None:
        if user in self.admins:
            return "admin"
        if user in self.climbers:
            return "climber"
        return None


def check_config(values: object) -> None:
    """Raise ValueError naming the first key of the service's config that is
    unknown, missing or of the wrong kind."""
    if not isinstance(values, dict):
        raise ValueError("expected a JSON object")
    unknown = sorted(set(values) - CONFIG_KEYS)
    if unknown:
        raise ValueError(f"unknown key '{unknown[0]}', expected only {', '.join(sorted(CONFIG_KEYS))}")
    for key in ("admins", "climbers"):
        if not isinstance(values.get(key), list) or not all(isinstance(user, str) for user in values[key]):
            raise ValueError(f"'{key}' must be a list of user names")
    for key in ("user", "socket"):
        if not isinstance(values.get(key), str):
            raise ValueError(f"'{key}' must be a string")
    for key, (_, least) in LIMITS.items():
        value = values.get(key, least)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"'{key}' must be an integer of at least {least}, got {json.dumps(value)[:40]}")
    ray = values.get("ray_address")
    # The head's address, as `--on ray://HOST:PORT` takes it: never `ray`
    # alone, which would join whatever cluster this machine's Ray finds.
    if ray is not None and not (isinstance(ray, str) and re.match(r"^ray://[^\s/:]+(?:[^\s/]*[^\s/:])?:[0-9]+$", ray)):
        raise ValueError(f"'ray_address' must be 'ray://HOST:PORT', got {json.dumps(ray)[:80]}")


class ConfigWatch:
    """The config, read again when its file changed: a re-run of 'hills
    setup service' that adds a user takes effect without a restart, and a
    flood of connections costs a stat each, not a parse."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.seen: tuple[int, int, int] | None = None
        self.config: Config | None = None

    def current(self) -> Config:
        info = os.stat(os.path.join(self.state_dir, CONFIG_NAME))
        seen = (info.st_ino, info.st_size, info.st_mtime_ns)
        if seen != self.seen or self.config is None:
            self.config, self.seen = Config.load(self.state_dir), seen
        return self.config


def check_state_folder(state_dir: str) -> None:
    """Refuse a state folder that is missing, not the service user's, or
    that another user can read or enter: it holds the key and the vault."""
    try:
        info = os.lstat(state_dir)
    except FileNotFoundError:
        raise UsageError(f"state folder '{state_dir}' does not exist",
                         hint="create it with 'hills setup service' (as root), or pass --state DIR") from None
    if not stat_module.S_ISDIR(info.st_mode):
        raise UsageError(f"state folder '{state_dir}' is not a folder (a link or a file)",
                         hint="pass --state DIR, a real folder")
    if info.st_uid != os.geteuid():
        raise EnvironmentProblem(f"state folder '{state_dir}' is owned by uid {info.st_uid}, not by the service user "
                      f"(uid {os.geteuid()})", hint="run hills serve as the user that owns it")
    if info.st_mode & 0o077:
        raise EnvironmentProblem(f"state folder '{state_dir}' is open to other users "
                      f"(mode {stat_module.S_IMODE(info.st_mode):04o}); expected 0700", hint=f"chmod 700 '{state_dir}'")


def serve(state_dir: str, socket_override: str | None = None, ready: Any = None) -> int:
    """Run the service in the foreground until SIGTERM or SIGINT."""
    if os.geteuid() == 0:
        raise EnvironmentProblem("hills serve refuses to run as root: the service must be its own user",
                      hint="run it as the service user, e.g. runuser -u hills -- hills serve")
    state_dir = os.path.abspath(state_dir)
    check_state_folder(state_dir)
    config = Config.load(state_dir)
    path = socket_override or config.socket
    layout = Layout(state_dir)
    layout.prepare()
    # No same-user warm server under the service user, for an eval of its
    # own or a trial `hills tune` starts as a process: the service's warm
    # path is its own (docs/service-warm.md).
    if WARM_OFF:
        os.environ["HILLS_WARM"] = "off"
    listener = _listen(path)
    from ..warm import server as warm

    warm.preload()  # each connection's fork starts with the eval's code loaded
    keepers = service_standby.Keepers(layout.standbys)
    import signal

    def stop(signum: int, frame: object) -> None:
        # Once: a second signal (runuser and systemd pass SIGTERM on to a
        # process that got its own) must not cut the clean-up short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    # A stop (systemctl stop, kill, Ctrl-C) ends the listener: its socket
    # goes; the connections being answered finish on their own.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if ready is not None:
        ready(path)
    watch = ConfigWatch(state_dir)
    children: dict[int, int] = {}  # pid -> the uid it serves
    # pid -> the read end of a pipe its process closes once its caller has
    # the last record: a caller's next request may come before that process
    # has ended, and must not find its own finished requests holding slots.
    ends: dict[int, int] = {}
    heard: set[int] = set()  # connections whose pipe said all it will
    try:
        while True:
            _reap(children, ends, layout)
            heard &= set(ends)  # a pid reaped may come back as another connection's
            keepers.reap()
            waited: list[Any] = [listener, *keepers.fds(), *(fd for pid, fd in ends.items() if pid not in heard)]
            readable = select.select(waited, [], [], 1.0)[0]
            keepers.heard(readable)
            for pid, fd in list(ends.items()):
                if fd in readable and pid not in heard:
                    _told(pid, fd, heard, keepers, layout, listener, ends)
            if listener not in readable:
                continue
            try:
                listener.settimeout(1.0)
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            try:
                caller = admit(conn, watch, children, answered(ends))
            except HillsError as refusal:
                refuse_now(conn, refusal)
                continue
            read_end, write_end = os.pipe()
            standbys = keepers.ready()
            pid = os.fork()
            if pid == 0:
                listener.close()
                for fd in (read_end, *ends.values()):
                    os.close(fd)
                keepers.close_in_child()
                code = 0
                try:
                    code = Handler(conn, layout, caller, write_end, standbys).handle()
                finally:
                    leave_now(code)
            os.close(write_end)
            children[pid], ends[pid] = caller.uid, read_end
            conn.close()
    except KeyboardInterrupt:
        return 0
    finally:
        keepers.drop_all("the service stops")
        listener.close()
        try:
            if stat_module.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def _told(pid: int, fd: int, heard: set[int], keepers: service_standby.Keepers, layout: "Layout",
          listener: socket.socket, ends: dict[int, int]) -> None:
    """Act on what the connection `pid` said on its pipe as it was answered:
    `eval HILL` (a keeper for that hill's next eval, if none waits), `drop`
    (a version was committed or pinned: every standby goes)."""
    try:
        said = os.read(fd, 4096)
    except OSError:
        said = b""
    if not said:
        heard.add(pid)
        return
    for line in said.decode("utf-8", "replace").splitlines():
        word, _, hill = line.partition(" ")
        if word == "drop":
            keepers.drop_all("a version was committed or pinned")
        elif word == "eval" and hill:
            keepers.want(hill, lambda name, channel, notify: _keeper(layout, name, channel, notify),
                         lambda: _close_listeners(listener, ends))


def _close_listeners(listener: socket.socket, ends: dict[int, int]) -> None:
    """In a keeper's fork: what is the listener's alone."""
    listener.close()
    for fd in ends.values():
        os.close(fd)


def _keeper(layout: "Layout", hill_name: str, channel: socket.socket, notify: int) -> None:
    """A keeper's fork (hills.service.standby): as a connection's process
    runs a command, in the service's copy of the hills."""
    from ..disk import hill

    hill.ONLY_HILLS_DIR = layout.hills_dir
    os.chdir(layout.project)

    def run(conn: protocol.Connection, argv: list[str], user: str, standby: Standby) -> int:
        return run_command(conn, layout, user, ["eval", *argv], standby)

    service_standby.keep(hill_name, layout.standbys, channel, notify, run)


class Caller:
    """Who a connection is, decided from the kernel's word before it holds
    a slot: its uid and user name, its role, and the config it is served by."""

    def __init__(self, uid: int, user: str, role: str | None, config: Config) -> None:
        self.uid, self.user, self.role, self.config = uid, user, role, config


def admit(conn: socket.socket, watch: ConfigWatch, children: dict[int, int],
          answered: frozenset[int] = frozenset()) -> Caller:
    """The caller of a new connection, or the refusal it gets at once:
    no role, too many connections of its own, or no slot left for its
    role (admins alone may take the last `admin_reserve`). A connection
    in `answered` (its caller has the last record) holds no slot."""
    uid, user = peer_user(conn)
    children = {pid: served for pid, served in children.items() if pid not in answered}
    try:
        config = watch.current()
    except OSError as exc:
        raise EnvironmentProblem(f"the hills service cannot read its config: {exc}",
                                 hint="ask its admin to run 'hills setup service' again") from None
    role = config.role(user)
    limits = config.limits
    if not FAIR:
        if len(children) >= limits["max_connections"]:
            raise _busy(f"{len(children)} requests are being served")
        return Caller(uid, user, role, config)
    if role is None:
        raise Refused(f"user '{user}' (uid {uid}) is neither an admin nor a climber of this hills service",
                      hint="ask the service's admin to add you: hills setup service --climber USER")
    mine = sum(1 for served in children.values() if served == uid)
    if mine >= limits["user_connections"]:
        raise _busy(f"user '{user}' has {mine} requests being served, the most one user may have",
                    hint="wait for one of them to end (user_connections in the service's config)")
    room = limits["max_connections"] - (0 if role == "admin" else limits["admin_reserve"])
    if len(children) >= room:
        kept = "" if role == "admin" else f", and {limits['admin_reserve']} are kept for admins"
        raise _busy(f"{len(children)} requests are being served{kept}")
    return Caller(uid, user, role, config)


def _busy(message: str, hint: str = "try again in a moment") -> EnvironmentProblem:
    return EnvironmentProblem(f"the hills service is busy: {message}", hint=hint)


def refuse_now(conn: socket.socket, refusal: HillsError) -> None:
    """Answer a connection with its refusal and close it, without waiting
    on it: the listener serves everyone, so nothing here may block. The
    record is small enough for the socket's buffer; what the caller sent
    already is read first, so that the close does not reset it."""
    body = json.dumps({"type": "error", "message": refusal.message, "hint": refusal.hint,
                       "exit": refusal.exit_code}, separators=(",", ":")).encode()
    try:
        conn.setblocking(False)
        for _ in range(16):
            if not conn.recv(65536):
                break
    except OSError:
        pass
    try:
        conn.send(struct.pack(">cI", protocol.RECORD, len(body)) + body)
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        conn.close()


def answered(ends: dict[int, int]) -> frozenset[int]:
    """The connections whose caller has its last record: their process
    closed its end of the pipe, and is only cleaning up."""
    import select

    if not ends:
        return frozenset()
    readable, _, _ = select.select(list(ends.values()), [], [], 0)
    return frozenset(pid for pid, fd in ends.items() if fd in readable)


def _reap(children: dict[int, int], ends: dict[int, int], layout: "Layout") -> None:
    """Forget the connections whose process ended, their share of the
    uploads in flight and what they left in the requests folder."""
    from ..warm.server import ended

    for pid in ended(children):
        uid = children.pop(pid)
        if pid in ends:
            os.close(ends.pop(pid))
        try:
            os.unlink(os.path.join(layout.slots, str(uid), f"upload-{pid}"))
        except OSError:
            pass
        # A process killed mid-request leaves its folder: it goes with it.
        try:
            left = [name for name in os.listdir(layout.requests) if name.startswith(f"{pid}-")]
        except OSError:
            left = []
        for name in left:
            shutil.rmtree(os.path.join(layout.requests, name), ignore_errors=True)


def _listen(path: str) -> socket.socket:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"socket folder '{folder}' does not exist", hint="create it with 'hills setup service'")
    try:
        if stat_module.S_ISSOCK(os.lstat(path).st_mode):
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(path)
                raise EnvironmentProblem(f"another service is listening on '{path}'")
            except OSError:
                os.unlink(path)  # a socket left by a service that stopped
            finally:
                probe.close()
        else:
            raise UsageError(f"'{path}' exists and is not a socket", hint="pass --socket PATH, a free name")
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    # Anyone may connect; what each caller may do is decided by its uid.
    os.chmod(path, 0o666)
    listener.listen(128)
    return listener


class Layout:
    """The folders of the state folder (docs/service.md, State)."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.home = os.path.join(state_dir, "home")
        self.project = os.path.join(state_dir, "project")
        self.hills_dir = os.path.join(self.project, ".hills")
        self.requests = os.path.join(state_dir, "requests")
        self.vault = os.path.join(self.home, "vault")
        self.slots = os.path.join(state_dir, "slots")
        self.standbys = os.path.join(state_dir, "standby")

    def prepare(self) -> None:
        os.environ["HILLS_HOME"] = self.home
        shutil.rmtree(self.slots, ignore_errors=True)  # the shares of a service that stopped
        shutil.rmtree(self.standbys, ignore_errors=True)  # and its keepers' placeholders
        for folder in (self.home, self.project, self.hills_dir, self.requests, self.vault, self.slots,
                       self.standbys):
            os.makedirs(folder, mode=0o700, exist_ok=True)
        from ..base import state

        state.ensure_home()
        for left in os.listdir(self.requests):  # left by connections that died
            shutil.rmtree(os.path.join(self.requests, left), ignore_errors=True)


def peer_user(conn: socket.socket) -> tuple[int, str]:
    """(uid, user name) of the process at the other end, from the kernel."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    try:
        return uid, pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid, str(uid)


class _FrameWriter(io.RawIOBase):
    """A stream whose writes go to the client as frames of one kind; once
    the client is gone they are dropped, and the command goes on."""

    def __init__(self, conn: protocol.Connection, kind: bytes) -> None:
        self.conn, self.kind = conn, kind

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        payload = bytes(data)
        if not self.conn.peer_gone and payload:
            try:
                self.conn.send(self.kind, payload)
            except protocol.Closed:
                pass
        return len(payload)


class ServiceUpload(protocol.Upload):
    """One request's upload on the service's disk: the caller's share of
    the bytes all its uploads hold at once (a ledger file per connection,
    under a lock per uid), and the free-space floor of the state folder,
    checked before each file and as its bytes arrive."""

    GRANT = 64 << 20  # reserved from the caller's share at a time: small files cost no lock each

    def __init__(self, layout: Layout, caller: Caller, *, first_wait_s: float | None = None) -> None:
        super().__init__(first_wait_s=first_wait_s)
        self.layout, self.caller = layout, caller
        self.share = caller.config.limits["user_upload_bytes"]
        self.floor = caller.config.limits["min_free_bytes"]
        self.folder = os.path.join(layout.slots, str(caller.uid))
        self.ledger = os.path.join(self.folder, f"upload-{os.getpid()}")
        self.granted = 0

    def admit(self, size: int) -> None:
        super().admit(size)
        self._check_floor(size)
        if self.bytes > self.granted:
            self._grant(self.bytes)

    def landed(self, count: int) -> None:
        self._check_floor(0)

    def _check_floor(self, coming: int) -> None:
        info = os.statvfs(self.layout.state_dir)
        free = info.f_bavail * info.f_frsize
        if free - coming < self.floor and not self.floor:
            raise EnvironmentProblem(f"the hills service cannot take this upload: the disk of its state folder is "
                                     f"full ({_size(max(free, 0))} free)",
                                     hint="try again later; tell the service's admin (its min_free_bytes keeps "
                                          "room for evals)")
        if free - coming < self.floor:
            raise EnvironmentProblem(
                f"the hills service refuses this upload: it would leave its state folder less than "
                f"{_size(self.floor)} free ({_size(max(free, 0))} free now)",
                hint="send a smaller submission (leave data the evaluator does not need out of it), or ask the "
                     "admin to make room (min_free_bytes in the service's config)")

    def _grant(self, needed: int) -> None:
        from ..base import state

        wanted = min(max(needed, self.granted + self.GRANT), max(needed, self.share))
        os.makedirs(self.folder, 0o700, exist_ok=True)
        with state.file_lock(os.path.join(self.folder, "lock")):
            others = 0
            for name in os.listdir(self.folder):
                if name.startswith("upload-") and name != os.path.basename(self.ledger):
                    try:
                        with open(os.path.join(self.folder, name), encoding="ascii") as handle:
                            others += int(handle.read() or 0)
                    except (OSError, ValueError):
                        pass
            if others + needed > self.share:
                raise EnvironmentProblem(
                    f"the hills service refuses this upload: user '{self.caller.user}' would hold more than "
                    f"{_size(self.share)} of uploads at once ({_size(others)} in other requests, "
                    f"{_size(needed)} in this one)",
                    hint="wait for your other requests to end, or send a smaller submission "
                         "(user_upload_bytes in the service's config)")
            wanted = min(wanted, self.share - others)
            # Read only under the lock, and gone with its process: no need of a durable write.
            fd = os.open(self.ledger, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(str(wanted))
            self.granted = wanted


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


# An admin's commit runs the gate (the hill's tests) on the client's side
# before its bundle comes: that first wait is longer.
COMMIT_WAIT_S = 900.0


class Handler:
    """One connection, in its own process: what the caller asks, and the answer."""

    def __init__(self, sock: socket.socket, layout: Layout, caller: Caller, answered_fd: int | None = None,
                 standbys: dict[str, socket.socket] | None = None) -> None:
        self.sock, self.layout, self.caller = sock, layout, caller
        self.answered_fd = answered_fd  # closed just before the last record: the listener frees the slot
        # The channel of each keeper that waited with its standby when this
        # connection came (hills.service.standby), by hill name.
        self.standbys = standbys or {}
        self.tell = b""  # said to the listener as the caller is answered: `eval HILL`, `drop`
        self.conn = protocol.Connection(sock)
        self.folder: str | None = None
        self.held: list[int] = []  # the evaluator slots this request holds (open, locked files)

    def handle(self) -> int:
        import signal

        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            return self._answer()
        except HillsError as exc:
            self._clean()  # before the answer: a refused upload leaves nothing once the caller hears of it
            self._error(exc.message, exc.hint, exc.exit_code)
            return exc.exit_code
        except Exception as exc:  # a bug: said to the client and in the service's log; the service goes on
            import traceback

            traceback.print_exc(file=sys.__stderr__)
            self._clean()
            self._error(f"internal error in the hills service: {type(exc).__name__}: {exc}", None, 3)
            return 3
        finally:
            self._clean()
            _close(self.sock)

    def _clean(self) -> None:
        """Remove what this request holds on disk: its folder, its share of the uploads."""
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        try:
            os.unlink(os.path.join(self.layout.slots, str(self.caller.uid), f"upload-{os.getpid()}"))
        except OSError:
            pass

    def _answered(self) -> None:
        if self.answered_fd is not None:
            if self.tell:
                try:
                    os.write(self.answered_fd, self.tell)
                except OSError:
                    pass
            os.close(self.answered_fd)
            self.answered_fd = None

    def _error(self, message: str, hint: str | None, code: int) -> None:
        self._answered()
        if self.conn.peer_gone:
            return
        try:
            self.sock.settimeout(5.0)
            self.conn.record({"type": "error", "message": message, "hint": hint, "exit": code})
        except HillsError:
            pass

    def _answer(self) -> int:
        caller = self.caller
        request = self.conn.receive_record(time.monotonic() + protocol.FIRST_DEADLINE_S)
        check_version(request)
        if caller.role is None:  # decided before the slot, except where a test switched FAIR off
            raise Refused(f"user '{caller.user}' (uid {caller.uid}) is neither an admin nor a climber of this "
                          "hills service",
                          hint="ask the service's admin to add you: hills setup service --climber USER")
        typed = service_requests.check(request, caller.role, caller.user)
        evaluators = typed.evaluators()
        if evaluators > caller.config.limits["user_evaluators"]:
            raise UsageError(f"'--parallel {evaluators}' is more evaluators than one user may run at once through "
                             f"this hills service ({caller.config.limits['user_evaluators']})",
                             hint=f"pass --parallel {caller.config.limits['user_evaluators']} or fewer")
        if typed.values.get("on") is not None:
            service_requests.ray_address(typed.values["on"], caller.config.ray_address)  # refused before the upload
        self.conn.record({"type": "accepted", "version": protocol.VERSION, "role": caller.role,
                          "user": caller.user})
        self.folder = os.path.join(self.layout.requests, f"{os.getpid()}-{os.urandom(4).hex()}")
        os.mkdir(self.folder, 0o700)
        upload = ServiceUpload(self.layout, caller, first_wait_s=COMMIT_WAIT_S if typed.verb.name == "commit"
                               else None)
        paths = {}
        for index, kind in enumerate(typed.streams):
            target = os.path.join(self.folder, str(index))
            try:
                protocol.receive_into(self.conn, target, upload)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                raise EnvironmentProblem("the hills service cannot take this upload: the disk of its state folder "
                                         "is full", hint="try again later; tell the service's admin (its "
                                                         "min_free_bytes keeps room for evals)") from None
            paths[f"@{index}"] = target if kind == "dir" else _only_file(target)
        done = self.conn.receive_record(upload.deadline())
        if done.get("type") != "run":
            raise protocol.ProtocolError(f"expected the run record, got '{done['type']}'")
        outputs = _output_paths(typed, self.folder, paths)
        paths.update(outputs)
        # From here on the command runs to its end whatever the client does:
        # a write to a client that is gone, or that stops reading, is dropped.
        self.sock.settimeout(protocol.IDLE_DEADLINE_S)
        if evaluators and not self._take_evaluators(evaluators):
            return 0  # the client went away while it waited: nothing ran
        # The client says its own names for the folders it sent, not the service's.
        self.conn.record({"type": "paths", "paths": {path: name for name, path in paths.items()}})
        if typed.verb.name == "commit":
            return self._run(typed, [paths["@0"]], outputs)
        return self._run(typed, service_requests.argv_for(typed, paths, caller.config.ray_address), outputs)

    def _take_evaluators(self, count: int) -> bool:
        """Hold `count` of the caller's evaluator slots (locked files, freed
        when this process ends however it ends), waiting while its other
        requests hold them; False when the client went away meanwhile."""
        import fcntl
        import select

        folder = os.path.join(self.layout.slots, str(self.caller.uid))
        os.makedirs(folder, 0o700, exist_ok=True)
        slots = self.caller.config.limits["user_evaluators"]
        said = False
        while True:
            for index in range(slots):
                fd = os.open(os.path.join(folder, f"evaluator-{index}"), os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self.held.append(fd)
                if len(self.held) == count:
                    return True
            for fd in self.held:  # all or none: two waiting tunes must not hold half each
                os.close(fd)
            self.held = []
            if not said:
                said = True
                _FrameWriter(self.conn, protocol.STDERR).write(
                    f"hills service: waiting for an evaluator: your requests run {slots} at once\n".encode())
            # After its run record the client sends nothing: a readable socket is one it closed.
            if select.select([self.sock], [], [], 0.25)[0]:
                return False

    def _run(self, typed: service_requests.Typed, argv: list[str], outputs: dict[str, str]) -> int:
        name = typed.verb.name
        if name in ("commit", "pin"):
            self.tell = b"drop\n"  # whatever it changed, no standby made before it is used
        code = None
        hill_name = typed.values.get("hill")
        if name == "eval" and isinstance(hill_name, str):
            channel = self.standbys.get(hill_name)
            if channel is not None and _plain_eval(typed):
                code = service_standby.claim(channel, self.sock, argv, self.caller.user)
        if code is None:
            code = run_command(self.conn, self.layout, self.caller.user, [name, *argv])
        if name == "eval" and isinstance(hill_name, str) and code in (0, 1):
            # Scored (passing or not): a hill the service has, whose next eval a keeper serves.
            self.tell = f"eval {hill_name}\n".encode()
        if not self.conn.peer_gone:
            try:
                self._send_outputs(outputs)
                self._answered()
                self.conn.record({"type": "exit", "exit": code})
            except protocol.Closed:
                pass
        return code

    def _send_outputs(self, outputs: dict[str, str]) -> None:
        """The bytes of each file the command made for the client to write."""
        for name, path in outputs.items():
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue  # not made (the command failed before, or made none)
            with os.fdopen(fd, "rb") as handle:
                if not stat_module.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    continue
                content = handle.read(protocol.UPLOAD_CAP + 1)
            if len(content) > protocol.UPLOAD_CAP:
                continue
            self.conn.record({"type": "file", "key": name.removeprefix("@"), "size": len(content)})
            self.conn.data(content)


# The eval fields a keeper's standby is made without: an eval that sets one
# would not fit it (docs/service-warm.md), and leaves it to the next.
_NOT_PLAIN = ("param", "final", "force", "current", "verbose", "repeat", "against", "knob", "on", "workers")


def _plain_eval(typed: service_requests.Typed) -> bool:
    """Whether an eval request is the plain one a keeper's standby is made for."""
    return len(typed.values.get("submissions") or ()) == 1 and not any(
        typed.values.get(key) not in (None, False, (), []) for key in _NOT_PLAIN)


def run_command(conn: protocol.Connection, layout: Layout, user: str, argv: list[str],
                standby: Standby | None = None) -> int:
    """Run `hills ARGV` (or an admin's commit, `commit BUNDLE`) in this
    process for `user`, its output going to the client as frames;
    `standby`: the keeper's, for an eval (hills.service.standby)."""
    from ..disk import hill
    from ..evidence import caller

    caller.serve_for(user)
    hill.ONLY_HILLS_DIR = layout.hills_dir
    os.chdir(layout.project)
    out = io.TextIOWrapper(io.BufferedWriter(_FrameWriter(conn, protocol.STDOUT)), encoding="utf-8",
                           errors="surrogateescape", line_buffering=True)
    err = io.TextIOWrapper(io.BufferedWriter(_FrameWriter(conn, protocol.STDERR)), encoding="utf-8",
                           errors="surrogateescape", line_buffering=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        if argv[0] == "commit":
            code = _import_version(layout, argv[1])
        else:
            code = entry.run_here("hills", argv, standby=standby)
    finally:
        for stream in (out, err):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = saved
    return code


def _output_paths(typed: service_requests.Typed, folder: str, streams: dict[str, str]) -> dict[str, str]:
    """Where the command writes each file the client asked for ('@KEY' to
    a path in the request's folder): the client writes them, not the service."""
    made = os.path.join(folder, "out")
    os.mkdir(made, 0o700)
    outputs = {f"@{field.key}": os.path.join(made, field.key) for field in typed.verb.fields
               if field.kind == "output" and typed.values.get(field.key)}
    if "best-params" in typed.verb.implicit:
        # `hills tune` writes its best knobs beside the submission folder.
        outputs["@best-params"] = streams["@0"].rstrip(os.sep) + ".best-params.json"
    return outputs


def _close(sock: socket.socket) -> None:
    """Close a connection so that the client reads the last record: the
    bytes it sent that were not read (a refused request's) are drained
    first, for at most a second, as a close with unread bytes resets the
    connection."""
    try:
        sock.shutdown(socket.SHUT_WR)
        until = time.monotonic() + 1.0
        drained = 0
        while drained < protocol.DATA_CAP and (left := until - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:
        pass
    finally:
        sock.close()


def _only_file(folder: str) -> str:
    names = os.listdir(folder)
    if len(names) != 1 or not os.path.isfile(os.path.join(folder, names[0])):
        raise protocol.ProtocolError("a file stream must hold exactly one file")
    return os.path.join(folder, names[0])


def check_version(request: dict[str, Any]) -> None:
    """Refuse a record that is not a request of this protocol's version,
    saying which side is older."""
    if request.get("type") != "request":
        raise protocol.ProtocolError(f"expected a request record, got '{request.get('type')}'")
    version = request.get("version")
    if version != protocol.VERSION:
        older = "the client" if isinstance(version, int) and version < protocol.VERSION else "the service"
        raise protocol.ProtocolError(
            f"protocol version {version!r} is not spoken here; this service speaks version {protocol.VERSION} "
            f"(typed requests, hills-service(5)), and {older} is older",
            hint="install the same hills for the client and the service")


def _import_version(layout: Layout, bundle_path: str) -> int:
    """Take a committed version an admin sent (a hills bundle) into the
    service: its git objects into the service's copy of the hill, its
    private and blob data into the vault, checked against the tree hash
    and the locks before anything changes."""
    from ..base import state
    from ..disk import bundle
    from ..cli.output import emit, say
    from ..base.names import validate_name

    manifest = bundle.read_manifest(bundle_path)
    name = manifest["hill"]
    validate_name(name)
    target = os.path.join(layout.hills_dir, name)
    with state.file_lock(os.path.join(layout.home, "locks", f"import-{name}.lock")):
        staging = os.path.join(os.path.dirname(bundle_path), "staging")
        os.mkdir(staging, 0o700)
        result = bundle.unbundle(bundle_path, staging, register=False)
        staged = result["path"]
        data = _vault_import(layout, staged)
        if os.path.isdir(target):
            _update_copy(target, staged, result["commit"], data)
        else:
            os.rename(staged, target)
        bundle.register_unbundled(name, target, result["tree_hash"])
    say(f"hills service: hill '{name}' at tree {result['tree_hash'][:12]} is served "
        f"({len(data)} private and blob files in the vault)")
    emit(result["tree_hash"])
    return 0


def _vault_import(layout: Layout, hill_dir: str) -> list[str]:
    """Keep every private file and blob of a staged hill once in the vault,
    by digest, the hill's copy a hard link to it."""
    from ..disk import locks

    data = []
    for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
        path = os.path.join(hill_dir, lock_name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            entries = locks.decode(handle.read(), lock_name)
        for rel, locked in entries.items():
            stored = os.path.join(layout.vault, locked["digest"].removeprefix("blake3:"))
            local = os.path.join(hill_dir, rel)
            if not os.path.exists(stored):
                os.chmod(local, 0o400)
                os.link(local, stored)
            else:
                os.unlink(local)
                os.link(stored, local)
            data.append(rel)
    return data


def _join_history(repo: Any) -> None:
    """A bundle holds its commit without its parents (marked shallow); in
    the service's copy, which has the parents, the mark would cut the
    hill's history at the new version: drop it there."""
    shallow = os.path.join(repo.git_dir, "shallow")
    try:
        with open(shallow, encoding="utf-8") as handle:
            marked = [line.strip() for line in handle if line.strip()]
    except FileNotFoundError:
        return
    kept = []
    for commit in marked:
        body = repo.run("cat-file", "commit", commit)
        parents = [line.split(" ", 1)[1] for line in body.split("\n\n", 1)[0].splitlines()
                   if line.startswith("parent ")]
        if not parents or any(found is None for found in repo.batch_check(parents)):
            kept.append(commit)
    from ..base import state

    if kept:
        state.atomic_write(shallow, "".join(f"{commit}\n" for commit in kept))
    else:
        os.unlink(shallow)


def _update_copy(target: str, staged: str, commit: str, data: list[str]) -> None:
    """Move the service's copy of a hill to a new version: its objects
    fetched from the staged copy (the old history and notes stay), its
    files and data replaced."""
    from ..base import git
    from ..disk import hill as hill_module, locks

    repo = git.Repo(target)
    repo.run("fetch", "-q", "--no-tags", "--update-shallow", os.path.join(staged, ".vc"),
             "+refs/heads/main:refs/hills/incoming")
    repo.run("update-ref", "refs/heads/main", commit)
    repo.run("update-ref", "-d", "refs/hills/incoming")
    _join_history(repo)
    repo.run("read-tree", "--reset", "-u", commit)
    private = os.path.join(target, locks.PRIVATE_DIR)
    shutil.rmtree(private, ignore_errors=True)
    if os.path.isdir(os.path.join(staged, locks.PRIVATE_DIR)):
        os.rename(os.path.join(staged, locks.PRIVATE_DIR), private)
    blobs = [rel for rel in data if not rel.startswith(locks.PRIVATE_DIR + "/")]
    for rel in blobs:
        os.makedirs(os.path.dirname(os.path.join(target, rel)), exist_ok=True)
        os.replace(os.path.join(staged, rel), os.path.join(target, rel))
    hill_module.write_excludes(target, blobs)
    # The files' stat data into the index, as after a commit: an eval then
    # knows the copy clean without git (gitobjects.clean_by_stat).
    repo.run("update-index", "-q", "--refresh", ok_codes=(0, 1))

