"""The warm client (docs/warm.md, "Moving parts"): the start of every
`hills eval`, before any pipeline module loads. It sends the call to this
user's warm server and waits for the exit code, or starts a server for the
next call. It imports nothing the interpreter does not already hold but
`_socket` (and the protocol, which imports nothing)."""

import os
import sys

from . import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Variables that decide how the interpreter behaves before a request is
# read, and so name another server.
KEYED_PREFIXES = ("PYTHON", "LC_")
KEYED_NAMES = ("LANG", "HILLS_HOME", "HOME", "HILLS_WARM_STANDBY")
# hills/: every folder under it is hashed into the key (`key`).
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        try:  # the one builtin hash module needed, not hills.base.digests' four
            from _sha2 import sha256  # Python 3.12 and later
        except ImportError:
            try:
                from _sha256 import sha256
            except ImportError:
                from hashlib import sha256

    parts = [sys.version, sys.executable, str(sys.flags), PACKAGE]
    try:
        exe = os.stat(sys.executable)
        parts.append(f"{exe.st_size}:{exe.st_mtime_ns}:{exe.st_ino}")
    except OSError:
        pass
    parts.extend(sources(PACKAGE))
    home = os.environ.get("HILLS_HOME")
    parts.append("HILLS_HOME=" + (os.path.abspath(os.path.expanduser(home)) if home else ""))
    for name in sorted(os.environ):
        if name.startswith(KEYED_PREFIXES) or name in KEYED_NAMES:
            parts.append(f"{name}={os.environ[name]}")
    return sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:20]


def sources(package: str) -> list[str]:
    """`PATH:SIZE:MTIME:INODE` of every .py file in `package` and in every
    sub-package below it (a folder with an `__init__.py`: not the templates,
    hooks or skills a wheel puts beside the code, nor caches), folder by
    folder, each sorted: one scandir a folder and one stat a file."""
    found: list[str] = []
    folders = [package]
    while folders:
        folder = folders.pop(0)
        files, below, names = [], [], set()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py") and entry.is_file():
                    names.add(entry.name)
                    st = entry.stat()
                    files.append(f"{entry.path[len(package) + 1:]}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
                elif entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__" \
                        and not entry.name.startswith("."):
                    below.append(entry.path)
        if folder != package and "__init__.py" not in names:
            continue  # not a package: no code of hills' is below it
        found.extend(sorted(files))
        folders.extend(sorted(below))
    return found


class Call:
    """What the client did: `code` is the worker's exit code, or None when
    the caller runs the eval itself; `start` says a server should be
    started for the next one (there was none), at `path`."""

    def __init__(self, code: int | None, start: bool = False, path: str | None = None, retry: bool = False):
        self.code, self.start, self.path, self.retry = code, start, path, retry


def call(program: str, args: list[str]) -> Call:
    """Send `program args` to this user's warm server; Call(None) when
    there is none or it declined, so the caller runs the eval cold. A
    spare made for another call answers RETRY (docs/standby.md): the
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
    """This process's request: what it asks, and what it is."""
    return protocol.Request(
        program=program, cwd=os.getcwd(), umask=_umask(), passed=[fd for fd in (0, 1, 2) if _is_open(fd)],
        args=list(args), env=os.environ, limits=limits(), groups=sorted(os.getgroups()),
        priority=os.getpriority(0, 0), cgroup=cgroup(), namespaces=namespaces()).encode()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def limits() -> list[list[str]]:
    """This process's resource limits as a request tells them: NAME, SOFT,
    HARD for each of protocol.LIMITS the platform has."""
    import resource

    values = []
    for name in protocol.LIMITS:
        number = getattr(resource, name, None)
        if number is not None:
            soft, hard = resource.getrlimit(number)
            values.append([name, str(soft), str(hard)])
    return values


def cgroup() -> str:
    """This process's /proc/self/cgroup, as a request tells it."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            return handle.read().replace("\0", "")
    except OSError:
        return ""


def namespaces() -> str:
    """This process's namespace links, as a request tells them."""
    links = []
    for name in protocol.NAMESPACES:
        try:
            links.append(f"{name}={os.readlink(f'/proc/self/ns/{name}')}")
        except OSError:
            links.append(f"{name}=")
    return ",".join(links)


def _send(conn: "Any", payload: bytes, fds: list[int]) -> None:
    import _socket

    data = len(payload).to_bytes(4, "big") + payload
    ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                  b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds))] if fds else []
    sent = conn.sendmsg([data], ancillary)
    while sent < len(data):
        sent += conn.send(data[sent:])


def _await(conn: "Any") -> Call:
    """Read the worker's lines: the eval's exit code, or a decline."""
    if TYPE_CHECKING:
        import signal as _signal
    else:
        import _signal  # signal less its enums, which would load enum

    buffered = b""
    worker = 0
    previous: dict[int, "Any"] = {}

    def forward(signum: int, frame: "Any") -> None:
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
                word, _, value = line.decode("ascii", "replace").partition(" ")
                if word == protocol.DECLINE:
                    return Call(None)
                if word == protocol.RETRY:
                    return Call(None, retry=True)
                if word == protocol.RUNS and value.isdigit():
                    worker = int(value)
                    for number in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT):
                        # One this process ignores (nohup) is not passed on either.
                        if _signal.getsignal(number) != _signal.SIG_IGN:
                            previous[number] = _signal.signal(number, forward)
                if word == protocol.EXIT and value.lstrip("-").isdigit():
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
