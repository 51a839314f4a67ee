"""The access audit inside submitted Python code: an audit hook (PEP 578)
that reports each attempt to reach past the submission's view (a path
outside it, another process's /proc, a write outside its folders, a tool
that is not there, a socket) to the hills.sdk process that started it.

hills copies this file into the sdk folder as `audit/sitecustomize.py`;
hills.sdk puts that folder first on PYTHONPATH of the code it starts, with
the view in HILLS_AUDIT_VIEW and the write end of a pipe in HILLS_AUDIT_FD.
Standard library only, and cheap: most events return at the first test.
Submitted code cannot remove the hook; it can write lines of its own into
the pipe, which only make its audit look worse (docs/audit.md)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

ENV_FD = "HILLS_AUDIT_FD"
ENV_VIEW = "HILLS_AUDIT_VIEW"
MAX_RECORDS = 1000
# Read by the interpreter and the libraries it loads, wherever they run:
# not an attempt of the submission's.
BENIGN = ("/proc/self", "/proc/thread-self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys/vm/overcommit",
          "/proc/filesystems", "/sys/devices/system/cpu", "/sys/fs/cgroup", "/dev/null", "/dev/urandom", "/dev/random",
          "/dev/zero", "/dev/shm", "/dev/tty", "/dev/fd")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_WATCHED = frozenset(("open", "os.listdir", "os.scandir", "subprocess.Popen", "os.exec", "os.posix_spawn",
                      "os.system", "socket.connect", "socket.sendto", "os.symlink", "os.link"))


def _under(path: str, roots: Iterable[str]) -> bool:
    for root in roots:
        if path == root or path.startswith(root + "/"):
            return True
    return False


class _Audit:
    def __init__(self, fd: int, view: Mapping[str, Any], inode: int = 0) -> None:
        self.fd, self.inode = fd, inode
        self.read = tuple(view.get("read", ()))
        self.write = tuple(view.get("write", ()))
        self.network = bool(view.get("network"))
        # Inside the sandbox /tmp is the scratch folder, with the view's own
        # folders under the machine's /tmp bound into it: a path there is
        # the scratch's when it exists or its folder can be written.
        self.tmp = view.get("tmp")
        self.deny = tuple(view.get("deny", ()))
        self.pid = str(os.getpid())
        self.records = 0
        self.busy = False

    def say(self, kind: str, what: object) -> None:
        if self.records >= MAX_RECORDS:
            return
        self.records += 1
        try:
            if os.fstat(self.fd).st_ino != self.inode:  # closed, and the number reused for another file
                self.records = MAX_RECORDS
                return
            import json  # only once something is recorded: an honest start never loads it

            os.write(self.fd, (json.dumps({"kind": kind, "path": str(what)[:300]}) + "\n").encode())
        except OSError:
            pass

    def path_of(self, raw: Any) -> str | None:
        if isinstance(raw, int) or raw is None:
            return None
        path = os.fsdecode(raw)
        if not path.startswith("/"):
            path = os.path.join(os.getcwd(), path)
        return os.path.normpath(path)

    def opened(self, raw: Any, mode: Any, flags: Any, listing: bool = False) -> None:
        path = self.path_of(raw)
        if path is None:
            return
        if path == "/proc":
            self.say("proc", path)
            return
        if path.startswith("/proc/"):
            first = path[6:].split("/", 1)[0]
            if first.isdigit() and first != self.pid:
                self.say("proc", path)
            elif not _under(path, BENIGN) and not first.isdigit():
                self.say("proc", path)
            return
        if _under(path, BENIGN):
            return
        if _under(path, self.deny):
            self.say("write" if not listing and self.writes(mode, flags) else "read", path)
            return
        if self.tmp and _under(path, (self.tmp,)) and not _under(path, self.read) and not _under(path, self.write):
            if not self.scratch_has(path):
                self.say("write" if not listing and self.writes(mode, flags) else "read", path)
            return
        writing = not listing and ((isinstance(mode, str) and any(c in mode for c in "wax+"))
                                   or (isinstance(flags, int) and flags & _WRITE_FLAGS))
        if writing:
            if not _under(path, self.write):
                self.say("write", path)
        elif not _under(path, self.read) and not _under(path, self.write):
            self.say("read", path)

    @staticmethod
    def writes(mode: Any, flags: Any) -> bool:
        return bool((isinstance(mode, str) and any(c in mode for c in "wax+"))
                    or (isinstance(flags, int) and flags & _WRITE_FLAGS))

    @staticmethod
    def scratch_has(path: str) -> bool:
        return os.path.exists(path) or os.access(os.path.dirname(path), os.W_OK)

    def executed(self, raw: Any) -> None:
        if isinstance(raw, (list, tuple)):
            raw = raw[0] if raw else None
        if raw is None or isinstance(raw, int):
            return
        name = os.fsdecode(raw)
        if "/" in name:
            path = self.path_of(name)
            if path is not None and not (os.path.exists(path) and
                                         (_under(path, self.read) or _under(path, self.write))):
                self.say("exec", path)
            return
        for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
            if folder and os.path.exists(os.path.join(folder, name)):
                return
        self.say("exec", name)

    def linked(self, source: Any, target: Any) -> None:
        """A link made to a path outside the view: left for a more trusted
        process (the evaluator) to follow."""
        path = self.path_of(source)
        if path is None:
            return
        if not os.path.isabs(os.fsdecode(source)):
            where = self.path_of(target)
            path = os.path.normpath(os.path.join(os.path.dirname(where or "."), os.fsdecode(source)))
        if path.startswith("/proc/") or _under(path, self.deny) or not (_under(path, self.read)
                                                                           or _under(path, self.write)):
            self.say("link", path)

    def connected(self, address: Any) -> None:
        if isinstance(address, tuple):
            if not self.network:
                self.say("network", ":".join(str(part) for part in address[:2]))
            return
        if isinstance(address, (str, bytes)):
            text = os.fsdecode(address) if isinstance(address, bytes) else address
            if not text or text.startswith("\0"):
                self.say("socket", "@" + text[1:])
                return
            path = self.path_of(text)
            if path is not None and not _under(path, self.write):
                self.say("socket", path)

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _WATCHED or self.busy:
            return
        self.busy = True
        try:
            if event == "open":
                self.opened(args[0], args[1], args[2])
            elif event in ("os.listdir", "os.scandir"):
                self.opened(args[0] if args[0] is not None else ".", None, 0, listing=True)
            elif event == "subprocess.Popen":
                self.executed(args[0] if args[0] is not None else args[1])
            elif event in ("os.exec", "os.posix_spawn"):
                self.executed(args[0])
            elif event == "os.system":
                command = os.fsdecode(args[0]).split()
                if command:
                    self.executed(command[0])
            elif event in ("socket.connect", "socket.sendto"):
                self.connected(args[1])
            elif event in ("os.symlink", "os.link"):
                self.linked(args[0], args[1])
        except Exception:
            pass
        finally:
            self.busy = False


def parse_view(text: str) -> dict[str, Any]:
    """The view as hills.sdk writes it: five lines, the
    folders it may read and those it may write (each list joined with
    os.pathsep, as PATH is), the scratch's place inside the sandbox (or
    nothing), whether it has the network (1 or 0), and the folders inside
    readable ones that it may not read (the hill's private/). Not JSON: the hook
    loads before the submitted code, and json would cost every start its
    import."""
    read, write, tmp, network, deny = (text.split("\n") + ["", "", "", "", ""])[:5]
    return {"read": [path for path in read.split(os.pathsep) if path],
            "write": [path for path in write.split(os.pathsep) if path], "tmp": tmp or None, "network": network == "1",
            "deny": [path for path in deny.split(os.pathsep) if path]}


def install(environ: Mapping[str, str] = os.environ) -> _Audit | None:
    """Install the hook when hills.sdk asked for it; never fail the start."""
    fd_text, view = environ.get(ENV_FD), environ.get(ENV_VIEW)
    if not fd_text or not view:
        return None
    try:
        number, _, inode = fd_text.partition(":")
        audit = _Audit(int(number), parse_view(view), int(inode))
        if os.fstat(audit.fd).st_ino != audit.inode:
            return None  # a process that did not inherit the pipe: nothing to write to
    except (ValueError, TypeError, AttributeError, OSError):
        return None
    add = getattr(sys, "addaudithook", None)  # Python 3.8 and later
    if add is None:
        return None
    add(audit)
    return audit


def chain() -> None:
    """Run the sitecustomize this file shadows, if the interpreter has one
    further down its path (a distribution's, a tool's), as it would have
    run without the audit."""
    import importlib.machinery

    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = type(sys)("sitecustomize")
    module.__file__ = spec.origin
    module.__spec__ = spec
    spec.loader.exec_module(module)


install()
try:
    chain()
except Exception:  # noqa: BLE001 - as site.py does for a failing sitecustomize
    import traceback

    traceback.print_exc()
