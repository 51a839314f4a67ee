"""The evaluation service (`hills serve`): its state folder, the config of
users and roles, the socket loop that forks one process per connection,
and what a connection's process does with a request (docs/service.md)."""

from __future__ import annotations

import io
import json
import os
import pwd
import shutil
import socket
import stat as stat_module
import struct
import sys
import time

from . import entry, protocol
from .client import ADMIN_VERBS, CLIMBER_VERBS
from .errors import EnvironmentProblem, HillsError, Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_USER = "hills"
DEFAULT_STATE = "/var/lib/hills"
DEFAULT_SOCKET = "/run/hills/hills.sock"
CONFIG_NAME = "service.json"
MAX_CONNECTIONS = 64
# Options that would make the service write or read a place of its own.
REFUSED_OPTIONS = ("-o", "--output", "--export", "--into")


class Config:
    """The service's users and roles, from STATE/service.json."""

    def __init__(self, values: dict[str, Any], path: str) -> None:
        self.path = path
        self.user: str = values["user"]
        self.socket: str = values["socket"]
        self.admins: frozenset[str] = frozenset(values["admins"])
        self.climbers: frozenset[str] = frozenset(values["climbers"])

    @classmethod
    def load(cls, state_dir: str) -> "Config":
        path = os.path.join(state_dir, CONFIG_NAME)
        try:
            with open(path, encoding="utf-8") as handle:
                values = json.load(handle)
            if not all(isinstance(values.get(key), list) for key in ("admins", "climbers")) \
                    or not isinstance(values.get("user"), str) or not isinstance(values.get("socket"), str):
                raise ValueError("keys user, socket, admins, climbers expected")
        except FileNotFoundError:
            raise EnvironmentProblem(f"state folder '{state_dir}' has no {CONFIG_NAME}",
                                     hint="set the service up first: hills setup service (as root)") from None
        except (OSError, ValueError) as exc:
            raise EnvironmentProblem(f"service config '{path}' cannot be read: {exc}") from None
        return cls(values, path)

    def role(self, user: str) -> str | None:
        if user in self.admins:
            return "admin"
        if user in self.climbers:
            return "climber"
        return None


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
        raise EnvironmentProblem(f"state folder '{state_dir}' is open to other users (mode {stat_module.S_IMODE(info.st_mode):04o}); "
                      f"expected 0700", hint=f"chmod 700 '{state_dir}'")


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
    listener = _listen(path)
    from . import warm

    warm.preload()  # each connection's fork starts with the eval's code loaded
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
    children: set[int] = set()
    try:
        while True:
            warm.reap(children)
            try:
                listener.settimeout(1.0)
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            if len(children) >= MAX_CONNECTIONS:
                _refuse_busy(conn)
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                code = 0
                try:
                    code = Handler(conn, layout).handle()
                finally:
                    entry.leave_now(code)
            children.add(pid)
            conn.close()
    except KeyboardInterrupt:
        return 0
    finally:
        listener.close()
        try:
            if stat_module.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


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


def _refuse_busy(conn: socket.socket) -> None:
    try:
        conn.settimeout(1.0)
        protocol.Connection(conn).record({"type": "error", "message": "the hills service is busy: "
                                          f"{MAX_CONNECTIONS} requests are being served", "exit": 4,
                                          "hint": "try again in a moment"})
    except HillsError:
        pass
    finally:
        conn.close()


