"""The warm eval server (docs/warm.md): one interpreter per user and
machine state with the eval pipeline loaded, forking a worker for each
`hills eval`, so an eval does not pay for loading its code every time.

The client half (`call`, `start`) runs at the start of every `hills eval`,
before any pipeline module loads: it imports nothing the interpreter does
not already hold but `_socket`. The server half (`serve`, `python -m
hills.warm serve`) and the worker it forks run hills' own code, unchanged,
through `entry.run_here`.

Wire format, one request per connection: a 4-byte big-endian length and a
payload of NUL-separated fields (the fields never hold a NUL), the caller's
standard streams passed alongside as SCM_RIGHTS. Replies are lines: `P PID`
(the worker runs), `X CODE` (its exit code), `D REASON` (declined: the
caller runs the eval itself), `R` (a spare made for another request: send
it again, docs/standby.md)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, NoReturn

PROTOCOL = "hills-warm 1"
IDLE_S = 600
_LOCK = -1  # the server's lock on its socket path, which no worker keeps
MAX_REQUEST = 1 << 20
REPORTED = 60 * 1024  # the largest request a worker sends back for a spare: less than a pipe holds
# What a worker must share with its caller, or decline.
NAMESPACES = ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup")
LIMITS = ("RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_MEMLOCK",
          "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_RSS", "RLIMIT_STACK")
# The caller's security context as the kernel shows it (docs/warm.md, "When
# a worker declines"): the lines of /proc/PID/status that say what a process
# may do, its LSM labels, and its namespaces and cgroup, read by the worker
# itself; every one must be the worker's own.
STATUS_FIELDS = ("Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh", "CapPrm", "CapEff",
                 "CapBnd", "CapAmb")
LSM_LABELS = ("attr/current", "attr/apparmor/current", "attr/selinux/current", "attr/smack/current")
# Errors that say the kernel has no such field for any process (an LSM not
# built in, or none that answers for attr/current): the same error on both
# sides is the same context. Any other (a read the kernel refused) differs.
_ABSENT = ("ENOENT", "EINVAL", "EOPNOTSUPP")
# The names /proc/PID/limits gives the limits a request tells (LIMITS).
_LIMIT_NAMES = {"Max cpu time": "RLIMIT_CPU", "Max file size": "RLIMIT_FSIZE", "Max data size": "RLIMIT_DATA",
                "Max stack size": "RLIMIT_STACK", "Max core file size": "RLIMIT_CORE",
                "Max resident set": "RLIMIT_RSS", "Max processes": "RLIMIT_NPROC", "Max open files": "RLIMIT_NOFILE",
                "Max locked memory": "RLIMIT_MEMLOCK", "Max address space": "RLIMIT_AS"}
_SO_PEERPIDFD = 77  # Linux 6.5: a pidfd of the peer, which Python 3.11's socket module does not name
_PR_SET_DUMPABLE = 4
_OWN_CONTEXT: dict[str, str] | None = None  # the server's, read once before it forks
# Variables that decide how the interpreter behaves before a request is
# read, and so name another server.
KEYED_PREFIXES = ("PYTHON", "LC_")
KEYED_NAMES = ("LANG", "HILLS_HOME", "HOME", "HILLS_WARM_STANDBY")


# -- the client ---------------------------------------------------------------

def enabled() -> bool:
    """Whether this call may use a warm server (`HILLS_WARM=off` says no)."""
    return os.environ.get("HILLS_WARM", "").lower() not in ("off", "0", "no", "false")


def socket_dir(create: bool = False) -> str | None:
    """The folder of this user's warm sockets, checked to be a real folder
    of this user's that others cannot enter; None when it is not."""
    uid = os.getuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = f"/tmp/hills-warm-{uid}"
    # A socket's path holds at most 107 bytes; the name in it takes 26.
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime) and len(runtime) < 70:
        folder = os.path.join(runtime, "hills-warm")
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        if not create:
            return None
        try:
            os.mkdir(folder, 0o700)
            st = os.lstat(folder)
        except OSError:
            return None
    except OSError:
        return None
    # S_ISDIR without the stat module: 0o040000 is a folder.
    if (st.st_mode & 0o170000) != 0o040000 or st.st_uid != uid or st.st_mode & 0o077:
        return None
    return folder


