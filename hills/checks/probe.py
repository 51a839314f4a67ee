"""The leak probe of `hills check`: evaluate a copy of the hill's example
submission whose code carries a payload that tries every way out of its
confinement, and fail the check on each way that worked.

The payload (standard-library Python, put into every file of the copy
that could be run, as a shell line in a shell script, and into the names
evaluators run when the copy lacks them) tries to read every private file
by relative and absolute path, by walking up and through /proc; to read
the machine key and list machine state, $HOME and the user's project; to
write into the hill, private/ and the result; to reach a TCP and a unix
socket the probe listens on; and to leave a process behind. It writes what
worked, never what it read (a path, a method, a byte count), to files
named with a random token, which the probe collects after the eval. The
eval runs through the real pipeline (`evaluate.evaluate_unlogged`) in a
run folder of its own, removed after: nothing is logged or signed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile

from .shared import Result

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any

NAME = "leak probe"
# The names every file and process of one probe carries, with its token.
MARK = ".hills-probe-"
# Private files named in the payload, at most: the private folder itself
# is tried on every path, so a larger hill is still probed on each.
MAX_PRIVATE = 2000
HINT_FUNCTION = "start submitted code with hills.sdk.run_submission, or declare a solution phase in hill.yaml"
HINT_COMMAND = ("start submitted code with \"$HILLS_PYTHON\" (confined whatever its arguments), "
                "or declare a solution phase in hill.yaml")

# The payload. It runs once per process, inside whatever the evaluator
# started, and must never change what the file it heads does: every step is
# guarded, and it removes whatever it wrote but its findings (the process
# it leaves behind is the probe's to find and kill).
PAYLOAD = r'''
def _hills_probe(C, __file__):
    import json, os, socket, stat, sys
    flag = "_hills_probe_" + C["token"]
    if getattr(sys, flag, False):
        return
    setattr(sys, flag, True)
    records, seen, tried = [], set(), [0]
    files = {tuple(ident): rel for rel, ident in C["private"]}
    private_dir = tuple(C["private_dir"]) if C["private_dir"] else None
    key_id = tuple(C["key_id"]) if C["key_id"] else None

    def note(kind, what, path, method, count):
        if (kind, what, method) not in seen:
            seen.add((kind, what, method))
            records.append({"kind": kind, "what": what, "path": path, "method": method, "bytes": count})

    def read(path, method):
        """Read `path` if it is a private file or the key; nothing else is
        opened (a device behind another process's descriptor may act on open)."""
        tried[0] += 1
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return
        ident = (info.st_dev, info.st_ino)
        what = "key" if ident == key_id else ("private/" + files[ident]) if ident in files else None
        if not what or not stat.S_ISREG(info.st_mode):
            return
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) == ident:
                note("read", what, path, method, len(os.read(fd, 65536)))
        except OSError:
            pass
        finally:
            os.close(fd)

    def folder(path, method):
        """`path`, if it is the hill's private/: list it and read every file."""
        tried[0] += 1
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return
        if private_dir is None or (info.st_dev, info.st_ino) != private_dir:
            return
        try:
            note("list", "private/", path, method, len(os.listdir(path)))
        except OSError:
            pass
        for rel, _ident in C["private"]:
            read(os.path.join(path, rel), method)

    relative = C["relative"]
    for rel in relative:
        folder(rel, "by relative path")
    own = os.path.dirname(os.path.abspath(__file__)) if __file__ else None
    if own:
        for rel in relative:
            folder(os.path.join(own, rel), "relative to its own file")
    for hill in C["hill_paths"]:
        folder(os.path.join(hill, "private"), "by absolute path")
    for key in C["key_paths"] + [os.path.join(os.environ.get("HILLS_HOME", "/nonexistent"), "key")]:
        read(key, "by absolute path")
    try:
        here = os.getcwd()
    except OSError:
        here = own or "/"
    bases = set()
    for start in {here, own or here}:
        current = start
        while True:
            for sub in ("private", "hill/private", "problem/private"):
                folder(os.path.join(current, sub), "by walking up from its folder")
            try:
                for name in os.listdir(os.path.join(current, ".hills")):
                    folder(os.path.join(current, ".hills", name, "private"), "by walking up from its folder")
            except OSError:
                pass
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    for name, value in os.environ.items():
        if name.startswith(("HILLS_", "HILLCLIMB_")) or name in ("PWD", "OLDPWD"):
            bases.update(("its environment", part) for part in value.split(os.pathsep) if part.startswith("/"))
    try:
        pids = [pid for pid in os.listdir("/proc") if pid.isdigit()][:4096]
    except OSError:
        pids = []
    for pid in pids:
        proc = "/proc/" + pid
        for rel in relative:
            folder(proc + "/cwd/" + rel, "through /proc/PID/cwd")
        for hill in C["hill_paths"]:
            folder(proc + "/root" + hill + "/private", "through /proc/PID/root")
        for key in C["key_paths"]:
            read(proc + "/root" + key, "through /proc/PID/root")
        try:
            fds = os.listdir(proc + "/fd")[:1024]
        except OSError:
            fds = []
        for fd in fds:
            try:
                target = os.readlink(proc + "/fd/" + fd)
            except OSError:
                continue
            if target.startswith("/"):
                read(proc + "/fd/" + fd, "through /proc/PID/fd/N")
        for part, label in (("environ", "/proc/PID/environ"), ("cmdline", "/proc/PID/cmdline")):
            try:
                with open(proc + "/" + part, "rb") as handle:
                    text = handle.read(65536).decode("utf-8", "replace")
            except OSError:
                continue
            for word in text.replace("\0", " ").replace('"', " ").replace("=", " ").replace(",", " ").split():
                for piece in word.split(":"):
                    if piece.startswith("/") and len(bases) < 512:
                        bases.add(("paths read in " + label, piece))
    for label, base in sorted(bases):
        for sub in ("private", "hill/private", "problem/private", "../hill/private"):
            folder(os.path.join(base, sub), "through " + label)
    def same(path, ident):
        """Whether `path` is the folder `ident` names, not a stand-in of the view."""
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            return False
        return ident is not None and [info.st_dev, info.st_ino] == ident

    for label, path, ident, ignore in C["listings"]:
        tried[0] += 1
        if not same(path, ident):
            continue
        try:
            names = [name for name in os.listdir(path) if name not in ignore]
        except OSError:
            continue
        if names:
            note("list", label, path, "by absolute path", len(names))

    def write(label, path, ident):
        tried[0] += 1
        if not path or not same(os.path.dirname(path), ident):
            return
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                os.close(fd)
                note("write", label, path, "by absolute path", 0)
            except OSError:
                pass
            return
        except OSError:
            return
        os.close(fd)
        note("write", label, path, "by absolute path", 0)
        try:
            os.unlink(path)
        except OSError:
            pass

    mark = C["mark"] + C["token"]
    for hill in C["hill_paths"]:
        write("the hill folder", os.path.join(hill, mark + "-write"), C["hill_id"])
        write("private/", os.path.join(hill, "private", mark + "-write"), private_dir and list(private_dir))
    write("the result", os.environ.get("HILLS_RESULT"), C["run_id"])
    for label, path in C["writes"]:
        write(label, path, C["run_id"])
    for family, address in ((socket.AF_INET, C["tcp_port"] and ("127.0.0.1", C["tcp_port"])),
                            (socket.AF_UNIX, C["unix_path"])):
        if not address:
            continue
        tried[0] += 1
        try:
            with socket.socket(family, socket.SOCK_STREAM) as client:
                client.settimeout(0.5)
                client.connect(address)
        except (OSError, ValueError):
            pass
    tried[0] += 1
    try:
        child = os.fork()
        if child == 0:
            try:
                os.setsid()
                if os.fork() == 0:
                    null = os.open(os.devnull, os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(null, fd)
                    os.closerange(3, 65536)
                    env = {"HILLS_PROBE_TOKEN": C["token"], "PATH": "/usr/bin:/bin"}
                    for sleep in ("/bin/sleep", "/usr/bin/sleep"):
                        try:
                            os.execve(sleep, [mark, "30"], env)
                        except OSError:
                            pass
            finally:
                os._exit(0)
        os.waitpid(child, 0)
    except OSError:
        pass
    if "hills.shim" in sys.modules:
        how = "in-process"
    elif "HILLS_SUBMISSION_SANDBOX" in os.environ:
        how = "evaluator"
    else:
        how = "hills"
    argv = list(getattr(sys, "orig_argv", [sys.executable] + sys.argv))
    argv = [os.path.basename(argv[0])] + argv[1:4] if argv else []
    report = json.dumps({"token": C["token"], "how": how, "argv": argv, "tried": tried[0], "found": records})
    places = [C["findings"], here, own, os.environ.get("TMPDIR") or "/tmp"]
    for place in places:
        if not place:
            continue
        try:
            with open(os.path.join(place, mark + "-" + str(os.getpid()) + ".json"), "w") as handle:
                handle.write(report)
        except OSError:
            pass


try:
    _hills_probe(__PROBE_CONFIG__, __file__)
except Exception:
    pass
'''


class Example:
    """The copy of the example submission the probe evaluates: where it is,
    which files carry the payload, and why it could not be made, if so."""

    def __init__(self, folder: str | None, carriers: list[str], problem: str | None = None) -> None:
        self.folder, self.carriers, self.problem = folder, carriers, problem


class Finding:
    """One way out that worked: what was reached, how, and by which path."""

    def __init__(self, kind: str, what: str, path: str, method: str, count: int = 0) -> None:
        self.kind, self.what, self.path, self.method, self.count = kind, what, path, method, count

    def phrase(self) -> str:
        verb = {"read": "read", "list": "listed", "write": "wrote into", "connect": "connected to",
                "process": "left behind"}.get(self.kind, self.kind)
        if self.kind == "read" and self.what == "key":
            return f"read the machine key {self._how()}"
        if self.kind in ("connect", "process"):
            return f"{verb} {self.what}"
        return f"{verb} {self.what} {self._how()}"

    def rank(self) -> int:
        """Worst first: private data and the key, then writes, sockets and
        processes, then listings."""
        if self.kind == "read":
            return 0 if self.what.startswith("private/") else 1
        return {"write": 2, "connect": 3, "process": 4}.get(self.kind, 5 if self.what == "private/" else 6)

    def _how(self) -> str:
        if self.method == "by relative path":
            return f"by relative path {self.path}"
        return f"{self.method} ({self.path})"


def example_folder(hill_dir: str) -> str | None:
    """The hill's first example submission: the first folder of examples/."""
    examples = os.path.join(hill_dir, "examples")
    try:
        names = sorted(name for name in os.listdir(examples) if not name.startswith("."))
    except OSError:
        return None
    for name in names:
        if os.path.isdir(os.path.join(examples, name)) and not os.path.islink(os.path.join(examples, name)):
            return os.path.join(examples, name)
    return None


STAND_IN_KEY = "checks.solution"


@contextlib.contextmanager
def checked_example(spec: Mapping[str, Any], hill_dir: str) -> Iterator[tuple[str | None, str | None]]:
    """(the example folder the leak probe and the cheat corpus evaluate,
    or None; why it cannot be made, or None): the hill's first example,
    or, when hill.yaml's `checks.solution` names a stand-in, a copy of it
    whose solution file (solution_name) is the stand-in, removed after."""
    source = example_folder(hill_dir)
    stand_in = (spec.get("checks") or {}).get("solution")
    if source is None or not stand_in:
        yield source, None
        return
    path = os.path.join(hill_dir, stand_in)
    private = os.path.realpath(os.path.join(hill_dir, "private"))
    real = os.path.realpath(path)
    if os.path.islink(path) or not os.path.isfile(path) or real == private or real.startswith(private + os.sep):
        yield None, (f"{STAND_IN_KEY} in hill.yaml names '{stand_in}', which is not a plain file of the hill "
                     "outside private/")
        return
    work = tempfile.mkdtemp(prefix="hills-stand-in-")
    try:
        target = os.path.join(work, os.path.basename(source))
        shutil.copytree(source, target, symlinks=True)
        solution = os.path.join(target, solution_name(spec, hill_dir))
        if os.path.lexists(solution) and (os.path.islink(solution) or not os.path.isfile(solution)):
            os.unlink(solution) if not os.path.isdir(solution) or os.path.islink(solution) else shutil.rmtree(solution)
        os.makedirs(os.path.dirname(solution), exist_ok=True)
        shutil.copyfile(path, solution)
        shutil.copymode(path, solution)
        yield target, None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def solution_name(spec: Mapping[str, Any], hill_dir: str) -> str:
    """The file the hill runs as the submission's solution: `solution: when:`,
    else the first script of `solution: run:` that is the submission's (not
    a file of the hill, not under ./problem or ./data), else `solution.py`,
    where `$HILLS_SOLUTION` points for command verifiers."""
    solution = spec.get("solution") or {}
    when = solution.get("when") if isinstance(solution, dict) else None
    if isinstance(when, str) and when:
        return when
    run = solution.get("run") if isinstance(solution, dict) else None
    for part in run if isinstance(run, list) else []:
        if not isinstance(part, str) or part.startswith(("-", "{", "/")) or "{" in part:
            continue
        # ./problem and ./data (a command verifier's), ../hill (a function
        # evaluator's) are the hill's own folders, not the submission's.
        if part.split("/", 1)[0] in ("problem", "data") or part.startswith("../hill/") \
                or os.path.exists(os.path.join(hill_dir, part)):
            continue
        if "." in os.path.basename(part):
            return part
    return "solution.py"


def prefix_line(config: Mapping[str, Any]) -> str:
    """The one line that heads each carrier: it runs the payload, baked with
    `config`, in a namespace of its own."""
    import base64
    import zlib

    source = "import json\n" + PAYLOAD.replace("__PROBE_CONFIG__", "json.loads(%r)" % json.dumps(config))
    packed = base64.b64encode(zlib.compress(source.encode("utf-8"), 9)).decode("ascii")
    return ("exec(__import__('zlib').decompress(__import__('base64').b64decode('%s')).decode(), "
            "{'__file__': globals().get('__file__') or '', '__name__': '__hills_probe__'})  "
            "# hills check: leak probe\n" % packed)


def insert_payload(text: str, line: str) -> str:
    """`text` with `line` inserted where code may start: after a first-line
    `#!` or encoding comment, the module's docstring and any `from
    __future__` imports, so the file runs and reads as before."""
    import ast

    lines = text.splitlines(keepends=True)
    at = 0
    while at < min(2, len(lines)) and lines[at].startswith("#"):
        at += 1
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        for number, node in enumerate(tree.body):
            docstring = number == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str)
            future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
            if not (docstring or future):
                break
            at = max(at, node.end_lineno or node.lineno)
    if at and at <= len(lines) and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join(lines[:at]) + line + "".join(lines[at:])


# The names evaluators give the file they run, put into the copy when it
# lacks them: an evaluator that runs `run.py` itself is caught even when
# the author's example has none.
RUN_NAMES = ("solution.py", "run.py", "main.py", "run.sh")
SHELL_SUFFIXES = (".sh", ".bash")


def shell_line(line: str) -> str:
    """The payload as a line of a shell script: the Python line, run by
    the real interpreter of the eval (the python on PATH may be the
    confined one, which would hide what the script itself can reach)."""
    import shlex

    return ('for _hills_py in "$HILLS_REAL_PYTHON" python3 python; do command -v "$_hills_py" >/dev/null 2>&1 && '
            '{ "$_hills_py" -c ' + shlex.quote(line) + ' >/dev/null 2>&1; break; }; done  # hills check: leak probe\n')


def _carries(path: str, name: str) -> str | None:
    """How the file at `path` runs, if it can: 'python', 'shell', or None."""
    if name.endswith(".py"):
        return "python"
    try:
        with open(path, "rb") as handle:
            first = handle.readline(200)
    except OSError:
        return None
    if name.endswith(SHELL_SUFFIXES) or (first.startswith(b"#!") and any(
            shell in first for shell in (b"sh", b"bash", b"dash", b"zsh"))):
        return "shell"
    if first.startswith(b"#!") and b"python" in first:
        return "python"
    return None


def make_example(source: str, target: str, solution: str, line: str) -> Example:
    """Copy the example `source` to `target` and put the payload into every
    file of it that could be run (each Python file, shell script and file
    with a shebang), and into the solution file and the names evaluators
    run (RUN_NAMES) when the copy lacks them."""
    shutil.copytree(source, target, symlinks=True)
    carriers: list[str] = []
    for current, dirs, files in os.walk(target):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        for name in files:
            path = os.path.join(current, name)
            kind = None if os.path.islink(path) else _carries(path, name)
            if kind is None:
                continue
            with open(path, encoding="utf-8", errors="surrogateescape") as handle:
                text = handle.read()
            if kind == "python":
                text = insert_payload(text, line)
            else:
                cut = text.index("\n") + 1 if text.startswith("#!") and "\n" in text else 0
                text = text[:cut] + shell_line(line) + text[cut:]
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
                handle.write(text)
            carriers.append(os.path.relpath(path, target))
    for name in dict.fromkeys((solution, *RUN_NAMES)):
        path = os.path.join(target, name)
        if os.path.lexists(path) or not name.endswith((".py", *SHELL_SUFFIXES)):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(line if name.endswith(".py") else "#!/bin/sh\n" + shell_line(line))
        carriers.append(name)
    if not carriers:
        return Example(target, [], f"nowhere to put the payload: the example holds no Python file and the "
                                   f"solution '{solution}' is not one")
    return Example(target, sorted(carriers))


def _identity(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_dev, info.st_ino]


def private_names(hill_dir: str) -> list[str]:
    """The paths inside private/ of its files, in order, at most MAX_PRIVATE."""
    root = os.path.join(hill_dir, "private")
    found: list[str] = []
    for current, dirs, files in os.walk(root):
        dirs.sort()
        found += [os.path.relpath(os.path.join(current, name), root) for name in sorted(files)]
        if len(found) >= MAX_PRIVATE:
            return found[:MAX_PRIVATE]
    return found


def private_files(hill_dir: str) -> list[tuple[str, list[int]]]:
    """(path inside private/, [device, inode]) of each private file: the
    payload knows a private file by its identity, so a file of the same
    name elsewhere is not taken for it."""
    root = os.path.join(hill_dir, "private")
    found: list[tuple[str, list[int]]] = []
    for rel in private_names(hill_dir):
        ident = _identity(os.path.join(root, rel))
        if ident is not None and os.path.isfile(os.path.join(root, rel)):
            found.append((rel, ident))
    return found


def project_folder(hill_dir: str) -> str:
    """The user's project: the folder holding the hill's `.hills/`."""
    parent = os.path.dirname(os.path.abspath(hill_dir))
    return os.path.dirname(parent) if os.path.basename(parent) == ".hills" else parent


def user_homes() -> list[str]:
    """The user's home: `$HOME`, and the one the password database names
    when it differs (a caller may have set HOME elsewhere)."""
    homes = [os.path.expanduser("~")]
    with contextlib.suppress(ImportError, KeyError):
        import pwd

        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    return list(dict.fromkeys(homes))


def _stubs(folder: str, mounts: Iterable[str]) -> list[str]:
    """The names in `folder` that a sandbox makes on the way to a mount:
    seeing them is no leak."""
    real = os.path.realpath(folder)
    names = set()
    for mount in mounts:
        mount = os.path.realpath(mount)
        if mount.startswith(real.rstrip("/") + "/"):
            names.add(mount[len(real.rstrip("/")) + 1:].split("/", 1)[0])
    return sorted(names)


def _both(path: str) -> list[str]:
    """`path` and its real path, once each."""
    return list(dict.fromkeys([os.path.abspath(path), os.path.realpath(path)]))


class Listeners:
    """The TCP and unix sockets submitted code must not reach; the kernel
    queues every connection, counted after the eval, not on the payload's word."""

    def __init__(self, folder: str) -> None:
        import socket

        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(64)
        self.port = self.tcp.getsockname()[1]
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix_path: str | None = os.path.join(folder, "probe.sock")
        try:
            self.unix.bind(self.unix_path)
            os.chmod(self.unix_path, 0o777)
            self.unix.listen(64)
        except OSError:  # a temporary folder too deep for a socket's name: the TCP one is still tried
            self.unix_path = None

    def accepted(self) -> list[Finding]:
        found = []
        listening = [(self.tcp, f"a TCP socket on 127.0.0.1:{self.port}")]
        if self.unix_path:
            listening.append((self.unix, f"a unix socket at {self.unix_path}"))
        for listener, what in listening:
            listener.setblocking(False)
            count = 0
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = listener.accept()
                    connection.close()
                    count += 1
            if count:
                found.append(Finding("connect", what, what, "connect", count))
        return found

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


def leftovers(token: str) -> list[int]:
    """The processes carrying the probe's token, alive after the eval."""
    needle = (MARK + token).encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{pid}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state not in (b"Z", b"X"):
            found.append(int(pid))
    return found


def kill_leftovers(token: str) -> list[Finding]:
    """Report and kill the processes submitted code left behind. A process
    of a sandbox that is being torn down is given a moment to go first."""
    import signal
    import time

    pids = leftovers(token)
    if pids:
        time.sleep(0.2)
        pids = leftovers(token)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return [Finding("process", f"a process (pid {pid}, killed by hills check)", str(pid), "setsid")
            for pid in pids]


def collect(token: str, places: Iterable[str], trees: Iterable[str]) -> list[dict[str, Any]]:
    """Every findings file of this probe in `places` and under `trees` (never
    through a link), read and removed."""
    prefix = MARK + token + "-"
    paths: list[str] = []
    for place in places:
        with contextlib.suppress(OSError):
            paths += [os.path.join(place, name) for name in os.listdir(place) if name.startswith(prefix)]
    for tree in trees:
        for current, _dirs, files in os.walk(tree):
            paths += [os.path.join(current, name) for name in files if name.startswith(prefix)]
    reports = []
    for path in dict.fromkeys(paths):
        try:
            with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), encoding="utf-8") as handle:
                report = json.loads(handle.read(4 * 1024 * 1024))
        except (OSError, ValueError):
            continue
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if isinstance(report, dict) and report.get("token") == token:
            reports.append(report)
    return reports


def check_params(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The `-p NAME=VALUE` texts of the params whose `check:` value the
    evals of `hills check` use instead of their default."""
    import json

    return tuple(f"{name}={json.dumps(param['check'])}" for name, param in (spec.get("params") or {}).items()
                 if isinstance(param, dict) and "check" in param)


@contextlib.contextmanager
def probe_run_dir(hill_name: str) -> Iterator[str]:
    """A run folder for the probe's eval where evals make theirs (a dot name:
    pruning and listings skip it), removed after with the runs folder when
    the probe made it."""
    from ..run import folders

    with folders.hidden_run_dir(hill_name, ".probe-") as run_dir:
        yield run_dir


def digest_inputs(hill_dir: str) -> dict[str, Any]:
    """What the probe's verdict depends on beyond the hill's files, the tool
    and bubblewrap (which the gate digest covers already): the names of
    the private files it tries, and where the user's home, project and
    temporary folder are."""
    temp = tempfile.gettempdir()
    return {"private": private_names(hill_dir), "home": [_both(home) for home in user_homes()],
            "project": _both(project_folder(hill_dir)), "temp": _both(temp)}


def leak_probe(spec: Mapping[str, Any], hill_name: str, hill_dir: str, python: str) -> Result:
    """The leak probe's line of `hills check`. A finding fails it, unless the
    hill runs without bubblewrap (`sandbox: none`, or bubblewrap not usable
    here): then nothing confines the submission anyway, and the line is a
    warning that names what leaked."""
    with checked_example(spec, hill_dir) as (source, problem):
        if problem is not None:
            return Result(NAME, "fail", problem)
        if source is None:
            return Result(NAME, "warn", "no example submission folder in examples/ to probe with")
        return _probe(spec, hill_name, hill_dir, python, source)


def _probe(spec: Mapping[str, Any], hill_name: str, hill_dir: str, python: str, source: str) -> Result:
    """The leak probe of the example folder `source`."""
    from ..run import sandbox

    boundary = spec.get("sandbox") != sandbox.LEVEL_NONE and sandbox.bwrap_works()
    work = tempfile.mkdtemp(prefix="hills-probe-")
    token = os.urandom(12).hex()
    try:
        findings_dir = os.path.join(work, "findings")
        os.mkdir(findings_dir)
        listeners = Listeners(work)
        try:
            with probe_run_dir(hill_name) as run_dir:
                config = payload_config(spec, hill_dir, python, run_dir, token, findings_dir, listeners)
                example = make_example(source, os.path.join(work, "example"),
                                       solution_name(spec, hill_dir), prefix_line(config))
                if example.problem:
                    return Result(NAME, "warn", example.problem)
                problem, stopped = _evaluate(hill_dir, example.folder or "", run_dir, check_params(spec))
                reports = collect(token, [findings_dir, tempfile.gettempdir(), os.environ.get("TMPDIR", ""), "/tmp"],
                                  [run_dir, work])
                extra = listeners.accepted() + kill_leftovers(token)
                shorten(reports, {run_dir: "<run folder>", work: "<probe folder>"})
        finally:
            listeners.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if problem is not None:
        return Result(NAME, "warn", f"the example could not be evaluated: {problem}")
    if stopped:
        # The evaluator itself ran a file of the example in the scoring
        # phase, where nothing confines it: stopped there, and fatal here.
        hint = HINT_COMMAND if spec.get("evaluator", {}).get("shape") == "command" else HINT_FUNCTION
        return Result(NAME, "fail", f"the evaluator ran the example's code itself: {stopped}"
                                    "\n        hint: " + hint)
    return verdict(spec, reports, extra, boundary)


def shorten(reports: list[dict[str, Any]], names: Mapping[str, str]) -> None:
    """Name the folders that are gone once the probe ends by what they were."""
    for report in reports:
        for item in report.get("found") or []:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                for folder, name in names.items():
                    for form in _both(folder):
                        if item["path"].startswith(form + "/"):
                            item["path"] = name + item["path"][len(form):]


def payload_config(spec: Mapping[str, Any], hill_dir: str, python: str, run_dir: str, token: str,
                   findings_dir: str, listeners: Listeners) -> dict[str, Any]:
    """What the payload is baked with: the paths it tries and where it writes."""
    from ..base import state
    from ..run.env import sdk_path

    machine = state.home()
    mounts = [machine, hill_dir, run_dir, sdk_path(), os.path.dirname(os.path.dirname(python)),
              os.path.dirname(os.path.dirname(os.path.realpath(python))), tempfile.gettempdir()]
    # The command layout's ./problem first, then the function layout's ../hill.
    relative = ["problem/private", "../problem/private", "../../problem/private", "private", "../private",
                "../../private", "../../../private", "hill/private", "../hill/private", "../../hill/private"]
    writes = [("the run folder", os.path.join(run_dir, MARK + token + "-write"))]
    if spec.get("evaluator", {}).get("shape") == "command":
        writes.append(("the result", os.path.join(run_dir, "result.json")))
    private = private_files(hill_dir)
    return {
        "token": token, "mark": MARK, "findings": findings_dir, "relative": relative,
        "private": private, "private_dir": _identity(os.path.join(hill_dir, "private")) if private else None,
        "hill_paths": _both(hill_dir), "key_paths": _both(state.key_path()),
        "key_id": _identity(state.key_path()), "writes": writes,
        "hill_id": _identity(hill_dir), "run_id": _identity(run_dir),
        "listings": [(label, path, _identity(path), _stubs(path, mounts))
                     for label, folder in [("machine state", machine)]
                     + list(zip(("$HOME", "the user's home"), user_homes()))
                     + [("the project folder", project_folder(hill_dir))]
                     for path in _both(folder)],
        # A hill with `network: true` may reach the network, loopback included.
        "tcp_port": None if spec.get("network") else listeners.port, "unix_path": listeners.unix_path,
    }


def _evaluate(hill_dir: str, submission: str, run_dir: str,
              params: tuple[str, ...] = ()) -> tuple[str | None, str | None]:
    """Evaluate `submission` against the hill's working tree in `run_dir`,
    through the eval pipeline, unlogged: (why it was refused, or None;
    why the scoring phase's guard stopped it, or None)."""
    from ..run import evaluate
    from ..base.errors import HillsError
    from ..disk.hill import Hill

    request = evaluate.EvalRequest(hill=Hill(hill_dir), submission=submission, current=True, repeat=1,
                                   param_texts=params)
    try:
        report = evaluate.evaluate_unlogged(request, run_dir)
    except HillsError as exc:
        return exc.message, None
    reason = report.get("reason")
    stopped = reason if report.get("status") == "buggy" and isinstance(reason, str) \
        and reason.startswith("the scoring phase tried to run") else None
    return None, stopped


def _findings(reports: list[dict[str, Any]]) -> Iterator[tuple[str, Finding]]:
    for report in reports:
        for item in report.get("found") or []:
            if isinstance(item, dict):
                yield str(report.get("how")), Finding(str(item.get("kind")), str(item.get("what")),
                                                      str(item.get("path")), str(item.get("method")),
                                                      int(item.get("bytes") or 0))


def started(how: str, argv: list[str], shape: str, boundary: bool) -> str:
    """How the submitted code that reached a path was started, in words."""
    shown = " ".join(argv)
    if how == "in-process":
        return "imported into the evaluator's own process, not started through hills.sdk"
    if how == "evaluator" and shape == "command":
        return f"started by the verifier itself (as '{shown}'), not through the confined interpreter"
    if how == "evaluator":
        return f"started by the evaluator itself (as '{shown}'), not through hills.sdk"
    if how != "hills":
        return "started where it could record nothing, so how is not known"
    return "started by hills" + (", confined" if boundary else ", without bubblewrap")


def verdict(spec: Mapping[str, Any], reports: list[dict[str, Any]], extra: list[Finding], boundary: bool) -> Result:
    """The probe's line from what the payload and the probe found."""
    shape = spec.get("evaluator", {}).get("shape", "function")
    tried = sum(int(report.get("tried") or 0) for report in reports)
    found = list(_findings(reports))
    network = "; the network is allowed by hill.yaml, so not tried" if spec.get("network") else ""
    if not reports and not extra:
        return Result(NAME, "ok", "the evaluator ran none of the example's code")
    if not found and not extra:
        return Result(NAME, "ok", f"{tried} paths tried, none reached; submitted code "
                                  + started("hills", [], shape, boundary) + network)
    leaking: dict[str, Any] = next((r for r in reports if r.get("found")), reports[0] if reports else {})
    ordered = sorted([finding for _how, finding in found] + extra, key=Finding.rank)
    phrases = list(dict.fromkeys(finding.phrase() for finding in ordered))
    shown = "; ".join(phrases[:4]) + (f"; and {len(phrases) - 4} more" if len(phrases) > 4 else "")
    how = started(str(leaking.get("how")), [str(word) for word in leaking.get("argv") or []], shape, boundary)
    detail = f"submitted code {shown}; {how}"
    if boundary:
        return Result(NAME, "fail", detail + "\n        hint: " + (HINT_COMMAND if shape == "command"
                                                                   else HINT_FUNCTION))
    reason = "sandbox: none in hill.yaml" if spec.get("sandbox") == "none" else "bubblewrap is not usable here"
    return Result(NAME, "warn", f"{detail} ({reason}: nothing confines submitted code)"
                                "\n        hint: install bubblewrap (Debian package 'bubblewrap')"
                                + (" and remove 'sandbox: none' from hill.yaml" if spec.get("sandbox") == "none"
                                   else ""))
