"""The warm worker (docs/warm.md, "Moving parts"): one fork of the server
per request. It checks that it can be the process the caller would have
started ("When a worker declines"), becomes that caller (folder,
environment, umask, limits, standard streams) and runs the command through
`entry.run_here`, exactly the code a cold `hills eval` runs; then it sends
the exit code and lets go of the caller's streams before its housekeeping."""

from __future__ import annotations

import os
import sys
from ..base.errors import leave_now
from typing import Any, NoReturn

from . import client, common, protocol
from .common import Host
from .protocol import Request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..run.standby import Standby

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
# The names /proc/PID/limits gives the limits a request tells (protocol.LIMITS).
_LIMIT_NAMES = {"Max cpu time": "RLIMIT_CPU", "Max file size": "RLIMIT_FSIZE", "Max data size": "RLIMIT_DATA",
                "Max stack size": "RLIMIT_STACK", "Max core file size": "RLIMIT_CORE",
                "Max resident set": "RLIMIT_RSS", "Max processes": "RLIMIT_NPROC", "Max open files": "RLIMIT_NOFILE",
                "Max locked memory": "RLIMIT_MEMLOCK", "Max address space": "RLIMIT_AS"}
_SO_PEERPIDFD = 77  # Linux 6.5: a pidfd of the peer, which Python 3.11's socket module does not name


def receive(conn: Any) -> tuple[bytes, list[int]]:
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
    if size > protocol.MAX_REQUEST:
        raise ValueError(f"request of {size} bytes, at most {protocol.MAX_REQUEST}")
    payload = data[4:]
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            raise ValueError("request cut short")
        payload += chunk
    conn.settimeout(None)
    return payload, fds


def serve(conn: Any, host: Host, report: int = -1) -> None:
    """One request, in a fresh fork: decline, or become the caller's
    `hills eval` and report its exit code. The request it serves goes back
    to the server on `report`, for a spare (docs/standby.md)."""
    import time


    forked = time.monotonic()
    common.leave_the_server(host)
    try:
        payload, fds = receive(conn)
        request = Request.decode(payload)
    except (OSError, ValueError) as exc:
        common.log(host.path, f"worker {os.getpid()} refused a request: {exc}")
        leave_now(0)
    reason = mismatch(request, fds) or context_difference(conn, request, host) or become(request, fds)
    if reason is not None:
        decline(conn, host.path, reason)
    run(conn, host.path, request, forked, report=(report, payload))


def decline(conn: Any, path: str, reason: str) -> NoReturn:
    """Say DECLINE with the reason (the caller runs the eval cold), log it, leave."""

    common.log(path, f"worker {os.getpid()} declined: {reason}")
    try:
        conn.sendall(protocol.reply(protocol.DECLINE, reason))
    except OSError:
        pass
    leave_now(0)


def run(conn: Any, path: str, request: Request, forked: float, standby: Standby | None = None,
        report: tuple[int, bytes] = (-1, b"")) -> NoReturn:
    """Run the request as the caller's `hills eval`, having become the
    caller, and send its exit code; housekeeping after. `standby`: the one
    a spare made for this request, handed to the eval. Once its caller has
    the exit code, the request goes back to the server on `report` (fd,
    payload), for a spare: one whose caller went away gets none."""
    import time

    from .. import entry
    from ..base import state

    conn.sendall(protocol.reply(protocol.RUNS, os.getpid()))
    _watch(conn)
    state.deferred = []
    code = entry.run_here(request.program, request.args, standby=standby)
    if standby is not None:
        standby.discard()  # what its eval did not take (a usage error never reaches one)
    common.flush()
    took = (time.monotonic() - forked) * 1000
    used = " with its standby" if standby is not None and standby.used else ""
    common.log(path, f"worker {os.getpid()} served {request.program} {' '.join(request.args[:1])}: exit {code}, "
                     f"{took:.0f} ms{used}")
    _done.set()
    try:
        conn.sendall(protocol.reply(protocol.EXIT, code))
    except OSError:
        pass
    _let_go()
    fd, payload = report
    if fd >= 0 and len(payload) <= protocol.REPORTED:  # a larger one (a huge environment) gets no spare
        try:
            os.set_blocking(fd, False)
            os.write(fd, payload)
        except OSError:
            pass
    for call in state.deferred:  # the caller has its exit code: nothing here changes what it got
        try:
            call()
        except Exception as exc:
            common.log(path, f"worker {os.getpid()}: housekeeping failed: {type(exc).__name__}: {exc}")
    leave_now(0)


def mismatch(request: Request, fds: list[int]) -> str | None:
    """Why this worker cannot be the process the caller would have
    started, or None."""
    if len(fds) != len(request.passed):
        return f"{len(fds)} streams came, {len(request.passed)} were named"
    if request.groups != sorted(os.getgroups()):
        return "the caller's supplementary groups differ from the server's"
    if request.cgroup != client.cgroup():
        return "the caller runs in another cgroup"
    if request.namespaces != client.namespaces():
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
        for name in protocol.NAMESPACES:
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
    """/proc/PID/limits as a request tells them (`client.limits`): NAME:SOFT:HARD
    for each of LIMITS, in its order, -1 for unlimited (RLIM_INFINITY)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        for title, name in _LIMIT_NAMES.items():
            if line.startswith(title + " "):
                soft, hard = line[len(title):].split()[:2]
                found[name] = ":".join("-1" if value == "unlimited" else value for value in (soft, hard))
    return ",".join(f"{name}:{found[name]}" for name in protocol.LIMITS if name in found)


def context_difference(conn: Any, request: Request, host: Host) -> str | None:
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
    # The worker takes the caller's limits (`become`): they must be the ones it has.
    told = {entry[0]: ":".join(entry[1:]) for entry in request.limits}
    limits = theirs.pop("limits", "(unreadable: missing)")
    if limits.startswith("("):
        return f"the caller's resource limits are {limits}"
    actual = {name: value for name, _, value in (entry.partition(":") for entry in limits.split(",") if entry)}
    for name in sorted(set(told) | set(actual)):
        if told.get(name) != actual.get(name):
            return (f"the caller's {name} ({actual.get(name, 'none')}) is not the one its request gives "
                    f"({told.get(name, 'none')})")
    ours = dict(host.context or security_context("self"))
    ours.pop("limits", None)
    for name in sorted(set(ours) | set(theirs)):
        their, own = theirs.get(name, "(unreadable: missing)"), ours.get(name, "(unreadable: missing)")
        if their != own or their.startswith("(unreadable"):
            return f"the caller's {name} ({_short(their)}) is not the server's ({_short(own)})"
    return None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def become(request: Request, fds: list[int] | None) -> str | None:
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
    from ..base import startup

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
        streams(dict(zip(request.passed, fds)))
    return None


def _let_go() -> None:
    """Put /dev/null in place of the caller's streams, once it has its exit
    code: a caller reading them to their end (`$(hills eval ...)`, a pipe
    into jq) is done then, not once this worker's housekeeping and exit
    are, as it would be for a cold eval that exits there."""
    common.flush()
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


def streams(passed: dict[int, int]) -> None:
    """The caller's stdin, stdout and stderr as this process's, opened as
    the interpreter would have opened them at its start."""
    import io

    common.flush()
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