def key() -> str:
    """The digest naming the server this call would use: the package's
    sources, the interpreter, HILLS_HOME and the variables that change the
    interpreter (docs/warm.md, "Which server")."""
    if TYPE_CHECKING:
        from hashlib import sha256
    else:
        try:  # the one builtin hash module needed, not hills.digests' four
            from _sha2 import sha256  # Python 3.12 and later
        except ImportError:
            try:
                from _sha256 import sha256
            except ImportError:
                from hashlib import sha256

    package = os.path.dirname(os.path.abspath(__file__))
    parts = [sys.version, sys.executable, str(sys.flags), package]
    try:
        exe = os.stat(sys.executable)
        parts.append(f"{exe.st_size}:{exe.st_mtime_ns}:{exe.st_ino}")
    except OSError:
        pass
    for folder in (package, os.path.join(package, "commands")):
        with os.scandir(folder) as entries:
            files = []
            for entry in entries:
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    files.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
        parts.extend(sorted(files))
    home = os.environ.get("HILLS_HOME")
    parts.append("HILLS_HOME=" + (os.path.abspath(os.path.expanduser(home)) if home else ""))
    for name in sorted(os.environ):
        if name.startswith(KEYED_PREFIXES) or name in KEYED_NAMES:
            parts.append(f"{name}={os.environ[name]}")
    return sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:20]


class Call:
    """What the client did: `code` is the worker's exit code, or None when
    the caller runs the eval itself; `start` says a server should be
    started for the next one (there was none), at `path`."""

    def __init__(self, code: int | None, start: bool = False, path: str | None = None, retry: bool = False):
        self.code, self.start, self.path, self.retry = code, start, path, retry


def call(program: str, args: list[str]) -> Call:
    """Send `program args` to this user's warm server; Call(None) when
    there is none or it declined, so the caller runs the eval cold. A
    spare made for another call answers "retry" (docs/standby.md): the
    request is sent once more, to the server."""
    import _socket

    folder = socket_dir()
    if folder is None:
        return Call(None, start=True)
    path = os.path.join(folder, key() + ".sock")
    payload = b""
    for _ in range(2):
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            try:
                conn.connect(path)
            except OSError:
                return Call(None, start=True, path=path)
            try:
                # A current folder that is gone, say: the cold eval explains it.
                payload = payload or _request(program, args)
                fds = [fd for fd in (0, 1, 2) if _is_open(fd)]
                _send(conn, payload, fds)
                answer = _await(conn)
            except OSError:
                return Call(None)
        finally:
            conn.close()
        if not answer.retry:
            return answer
    return Call(None)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _request(program: str, args: list[str]) -> bytes:
    fields = [PROTOCOL, program, os.getcwd(), str(_umask()), ",".join(str(fd) for fd in (0, 1, 2) if _is_open(fd))]
    fields += [str(len(args)), *args]
    env = [f"{name}={value}" for name, value in os.environ.items()]
    fields += [str(len(env)), *env]
    fields += [_limits(), ",".join(str(group) for group in sorted(os.getgroups())), str(os.getpriority(0, 0)),
               _cgroup(), _namespaces()]
    return "\0".join(fields).encode("utf-8", "surrogateescape")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _limits() -> str:
    import resource

    values = []
    for name in LIMITS:
        number = getattr(resource, name, None)
        if number is not None:
            soft, hard = resource.getrlimit(number)
            values.append(f"{name}:{soft}:{hard}")
    return ",".join(values)


def _cgroup() -> str:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            return handle.read().replace("\0", "")
    except OSError:
        return ""


def _namespaces() -> str:
    links = []
    for name in NAMESPACES:
        try:
            links.append(f"{name}={os.readlink(f'/proc/self/ns/{name}')}")
        except OSError:
            links.append(f"{name}=")
    return ",".join(links)


def _send(conn: Any, payload: bytes, fds: list[int]) -> None:
    import _socket

    data = len(payload).to_bytes(4, "big") + payload
    ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                  b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds))] if fds else []
    sent = conn.sendmsg([data], ancillary)
    while sent < len(data):
        sent += conn.send(data[sent:])


def _await(conn: Any) -> Call:
    """Read the worker's lines: the eval's exit code, or a decline."""
    if TYPE_CHECKING:
        import signal as _signal
    else:
        import _signal  # signal less its enums, which would load enum

    buffered = b""
    worker = 0
    previous: dict[int, Any] = {}

    def forward(signum: int, frame: Any) -> None:
        if worker:
            try:
                os.kill(worker, signum)
            except OSError:
                pass

    try:
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                break
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                kind, _, value = line.decode("ascii", "replace").partition(" ")
                if kind == "D":
                    return Call(None)
                if kind == "R":
                    return Call(None, retry=True)
                if kind == "P" and value.isdigit():
                    worker = int(value)
                    for number in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT):
                        # One this process ignores (nohup) is not passed on either.
                        if _signal.getsignal(number) != _signal.SIG_IGN:
                            previous[number] = _signal.signal(number, forward)
                if kind == "X" and value.lstrip("-").isdigit():
                    return Call(int(value))
    finally:
        for saved, handler in previous.items():
            _signal.signal(saved, handler)
    if not worker:
        return Call(None)  # the server went away before it took the call
    os.write(2, f"error: the warm hills worker (pid {worker}) ended without an exit code\n"
                f"hint: see {os.path.join(socket_dir() or '', 'warm.log')}; HILLS_WARM=off runs evals "
                f"without a warm server\n".encode())
    return Call(3)