class Layout:
    """The folders of the state folder (docs/service.md, State)."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.home = os.path.join(state_dir, "home")
        self.project = os.path.join(state_dir, "project")
        self.hills_dir = os.path.join(self.project, ".hills")
        self.requests = os.path.join(state_dir, "requests")
        self.vault = os.path.join(self.home, "vault")

    def prepare(self) -> None:
        os.environ["HILLS_HOME"] = self.home
        for folder in (self.home, self.project, self.hills_dir, self.requests, self.vault):
            os.makedirs(folder, mode=0o700, exist_ok=True)
        from . import state

        state.ensure_home()
        for entry in os.listdir(self.requests):  # left by connections that died
            shutil.rmtree(os.path.join(self.requests, entry), ignore_errors=True)


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


class Handler:
    """One connection, in its own process: who is asking, what, and the answer."""

    def __init__(self, sock: socket.socket, layout: Layout) -> None:
        self.sock, self.layout = sock, layout
        self.conn = protocol.Connection(sock)
        self.folder: str | None = None

    def handle(self) -> int:
        import signal

        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            return self._answer()
        except HillsError as exc:
            self._error(exc.message, exc.hint, exc.exit_code)
            return exc.exit_code
        except Exception as exc:  # a bug: said to the client and in the service's log; the service goes on
            import traceback

            traceback.print_exc(file=sys.__stderr__)
            self._error(f"internal error in the hills service: {type(exc).__name__}: {exc}", None, 3)
            return 3
        finally:
            if self.folder:
                shutil.rmtree(self.folder, ignore_errors=True)
            _close(self.sock)

    def _error(self, message: str, hint: str | None, code: int) -> None:
        if self.conn.peer_gone:
            return
        try:
            self.sock.settimeout(5.0)
            self.conn.record({"type": "error", "message": message, "hint": hint, "exit": code})
        except HillsError:
            pass

    def _answer(self) -> int:
        uid, user = peer_user(self.sock)
        request = self.conn.receive_record(time.monotonic() + protocol.FIRST_DEADLINE_S)
        verb, argv, files = check_request(request)
        # Read per connection: a re-run of 'hills setup service' that adds
        # or removes a user takes effect without a restart.
        role = Config.load(self.layout.state_dir).role(user)
        if role is None:
            raise Refused(f"user '{user}' (uid {uid}) is neither an admin nor a climber of this hills service",
                          hint="ask the service's admin to add you: hills setup service --climber USER")
        allowed = ADMIN_VERBS if role == "admin" else CLIMBER_VERBS
        if verb not in allowed:
            raise Refused(f"'hills {verb}' is for the service's admins; user '{user}' is a {role}",
                          hint="an admin commits and pins; climbers evaluate and read results")
        self.conn.record({"type": "accepted", "version": protocol.VERSION, "role": role, "user": user})
        self.folder = os.path.join(self.layout.requests, f"{os.getpid()}-{os.urandom(4).hex()}")
        os.mkdir(self.folder, 0o700)
        upload = protocol.Upload()
        paths = {}
        for index, kind in enumerate(files):
            target = os.path.join(self.folder, str(index))
            protocol.receive_into(self.conn, target, upload)
            paths[f"@{index}"] = target if kind == "dir" else _only_file(target)
        done = self.conn.receive_record(time.monotonic() + protocol.IDLE_DEADLINE_S)
        if done.get("type") != "run":
            raise protocol.ProtocolError(f"expected the run record, got '{done['type']}'")
        # From here on the command runs to its end whatever the client does:
        # a write to a client that is gone, or that stops reading, is dropped.
        self.sock.settimeout(protocol.IDLE_DEADLINE_S)
        # The client says its own names for the folders it sent, not the service's.
        self.conn.record({"type": "paths", "paths": {path: name for name, path in paths.items()}})
        return self._run(verb, [paths.get(arg, arg) for arg in argv], user)

    def _run(self, verb: str, argv: list[str], user: str) -> int:
        from . import caller, entry, hill

        caller.serve_for(user)
        hill.ONLY_HILLS_DIR = self.layout.hills_dir
        os.chdir(self.layout.project)
        out = io.TextIOWrapper(io.BufferedWriter(_FrameWriter(self.conn, protocol.STDOUT)), encoding="utf-8",
                               errors="surrogateescape", line_buffering=True)
        err = io.TextIOWrapper(io.BufferedWriter(_FrameWriter(self.conn, protocol.STDERR)), encoding="utf-8",
                               errors="surrogateescape", line_buffering=True)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            if verb == "commit":
                code = _import_version(self.layout, argv[0])
            else:
                code = entry.run_here("hills", [verb, *argv])
        finally:
            for stream in (out, err):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            sys.stdout, sys.stderr = saved
        if not self.conn.peer_gone:
            try:
                self.conn.record({"type": "exit", "exit": code})
            except protocol.Closed:
                pass
        return code


def _close(sock: socket.socket) -> None:
    """Close a connection so that the client reads the last record: the
    bytes it sent that were not read (a refused request's) are drained
    first, briefly, as a close with unread bytes resets the connection."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(0.5)
        drained = 0
        while drained < protocol.DATA_CAP and (chunk := sock.recv(65536)):
            drained += len(chunk)
    except OSError:
        pass
    finally:
        sock.close()


def _only_file(folder: str) -> str:
    names = os.listdir(folder)
    if len(names) != 1 or not os.path.isfile(os.path.join(folder, names[0])):
        raise protocol.ProtocolError("a file placeholder must stream exactly one file")
    return os.path.join(folder, names[0])


def check_request(request: dict[str, Any]) -> tuple[str, list[str], list[str]]:
    """(verb, argv, placeholder kinds) of a request record, refusing what
    could name a place of the service's own."""
    if request.get("type") != "request":
        raise protocol.ProtocolError(f"expected a request record, got '{request.get('type')}'")
    if request.get("version") != protocol.VERSION:
        raise protocol.ProtocolError(f"protocol version {request.get('version')!r} is not spoken here; "
                                     f"this service speaks version {protocol.VERSION}")
    verb, argv, files = request.get("verb"), request.get("argv"), request.get("files", [])
    if not isinstance(verb, str) or verb not in ADMIN_VERBS:
        raise UsageError(f"'{verb}' is not a verb the hills service answers",
                         hint="it answers " + ", ".join(sorted(ADMIN_VERBS)))
    if not isinstance(argv, list) or not all(isinstance(arg, str) for arg in argv) or len(argv) > 1000:
        raise protocol.ProtocolError("argv must be a list of at most 1000 strings")
    if not isinstance(files, list) or not all(kind in ("dir", "file") for kind in files) or len(files) > 100:
        raise protocol.ProtocolError("files must be a list of 'dir' or 'file', at most 100")
    placeholders = {f"@{index}" for index in range(len(files))}
    for arg in argv:
        if arg in placeholders:
            continue
        if any(arg == name or arg.startswith(name + "=") or (len(name) == 2 and arg.startswith(name))
               for name in REFUSED_OPTIONS):
            raise UsageError(f"option '{arg}' is not taken through the hills service",
                             hint="the client writes -o FILE itself; run hills verify --export locally")
        if "/" in arg or arg in (".", "..") or arg.startswith("~"):
            raise UsageError(f"argument '{arg}' looks like a path; the hills service opens no path a caller names",
                             hint="name hills by name; the client streams the folders and files you pass")
    if verb == "commit" and (files != ["file"] or argv != ["@0"]):
        raise protocol.ProtocolError("a commit request streams exactly one bundle")
    return verb, argv, files


def _import_version(layout: Layout, bundle_path: str) -> int:
    """Take a committed version an admin sent (a hills bundle) into the
    service: its git objects into the service's copy of the hill, its
    private and blob data into the vault, checked against the tree hash
    and the locks before anything changes."""
    from . import bundle, state
    from .commands.output import emit, say
    from .names import validate_name

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
        bundle._register(name, target, result["tree_hash"])
    say(f"hills service: hill '{name}' at tree {result['tree_hash'][:12]} is served "
        f"({len(data)} private and blob files in the vault)")
    emit(result["tree_hash"])
    return 0


def _vault_import(layout: Layout, hill_dir: str) -> list[str]:
    """Keep every private file and blob of a staged hill once in the vault,
    by digest, the hill's copy a hard link to it."""
    from . import locks

    data = []
    for lock_name in (locks.PRIVATE_LOCK, locks.BLOBS_LOCK):
        path = os.path.join(hill_dir, lock_name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            entries = locks.decode(handle.read(), lock_name)
        for rel, entry in entries.items():
            stored = os.path.join(layout.vault, entry["digest"].removeprefix("blake3:"))
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
    from . import state

    if kept:
        state.atomic_write(shallow, "".join(f"{commit}\n" for commit in kept))
    else:
        os.unlink(shallow)


def _update_copy(target: str, staged: str, commit: str, data: list[str]) -> None:
    """Move the service's copy of a hill to a new version: its objects
    fetched from the staged copy (the old history and notes stay), its
    files and data replaced."""
    from . import git, hill as hill_module, locks

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