def start(path: str | None) -> None:
    """Start a server at `path` (or this call's own) for the next eval, in
    the background, holding none of this process's streams; the modules
    this process has loaded are the ones it preloads."""
    if path is None:
        folder = socket_dir(create=True)
        if folder is None:
            return
        path = os.path.join(folder, key() + ".sock")
    elif socket_dir(create=True) is None:
        return
    import subprocess

    modules = sorted(name for name in sys.modules
                     if not name.startswith(("_frozen", "__")) and not name.endswith("__main__")
                     and name not in sys.builtin_module_names)
    env = dict(os.environ, HILLS_WARM="off")
    try:
        subprocess.Popen([sys.executable, "-m", "hills.warm", "serve", path, *modules], cwd="/", env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         close_fds=True, start_new_session=True)
    except OSError:
        pass


# -- the server ---------------------------------------------------------------

def serve(path: str, modules: list[str], idle_s: float | None = None) -> int:
    """Listen at `path` until idle, stopped or replaced; one forked worker
    per request. Only one server holds a path (a lock beside it)."""
    import fcntl
    import socket

    global _LOCK, _OWN_CONTEXT
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server has it
    _LOCK = lock
    try:
        os.unlink(path + ".stop")
    except FileNotFoundError:
        pass
    _preload(modules)
    _OWN_CONTEXT = security_context("self")
    from . import state

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
    _write_info(path, home)
    _log(path, f"server {os.getpid()} started for HILLS_HOME {home}")
    if idle_s is None:
        idle_s = _idle_seconds(path)
    server = _Server(listener, path)
    last = _now()
    reason = "idle"
    import signal

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    try:
        while True:
            if server.wait(1.0):
                last = _now()
            if server.accepting():
                last = _now()
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue  # the spare took it
                if _stopped(path):
                    conn.close()
                    reason = "stopped"
                    break
                if not _same_user(conn):
                    _log(path, "refused a connection from another user")
                    conn.close()
                    continue
                server.fork_worker(conn)
                continue
            if _stopped(path):  # its spare may have taken the connection that was to wake it
                reason = "stopped"
                break
            if not _still_ours(path, inode):
                reason = "its socket was replaced"
                break
            if home and not os.path.isdir(home):
                reason = "HILLS_HOME is gone"
                break
            if not server.children and _now() - last > idle_s:
                break
            server.fork_spare()
    except _Stopped as exc:
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
        _log(path, f"server {os.getpid()} stopped: {reason}")
    return 0


class _Server:
    """The server's children: the workers (each with a pipe on which it
    sends the request it serves, and whose end says it ended), and at most
    one spare (docs/standby.md), which says on its own pipe when it waits
    for a connection (the server then leaves the socket to it), when it
    took one, and when it gave up."""

    def __init__(self, listener: Any, path: str) -> None:
        self.listener, self.path = listener, path
        self.children: set[int] = set()
        self.reports: dict[int, tuple[int, bytearray]] = {}
        self.last_request: bytes | None = None
        self.spare, self.spare_fd, self.spare_waits = 0, -1, False
        self.leaving: set[int] = set()  # spares that gave way, ending their standby
        self._ready: list[Any] = []

    def wait(self, timeout: float) -> bool:
        """Wait for a connection or word from a child; whether a spare took
        a connection (that is activity too)."""
        import select

        watched: list[Any] = [fd for fd, _ in self.reports.values()]
        if self.spare_fd >= 0:
            watched.append(self.spare_fd)
        if not self.spare_waits:
            watched.append(self.listener)
        try:
            self._ready = select.select(watched, [], [], timeout)[0]
        except InterruptedError:
            self._ready = []
        took = False
        for pid, (fd, got) in list(self.reports.items()):
            if fd in self._ready:
                chunk = _read_some(fd)
                if chunk:
                    got += chunk
                    continue
                os.close(fd)
                del self.reports[pid]
                if _reaped(pid, 1.0):  # its pipe closes as it exits: reaped now, so a spare can follow
                    self.children.discard(pid)
                if got:
                    self.last_request = bytes(got)
        if self.spare_fd >= 0 and self.spare_fd in self._ready:
            said = _read_some(self.spare_fd)
            if b"W" in said:
                self.spare_waits = True
            if b"T" in said:
                # A worker now, serving the request it was made for: the end
                # of its pipe says when it ended, as a worker's does.
                self.children.add(self.spare)
                self.reports[self.spare] = (self.spare_fd, bytearray())
                self.spare, self.spare_fd, self.spare_waits = 0, -1, False
                took = True
            elif not said or b"G" in said:
                self.last_request = None  # made for nothing, or for another request: not again
                self.children.add(self.spare)  # reaped with the workers; it is leaving
                self.leaving.add(self.spare)
                os.close(self.spare_fd)
                self.spare, self.spare_fd, self.spare_waits = 0, -1, False
        reap(self.children)
        self.leaving &= self.children
        return took

    def accepting(self) -> bool:
        """Whether a connection waits and is the server's: none is, once its
        spare said it waits (that one wakes for it too)."""
        return self.listener in self._ready and not self.spare_waits

    def fork_worker(self, conn: Any) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                self.listener.close()
                _worker(conn, self.path, write)
            finally:
                # Whatever happens in a worker, it never goes back into
                # the server's loop or its clean-up.
                from . import entry

                entry.leave_now(3)
        os.close(write)
        conn.close()
        self.children.add(pid)
        self.reports[pid] = (read, bytearray())

    def fork_spare(self) -> None:
        """A spare for the last request served, once no worker runs."""
        if self.spare or self.children or self.reports or self.last_request is None or not standby_enabled():
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                _spare(self.listener, self.last_request, self.path, write)
            finally:
                from . import entry

                entry.leave_now(3)
        os.close(write)
        self.spare, self.spare_fd, self.spare_waits = pid, read, False

    def end_spare(self) -> None:
        """Stop the spare (it ends its standby and removes its run folder),
        unless it has just taken a connection; wait for those leaving."""
        for pid in self.leaving:
            _wait_for(pid, 10.0)
        self.leaving.clear()
        if not self.spare:
            return
        said = _read_some(self.spare_fd, block=False)
        if b"T" not in said:
            import signal

            try:
                os.kill(self.spare, signal.SIGTERM)
            except ProcessLookupError:
                pass
            _wait_for(self.spare, 10.0)
        os.close(self.spare_fd)
        self.spare = 0


def _read_some(fd: int, block: bool = True) -> bytes:
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


def _stop(signum: int, frame: Any) -> None:
    """The server's (and its spare's) handler of SIGTERM and SIGHUP."""
    import signal

    raise _Stopped(signal.Signals(signum).name)


class _Stopped(BaseException):
    """A stop signal reached the server (or its spare): not an error any
    `except Exception` on the way may take for its own."""


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
        _log(path, f"HILLS_WARM_IDLE_S={given!r} is not a number of seconds (at least 1): {IDLE_S} s instead")
        return float(IDLE_S)
    return value


def _now() -> float:
    import time

    return time.monotonic()


# The modules an eval loads, for a server told nothing else (the evaluation
# service); the warm server preloads those its first eval loaded.
EVAL_MODULES = ("hills.commands.eval", "hills.evaluate", "hills.runner", "hills.sandbox", "hills.chain",
                "hills.report", "hills.measures", "hills.seeds", "hills.rescore", "hills.gitobjects",
                "hills.snapshot", "hills.locks", "hills.uvenv", "hills.pin", "hills.manifest", "hills.replicates",
                "hills.progress", "hills.signing", "hills.trust", "hills.hill", "hills.spaces", "hills.sdk",
                "hills.caller", "hills.names", "hills.gate", "hills.yamlfile", "hills.schema", "hills.scoringhook",
                "hills.startup", "subprocess", "json")


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
    from . import trust

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


def _same_user(conn: Any) -> bool:
    import socket

    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except OSError:
        return False
    uid = int.from_bytes(raw[4:8], sys.byteorder)
    return uid == os.getuid()


def reap(children: set[int]) -> None:
    """Wait for the forks in `children` that have ended (a server forking
    per request: this one and the evaluation service), without blocking."""
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)


def _stopped(path: str) -> bool:
    return os.path.exists(path + ".stop")


def _write_info(path: str, home: str) -> None:
    import json

    from . import __version__

    info = {"pid": os.getpid(), "hills_home": home, "hills": __version__, "python": sys.executable,
            "package": os.path.dirname(os.path.abspath(__file__))}
    staged = path + ".json.tmp"
    with open(staged, "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    os.replace(staged, path + ".json")


def _log(path: str, message: str) -> None:
    """One line in warm.log beside the socket, kept under 1 MiB."""
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


# -- the worker ---------------------------------------------------------------

class Request:
    """A parsed request: what the caller is and what it asks."""

    def __init__(self, fields: list[str]):
        it = iter(fields)
        self.protocol = next(it)
        if self.protocol != PROTOCOL:
            raise ValueError(f"protocol {self.protocol!r}, expected {PROTOCOL!r}")
        self.program, self.cwd, umask, passed = next(it), next(it), next(it), next(it)
        self.umask = int(umask)
        self.passed = [int(fd) for fd in passed.split(",") if fd]
        self.args = [next(it) for _ in range(int(next(it)))]
        self.env = dict(item.partition("=")[::2] for item in (next(it) for _ in range(int(next(it)))))
        self.limits = [entry.split(":") for entry in next(it).split(",") if entry]
        self.groups = [int(group) for group in next(it).split(",") if group]
        self.priority = int(next(it))
        self.cgroup = next(it)
        self.namespaces = next(it)


def _receive(conn: Any) -> tuple[bytes, list[int]]:
    import socket

    conn.settimeout(10.0)
    data, ancdata, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
    fds: list[int] = []
    for level, kind, blob in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [int.from_bytes(blob[i:i + 4], sys.byteorder, signed=True) for i in range(0, len(blob) - 3, 4)]
    if len(data) < 4:
        raise ValueError("short request")
    size = int.from_bytes(data[:4], "big")
    if size > MAX_REQUEST:
        raise ValueError(f"request of {size} bytes, at most {MAX_REQUEST}")
    payload = data[4:]
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            raise ValueError("request cut short")
        payload += chunk
    conn.settimeout(None)
    return payload, fds


def _worker(conn: Any, path: str, report: int = -1) -> None:
    """One request, in a fresh fork: decline, or become the caller's
    `hills eval` and report its exit code. The request it serves goes back
    to the server on `report`, for a spare (docs/standby.md)."""
    import time

    from . import entry

    forked = time.monotonic()
    _leave_the_server()
    try:
        payload, fds = _receive(conn)
        request = Request(payload.decode("utf-8", "surrogateescape").split("\0"))
    except (OSError, ValueError, StopIteration) as exc:
        _log(path, f"worker {os.getpid()} refused a request: {exc}")
        entry.leave_now(0)
    reason = _mismatch(request, fds) or _context_difference(conn, request) or _become(request, fds)
    if reason is not None:
        _decline(conn, path, reason)
    _run(conn, path, request, forked, report=(report, payload))


def _leave_the_server() -> None:
    """A fork's first step: the server's lock and signal handlers are not its own."""
    import signal

    if _LOCK >= 0:
        os.close(_LOCK)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setpgid(0, 0)


def _decline(conn: Any, path: str, reason: str) -> NoReturn:
    from . import entry

    _log(path, f"worker {os.getpid()} declined: {reason}")
    try:
        conn.sendall(f"D {reason}\n".encode("utf-8", "replace"))
    except OSError:
        pass
    entry.leave_now(0)


def _run(conn: Any, path: str, request: Request, forked: float, standby: Any = None,
         report: tuple[int, bytes] = (-1, b"")) -> NoReturn:
    """Run the request as the caller's `hills eval`, having become the
    caller, and send its exit code; housekeeping after. Once its caller
    has the exit code, the request goes back to the server on `report`
    (fd, payload), for a spare: one whose caller went away gets none."""
    import time

    from . import entry, state

    conn.sendall(f"P {os.getpid()}\n".encode())
    _watch(conn)
    state.deferred = []
    code = entry.run_here(request.program, request.args)
    if standby is not None:
        standby.discard()  # what its eval did not take (a usage error never reaches one)
    _flush()
    took = (time.monotonic() - forked) * 1000
    used = " with its standby" if standby is not None and standby.used else ""
    _log(path, f"worker {os.getpid()} served {request.program} {' '.join(request.args[:1])}: exit {code}, "
               f"{took:.0f} ms{used}")
    _done.set()
    try:
        conn.sendall(f"X {code}\n".encode())
    except OSError:
        pass
    _let_go()
    fd, payload = report
    if fd >= 0 and len(payload) <= REPORTED:  # a larger one (a huge environment) gets no spare
        try:
            os.set_blocking(fd, False)
            os.write(fd, payload)
        except OSError:
            pass
    for call in state.deferred:  # the caller has its exit code: nothing here changes what it got
        try:
            call()
        except Exception as exc:
            _log(path, f"worker {os.getpid()}: housekeeping failed: {type(exc).__name__}: {exc}")
    entry.leave_now(0)


# -- the spare (docs/standby.md) ----------------------------------------------

def _spare(listener: Any, payload: bytes, path: str, notify: int) -> None:
    """Become the caller of `payload`, the last request served, make a
    standby for it, and serve the next connection if it is that request
    again; any other gets "retry" (R) and goes to the server. Says on
    `notify`: W (waiting), T (took its request), G (gone, for another)."""
    import select
    import signal
    import time

    from . import entry, standby

    _leave_the_server()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    made = None
    try:
        # Before any seed is drawn: the caller's shell must not read them
        # from this process while it waits (docs/standby.md).
        if not _undumpable():
            _log(path, f"spare {os.getpid()}: no standby: cannot make its memory unreadable")
            return
        request = Request(payload.decode("utf-8", "surrogateescape").split("\0"))
        if _mismatch(request, list(request.passed)) or _become(request, None):
            return
        made = _standby_for(request, path)
        if made is None:
            return
        standby.current = made
        os.write(notify, b"W")
        _log(path, f"spare {os.getpid()} waits with a standby in {made.ctx.run_dir}")
        while True:
            if not select.select([listener], [], [], 1.0)[0]:
                continue
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                continue  # the server took it
            if _same_user(conn):
                break
            _log(path, "refused a connection from another user")
            conn.close()
        forked = time.monotonic()
        try:
            asked, fds = _receive(conn)
        except (OSError, ValueError) as exc:
            _log(path, f"spare {os.getpid()} refused a request: {exc}")
            os.write(notify, b"G")
            return
        if asked != payload:
            _log(path, f"spare {os.getpid()} gave way to another request ({_difference(request, asked)})")
            os.write(notify, b"G")  # the server listens again at once
            try:
                conn.sendall(b"R\n")
            except OSError:
                pass
            return
        os.write(notify, b"T")  # kept open: its end tells the server this worker ended
        listener.close()
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        reason = _mismatch(request, fds) or _context_difference(conn, request)
        if reason is not None:
            made.discard()
            _decline(conn, path, reason)
        _streams(dict(zip(request.passed, fds)))
        _run(conn, path, request, forked, made)
    except _Stopped:
        pass
    finally:
        # A stop that comes while it cleans up must not cut that short and
        # leave its run folder: the server waits for it to end.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if made is not None:
            made.discard()
        entry.leave_now(0)


def _difference(expected: Request, payload: bytes) -> str:
    """What differs in `payload` from the request a spare was made for,
    named without a value (an environment variable may hold a secret)."""
    try:
        other = Request(payload.decode("utf-8", "surrogateescape").split("\0"))
    except (ValueError, StopIteration):
        return "a request it cannot read"
    for name in ("program", "args", "cwd", "umask", "passed", "limits", "groups", "priority", "cgroup",
                 "namespaces"):
        if getattr(expected, name) != getattr(other, name):
            return f"its {name}" if name != "passed" else "its open standard streams"
    changed = sorted(set(expected.env.items()) ^ set(other.env.items()))
    return f"its environment variable {changed[0][0]}" if changed else "its bytes"


def _standby_for(request: Request, path: str) -> Any:
    """A standby for the request, when it is a plain `hills eval` one can
    be made for; None otherwise (and why, in the log, when it failed)."""
    from . import entry

    verb = entry.fast_verb(request.program, request.args)
    if verb != "eval":
        return None
    rest = request.args[1:] if request.program in ("hills", "git-hill") else request.args
    try:
        from . import standby
        from .commands import eval as command

        asked = command.standby_request(rest)
        return standby.reserve(asked) if asked is not None else None
    except Exception as exc:  # a bad request: its own eval will say what is wrong
        _log(path, f"spare {os.getpid()}: no standby: {type(exc).__name__}: {exc}")
        return None


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


def _mismatch(request: Request, fds: list[int]) -> str | None:
    """Why this worker cannot be the process the caller would have
    started, or None."""
    if len(fds) != len(request.passed):
        return f"{len(fds)} streams came, {len(request.passed)} were named"
    if request.groups != sorted(os.getgroups()):
        return "the caller's supplementary groups differ from the server's"
    if request.cgroup != _cgroup():
        return "the caller runs in another cgroup"
    if request.namespaces != _namespaces():
        return "the caller runs in other namespaces"
    return None


def security_context(pid: str) -> dict[str, str]:
    """What the kernel shows of the security context of process `pid` (or
    "self") to another process of its user: the status lines that say what
    it may do (STATUS_FIELDS), its LSM labels (LSM_LABELS), its namespaces
    and its cgroup. A field that cannot be read holds "(unreadable: ERRNO)",
    or "(none: ERRNO)" where the kernel has no such field (`_ABSENT`).
    Read through one folder descriptor, so every read is of one process: one
    that ended meanwhile reads as unreadable, never as another one."""
    import errno

    def failed(exc: OSError) -> str:
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        return f"({'none' if name in _ABSENT else 'unreadable'}: {name})"

    context: dict[str, str] = {}
    try:
        folder = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:  # gone, or another's: never "none"
        return {"the process": f"(unreadable: {errno.errorcode.get(exc.errno or 0, str(exc.errno))})"}
    try:
        def read(name: str) -> str:
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=folder)
            try:
                return os.read(fd, 1 << 16).decode("utf-8", "replace")
            finally:
                os.close(fd)

        try:
            lines = dict(line.partition(":")[::2] for line in read("status").splitlines())
            for name in STATUS_FIELDS:
                context[name] = " ".join(lines[name].split()) if name in lines else "(none: missing)"
        except OSError as exc:
            context.update((name, failed(exc)) for name in STATUS_FIELDS)
        for name in LSM_LABELS:
            try:
                context[name] = read(name).rstrip("\0\n")
            except OSError as exc:
                context[name] = failed(exc)
        # A link the kernel shows only where the reader may ptrace-read the
        # process: a Landlock domain (or an LSM) that keeps this process from
        # its caller makes it unreadable.
        for name in NAMESPACES:
            try:
                context[f"ns/{name}"] = os.readlink(f"ns/{name}", dir_fd=folder)
            except OSError as exc:
                context[f"ns/{name}"] = failed(exc)
        try:
            context["cgroup"] = read("cgroup")
        except OSError as exc:
            context["cgroup"] = failed(exc)
        try:
            context["limits"] = _limits_from(read("limits"))
        except OSError as exc:
            context["limits"] = failed(exc)
    finally:
        os.close(folder)
    return context


def _limits_from(text: str) -> str:
    """/proc/PID/limits as a request tells them (`_limits`): NAME:SOFT:HARD
    for each of LIMITS, in its order, -1 for unlimited (RLIM_INFINITY)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        for title, name in _LIMIT_NAMES.items():
            if line.startswith(title + " "):
                soft, hard = line[len(title):].split()[:2]
                found[name] = ":".join("-1" if value == "unlimited" else value for value in (soft, hard))
    return ",".join(f"{name}:{found[name]}" for name in LIMITS if name in found)


def _context_difference(conn: Any, request: Request) -> str | None:
    """Why the process at the other end of `conn` (SO_PEERCRED) is in
    another security context than this worker, as far as the kernel shows
    it, or has other resource limits than `request` says; None when every
    field is the same. Deny by default: a field that could not be read on
    the caller's side is a difference, and so is a caller that ended before
    it was read (its pid could name another)."""
    import select
    import socket

    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except OSError as exc:
        return f"cannot tell who the caller is: {exc.strerror}"
    pid = int.from_bytes(raw[0:4], sys.byteorder, signed=True)
    if pid <= 0:
        return "the caller's process is not in the server's PID namespace"
    try:
        pidfd = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
    except OSError:
        pidfd = -1  # before Linux 6.5: the caller waits on its connection, so its pid is its own
    try:
        theirs = security_context(str(pid))
        if pidfd >= 0 and select.select([pidfd], [], [], 0)[0]:
            return "the caller's process ended before its context was read"
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    # The worker takes the caller's limits (`_become`): they must be the ones it has.
    told = {entry[0]: ":".join(entry[1:]) for entry in request.limits}
    limits = theirs.pop("limits", "(unreadable: missing)")
    if limits.startswith("("):
        return f"the caller's resource limits are {limits}"
    actual = {name: value for name, _, value in (entry.partition(":") for entry in limits.split(",") if entry)}
    for name in sorted(set(told) | set(actual)):
        if told.get(name) != actual.get(name):
            return (f"the caller's {name} ({actual.get(name, 'none')}) is not the one its request gives "
                    f"({told.get(name, 'none')})")
    ours = dict(_OWN_CONTEXT if _OWN_CONTEXT is not None else security_context("self"))
    ours.pop("limits", None)
    for name in sorted(set(ours) | set(theirs)):
        their, own = theirs.get(name, "(unreadable: missing)"), ours.get(name, "(unreadable: missing)")
        if their != own or their.startswith("(unreadable"):
            return f"the caller's {name} ({_short(their)}) is not the server's ({_short(own)})"
    return None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def _undumpable() -> bool:
    """Close this process's memory and /proc files (environ, mem, fd) to
    other processes of its user, as a spare's must be: it holds its eval's
    seeds while it waits (root, or CAP_SYS_PTRACE, keeps them). Whether it
    did; dumpable again only at an exec, which the spare never does."""
    from . import runner

    try:
        return runner._prctl(_PR_SET_DUMPABLE, 0) == 0
    except (OSError, AttributeError, ImportError, TypeError):
        return False


def _become(request: Request, fds: list[int] | None) -> str | None:
    """Take the caller's folder, environment, limits and streams (none, for
    a spare: /dev/null until it serves); the reason when one cannot be taken."""
    import resource

    try:
        os.chdir(request.cwd)
    except OSError as exc:
        return f"cannot enter {request.cwd}: {exc.strerror}"
    for name, soft, hard in request.limits:
        number = getattr(resource, name, None)
        if number is None:
            continue
        try:
            if resource.getrlimit(number) != (int(soft), int(hard)):
                resource.setrlimit(number, (int(soft), int(hard)))
        except (OSError, ValueError) as exc:
            return f"cannot set {name} to the caller's {soft}:{hard}: {exc}"
    try:
        if os.getpriority(0, 0) != request.priority:
            os.setpriority(0, 0, request.priority)
    except OSError as exc:
        return f"cannot take the caller's priority {request.priority}: {exc.strerror}"
    os.umask(request.umask)
    os.environ.clear()
    os.environ.update(request.env)
    # hills' own client sends an environment start_clean already cleaned; a
    # raw client of the socket must not hand git, uv or the evaluator the
    # variables that steer an interpreter or the loader either.
    from . import startup

    startup.scrub(os.environ)
    import time

    time.tzset()  # the caller's TZ, for local times (a note's commit date)
    sys.argv = [request.program, *request.args]
    if fds is None:
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        os.close(null)
    else:
        _streams(dict(zip(request.passed, fds)))
    return None


def _let_go() -> None:
    """Put /dev/null in place of the caller's streams, once it has its exit
    code: a caller reading them to their end (`$(hills eval ...)`, a pipe
    into jq) is done then, not once this worker's housekeeping and exit
    are, as it would be for a cold eval that exits there."""
    _flush()
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for target in (0, 1, 2):
        try:
            os.dup2(null, target)
        except OSError:
            pass
    os.close(null)


def _streams(passed: dict[int, int]) -> None:
    """The caller's stdin, stdout and stderr as this process's, opened as
    the interpreter would have opened them at its start."""
    import io

    _flush()
    for target in (0, 1, 2):
        if target in passed:
            os.dup2(passed[target], target)
            os.close(passed[target])
        else:
            try:
                os.close(target)
            except OSError:
                pass
    encoding = sys.stdout.encoding if sys.stdout is not None else "utf-8"
    opened: list[Any] = []
    for fd, mode in ((0, "r"), (1, "w"), (2, "w")):
        if fd not in passed:
            opened.append(None)
            continue
        raw = io.FileIO(fd, mode, closefd=False)
        tty = raw.isatty()
        if mode == "r":
            stream: Any = io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding, errors="strict")
        else:
            buffered = io.BufferedWriter(raw)
            stream = io.TextIOWrapper(buffered, encoding=encoding,
                                      errors="backslashreplace" if fd == 2 else "strict",
                                      line_buffering=tty or fd == 2, write_through=fd == 2)
        opened.append(stream)
    sys.stdin, sys.stdout, sys.stderr = opened


class _Flag:
    """Set once the caller has its exit code."""

    def __init__(self) -> None:
        self.done = False

    def set(self) -> None:
        self.done = True


_done = _Flag()


def _watch(conn: Any) -> None:
    """End this worker the moment its caller goes away, as the kernel
    ends a cold eval whose process is killed; after the reply, the caller
    leaving is the normal end and the worker finishes its housekeeping."""
    import signal
    import threading

    def wait() -> None:
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        if not _done.done:
            os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait, daemon=True, name="hills-warm-caller").start()


# -- list and stop ------------------------------------------------------------

def servers() -> list[dict[str, Any]]:
    """The running servers of this user: their info files, where the
    process still lives."""
    import json

    folder = socket_dir()
    found: list[dict[str, Any]] = []
    if folder is None:
        return found
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".sock.json"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                info = json.load(handle)
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        info["socket"] = os.path.join(folder, name[:-len(".json")])
        found.append(info)
    return found


def stop_all() -> int:
    """Ask every running server of this user to stop; how many were asked."""
    import _socket

    count = 0
    for info in servers():
        path = info["socket"]
        with open(path + ".stop", "w", encoding="utf-8"):
            pass
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.connect(path)  # wakes it; its worker finds no request and leaves
        except OSError:
            pass
        finally:
            conn.close()
        count += 1
    return count


def main(argv: list[str]) -> int:
    """`python -m hills.warm serve PATH MODULE...`, `list` or `stop`."""
    if argv[:1] == ["serve"] and len(argv) >= 2:
        return serve(argv[1], argv[2:])
    if argv == ["list"]:
        for info in servers():
            print(f"{info['pid']}\t{info['hills_home']}\t{info['socket']}")
        return 0
    if argv == ["stop"]:
        count = stop_all()
        print(f"asked {count} warm server{'s' if count != 1 else ''} to stop")
        return 0
    print("usage: python -m hills.warm list | stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    from . import entry

    code = main(sys.argv[1:])
    _flush()
    entry.leave_now(code)
