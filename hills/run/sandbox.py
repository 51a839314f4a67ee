"""Isolation on bubblewrap: what an evaluator, and the submitted code it
starts, can see and write.

The evaluator sees the machine read-only, the hill (private/ included)
read-only, its run folder writable, no machine state (key, logs, other
environments) and, unless hill.yaml says `network: true`, no network. It
has its own pid namespace and dies with hills.

Submitted code gets less: no private/ and no hill at all, no run folder but
its own snapshot (writable) and a scratch folder, and limits on time and
memory. It is started either by the `hills-run-submission` wrapper that
command verifiers reach as `$HILLS_PYTHON $HILLS_SOLUTION`, or by a
function evaluator through `hills.sdk.run_submission`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess

from ..base.errors import EnvironmentProblem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

LEVEL_BWRAP = "bwrap"
LEVEL_NONE = "none"
_probe: dict[str, bool] = {}


HINT = ("install bubblewrap (Debian package 'bubblewrap'), owned by root; or, where the hill's author accepts "
        "that submitted code runs unconfined, declare 'sandbox: none' in its hill.yaml")
_found: dict[tuple[str | None, str | None], tuple[str | None, str | None]] = {}


def bwrap_binary() -> str | None:
    """The bubblewrap hills runs, by its real path: HILLS_BWRAP, else the
    first `bwrap` on PATH, when it is one only root could have put there
    (`trust_problem`); None otherwise (`bwrap_problem` says why)."""
    return _find()[0]


def _find() -> tuple[str | None, str | None]:
    """(real path, None) for a trusted bubblewrap, or (None, why not);
    remembered per HILLS_BWRAP and PATH: a handful of stats once a process."""
    named, search = os.environ.get("HILLS_BWRAP") or None, os.environ.get("PATH")
    key = (named, None if named else search)
    if key not in _found:
        _found[key] = _located(named)
    return _found[key]


def _located(named: str | None) -> tuple[str | None, str | None]:
    if named is None:
        named = which("bwrap")
        if named is None:
            return None, "bubblewrap is not installed: no 'bwrap' on PATH"
        source = "the first 'bwrap' on PATH"
    else:
        if not os.path.exists(named):
            return None, f"bubblewrap '{named}' (HILLS_BWRAP) does not exist"
        source = "HILLS_BWRAP"
    real_path = os.path.realpath(named)
    problem = trust_problem(real_path)
    if problem:
        return None, f"bubblewrap '{named}' ({source}) is not trusted: {problem}"
    return real_path, None


def trust_problem(path: str) -> str | None:
    """Why the file at real path `path` may not be the bubblewrap every
    eval's confinement rests on, or None: it must be a regular file owned
    by root that neither its group nor others may write, in folders up to
    / owned by root and likewise (or sticky), so that only root can have
    put it there or change it (a climber's `bwrap` that runs its argument
    unconfined passes a probe)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"'{path}' cannot be read ({exc.strerror})"
    if (st.st_mode & 0o170000) != 0o100000:
        return f"'{path}' is not a regular file"
    if st.st_uid != 0:
        return f"'{path}' is owned by uid {st.st_uid}, not by root"
    if st.st_mode & 0o022:
        return f"'{path}' is writable by its group or others"
    folder = os.path.dirname(path)
    while True:
        try:
            st = os.stat(folder)
        except OSError as exc:
            return f"its folder '{folder}' cannot be read ({exc.strerror})"
        if st.st_uid != 0:
            return f"its folder '{folder}' is owned by uid {st.st_uid}, not by root"
        # A sticky folder (/tmp, /nix/store) lets no one but root rename or
        # remove what root put there.
        if st.st_mode & 0o022 and not st.st_mode & 0o1000:
            return f"its folder '{folder}' is writable by its group or others"
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def bwrap_problem() -> str | None:
    """Why submitted code cannot run confined here, or None when it can:
    no bubblewrap, one not trusted, or one that cannot build a namespace."""
    binary, problem = _find()
    if binary is None:
        return problem
    if not bwrap_works():
        return (f"bubblewrap '{binary}' cannot build a namespace here (inside a container or another "
                "sandbox that forbids user namespaces?)")
    return None


def which(name: str) -> str | None:
    """shutil.which for a plain command name, without importing shutil
    (its compressors cost every eval a few ms)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder, name)
        if os.path.exists(candidate) and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def bwrap_works() -> bool:
    """Whether a trusted bwrap exists and can build a namespace here (probed once)."""
    binary = bwrap_binary()
    if not binary:
        return False
    if binary not in _probe:
        _probe[binary] = _probe_cached(binary)
    return _probe[binary]


def probe(binary: str | None) -> bool:
    """Whether `binary` can build a namespace here: one run of it, touching no
    machine state (test suites call this while they are being collected)."""
    if not binary:
        return False
    # `true` by its path where it has one: the probe asks about bubblewrap,
    # not about the caller's PATH.
    true = next((path for path in ("/usr/bin/true", "/bin/true") if os.access(path, os.X_OK)), "true")
    try:
        done = subprocess.run([binary, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", true],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _probe_cached(binary: str) -> bool:
    return bool(_remembered(binary)["works"])


def _remembered(binary: str) -> dict[str, Any]:
    """Run the probe and `bwrap --version` once per bwrap binary (by path,
    size and mtime) and remember the answers in machine state, sealed:
    evals run neither."""
    from ..base import state

    try:
        st = os.stat(binary)
    except OSError:
        return {"works": False, "sizes_tmpfs": False}
    identity = [os.path.realpath(binary), st.st_size, st.st_mtime_ns]
    path = os.path.join(state.home(), "cache", "bwrap-probe.json")
    cached = state.sealed_read(path)
    if isinstance(cached, dict) and cached.get("identity") == identity and "sizes_tmpfs" in cached:
        return cached
    found = {"identity": identity, "works": probe(binary), "sizes_tmpfs": _takes_sizes(binary)}
    state.ensure_home()
    state.sealed_write(path, found)
    return found


def level_for(spec: Mapping[str, Any]) -> str:
    """The isolation an eval of this hill gets: `none` where its hill.yaml
    says `sandbox: none`, else `bwrap`, or an EnvironmentProblem (exit 4)
    naming why bubblewrap cannot confine it here. Fail closed: `auto`, the
    default, never runs submitted code unconfined."""
    if spec.get("sandbox", "auto") == LEVEL_NONE:
        return LEVEL_NONE
    problem = bwrap_problem()
    if problem is None:
        return LEVEL_BWRAP
    raise EnvironmentProblem(f"{problem}: hills never runs submitted code unconfined "
                             f"(hill.yaml 'sandbox: {spec.get('sandbox', 'auto')}')", hint=HINT)


def _common(network: bool) -> list[str]:
    binary = bwrap_binary()
    if binary is None:
        raise EnvironmentProblem(_find()[1] or "bubblewrap is not usable here", hint=HINT)
    argv = [binary, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if not network:
        argv.append("--unshare-net")
    return argv


def real(path: str) -> str:
    """Where bwrap mounts `path`: its real path. bwrap resolves a mount
    point inside the new root, where an absolute link on the way (a linked
    HILLS_HOME, HOME or project folder) points nowhere, and a folder hidden
    at its real path is hidden through every link that leads to it."""
    return os.path.realpath(path)


def evaluator_argv(argv: Sequence[str], *, home: str, run_dir: str, run_hill_dir: str, readable: Iterable[str],
                   network: bool, cwd: str, hidden: Iterable[str] = (), covered: Iterable[str] = (),
                   devices: Iterable[str] = ()) -> list[str]:
    """bwrap argv for an evaluator: machine state and every `hidden` folder
    (other hills' private/) hidden, but `readable` (the hill environment
    and the SDK), the run folder writable, the hill in it read-only, the
    folders of the run folder in `covered` (the snapshot, once a solution
    phase ran it) hidden, and `devices` (the GPUs of a hill that holds
    them: its scorer runs the model, and names the hardware)."""
    home, run_dir, run_hill_dir, cwd = real(home), real(run_dir), real(run_hill_dir), real(cwd)
    wrapped = _common(network) + ["--tmpfs", home]
    for device in devices:
        wrapped += ["--dev-bind", device, device]
    for path in map(real, hidden):
        wrapped += ["--tmpfs", path, "--remount-ro", path]
    for path in map(real, readable):
        wrapped += ["--ro-bind", path, path]
    wrapped += ["--bind", run_dir, run_dir, "--ro-bind", run_hill_dir, run_hill_dir]
    for path in map(real, covered):
        if os.path.isdir(path):
            wrapped += ["--tmpfs", path, "--remount-ro", path]
    wrapped += ["--remount-ro", home, "--chdir", cwd, "--"]
    return wrapped + list(argv)


def private_elsewhere(hill_dir: Path | str) -> list[str]:
    """The private/ folders of the machine's other registered hills, a
    same-named hill of another project included: no eval of this hill has
    any business reading them."""
    from ..base import state

    own = os.path.realpath(os.path.join(hill_dir, "private"))
    found: list[str] = []
    for _name, entry in state.registry_entries():
        path = os.path.join(entry["path"], "private")
        if os.path.isdir(path):
            real = os.path.realpath(path)
            if real != own and real not in found:
                found.append(real)
    return found


# The caps of submitted code beyond time and memory (hill.yaml `limits`),
# and the file in the run folder where hills.sdk records what it started.
CAPS = ("processes", "disk", "file_size", "cpu")
EVENTS_FILE = "submission-events.jsonl"
EVENTS_CAP = 1024 * 1024
_sizes: dict[str, bool] = {}


def bwrap_sizes_tmpfs() -> bool:
    """Whether this bwrap takes `--size` for a tmpfs (0.7 and later)."""
    binary = bwrap_binary() or ""
    if binary not in _sizes:
        _sizes[binary] = bool(_remembered(binary)["sizes_tmpfs"]) if binary else False
    return _sizes[binary]


def _takes_sizes(binary: str) -> bool:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        version = tuple(int(part) for part in done.stdout.split()[-1].split(".")[:2])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        version = (0, 0)
    return version >= (0, 7)


def read_events(path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(starts, caps hit) that hills.sdk recorded in `path`; a line that is
    not a JSON object is skipped, and at most EVENTS_CAP bytes are read."""
    import json

    starts: list[dict[str, Any]] = []
    hits: list[dict[str, Any]] = []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return starts, hits
    with open(fd, "rb") as handle:
        raw = handle.read(EVENTS_CAP)
    for line in raw.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "start":
            starts.append(event)
        elif isinstance(event, dict) and event.get("event") == "cap" and len(hits) < 100:
            hits.append({key: event[key] for key in ("cap", "limit", "seen", "by") if key in event})
    return starts, hits


def _pids_hierarchy() -> str | None:
    """This process's cgroup folder in a hierarchy with the pids controller
    (cgroup v1 `pids`, or cgroup2 where pids is enabled below it), or None."""
    own_v1 = own_v2 = None
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            for line in handle:
                number, controllers, path = line.rstrip("\n").split(":", 2)
                if "pids" in controllers.split(","):
                    own_v1 = path
                elif number == "0":
                    own_v2 = path
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            mounts = [line.split() for line in handle]
    except (OSError, ValueError):
        return None
    for fields in mounts:
        dash = fields.index("-") if "-" in fields else -1
        if dash < 0 or len(fields) < dash + 4:
            continue
        root, point, fstype, options = fields[3], fields[4], fields[dash + 1], fields[dash + 3]
        if fstype == "cgroup" and "pids" in options.split(",") and own_v1 is not None:
            own = own_v1
        elif fstype == "cgroup2" and own_v2 is not None:
            own = own_v2
        else:
            continue
        if root != "/" and not (own == root or own.startswith(root + "/")):
            continue
        folder = os.path.normpath(point + "/" + (own if root == "/" else own[len(root):]))
        if fstype == "cgroup2":
            try:
                with open(os.path.join(folder, "cgroup.subtree_control"), encoding="utf-8") as handle:
                    if "pids" not in handle.read().split():
                        continue
            except OSError:
                continue
        if os.access(folder, os.W_OK):
            return folder
    return None


def make_pids_cgroup(limit: int) -> str | None:
    """A fresh pids cgroup capped at `limit` tasks for the submitted code of
    one eval, or None where hills may not make one. Cgroups left by evals
    whose hills process is gone are removed first."""
    parent = _pids_hierarchy()
    if parent is None:
        return None
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            owner = name.split("-")[1] if name.startswith("hills-") and name.count("-") >= 2 else ""
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                remove_pids_cgroup(os.path.join(parent, name))
    path = os.path.join(parent, f"hills-{os.getpid()}-{next(_cgroup_numbers)}")
    try:
        os.mkdir(path)
        with open(os.path.join(path, "pids.max"), "w", encoding="utf-8") as handle:
            handle.write(str(limit))
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return None
    return path


def remove_pids_cgroup(path: str) -> None:
    """Kill what still runs in a cgroup of hills, then remove it."""
    import signal
    import time

    deadline = time.monotonic() + 5
    while True:
        try:
            with open(os.path.join(path, "cgroup.procs"), encoding="utf-8") as handle:
                pids = [int(pid) for pid in handle.read().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)


_cgroup_numbers = itertools.count(1)


# What submitted code sees of the machine besides its own folders: the
# system folders an interpreter runs from, and the few files of /etc that
# the C library, Python, numpy and torch read. Never the rest of /etc
# (shadow, ssh, sudoers, ssl/private), /home, /root, /run, /var, /mnt, /srv,
# /opt or the machine's /tmp.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "host.conf", "hosts",
             "resolv.conf", "gai.conf", "localtime", "timezone", "ssl/certs", "ssl/openssl.cnf", "pki/tls/certs",
             "pki/ca-trust", "ca-certificates", "alternatives", "mime.types", "protocols", "services",
             "os-release", "lsb-release", "debian_version", "fonts")
# Read only to resolve names and services: of no use without the network
# (localhost is in /etc/hosts), and each bind costs every start.
ETC_NETWORK = ("resolv.conf", "gai.conf", "host.conf", "protocols", "services")
_system: dict[bool, list[str]] = {}


def _system_view(network: bool) -> list[str]:
    """bwrap arguments for the system folders and /etc files that exist
    here, each read-only; a merged-usr link (/bin -> usr/bin) stays a link.
    A file of /etc that is a link (resolv.conf into /run) is bound from
    where it leads."""
    if network in _system:
        return _system[network]
    view: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            view += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            view += ["--ro-bind", path, path]
    for name in ETC_FILES:
        path = os.path.join("/etc", name)
        if os.path.exists(path) and (network or name not in ETC_NETWORK):
            view += ["--ro-bind", real(path), path]
    _system[network] = view
    return view


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)


def interpreter_base(env_dir: str) -> list[str]:
    """The base installation a hill environment's interpreter runs from
    (pyenv, uv-managed or another Python under $HOME): the prefix that
    pyvenv.cfg's `home` names and that the interpreter's real path lies in,
    unless it is a system folder submitted code sees anyway. Remembered
    per environment while its pyvenv.cfg is unchanged (an eval asks twice)."""
    try:
        info = os.stat(os.path.join(env_dir, "pyvenv.cfg"))
        key: tuple[object, ...] | None = (env_dir, info.st_ino, info.st_mtime_ns, info.st_size)
    except OSError:
        key = None
    if key is not None and key in _bases:
        return list(_bases[key])
    found = _interpreter_base(env_dir)
    if key is not None:
        _bases[key] = list(found)
    return found


_bases: dict[tuple[object, ...], list[str]] = {}


def _interpreter_base(env_dir: str) -> list[str]:
    found: list[str] = []
    homes = []
    try:
        with open(os.path.join(env_dir, "pyvenv.cfg"), encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    homes.append(real(value.strip()))
    except OSError:
        pass
    for name in ("python", "python3"):
        interpreter = os.path.join(env_dir, "bin", name)
        if os.path.exists(interpreter):
            homes.append(os.path.dirname(real(interpreter)))
            break
    system = [real(path) for path in SYSTEM_DIRS if os.path.isdir(path)]
    for folder in homes:
        prefix = os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder
        if prefix not in ("", "/") and not _under(prefix, system) and prefix not in found:
            found.append(prefix)
    return found


def _links_on_the_way(paths: Iterable[str]) -> list[str]:
    """bwrap arguments that make the links on the way to `paths` (a linked
    HILLS_HOME, home or project folder) links in the view too, so the paths
    that the evaluator hands submitted code, in the form the user sees,
    lead to the same folders; each link leads only to what is bound."""
    made: list[str] = []
    links: list[str] = []
    for path in paths:
        current = os.path.abspath(path)
        for _ in range(40):  # a bound on links leading to links
            parts = current.strip("/").split("/")
            link = next((prefix for prefix in ("/" + "/".join(parts[:n]) for n in range(1, len(parts) + 1))
                         if os.path.islink(prefix)), None)
            if link is None:
                break
            target = real(link)
            if link not in made and link not in SYSTEM_DIRS:
                made.append(link)
                links += ["--symlink", target, link]
            current = target + current[len(link):]
    return links


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes of this machine (none on most)."""
    import glob

    return sorted(path for path in glob.glob("/dev/nvidia*") if not os.path.isdir(path) or path.endswith("-caps"))


def submission_argv(argv: Sequence[str], *, writable: Iterable[str], readable: Iterable[str], network: bool,
                    cwd: str, scratch: str, devices: Iterable[str] = (), processes: int | None = None,
                    shm_size: int | None = None) -> list[str]:
    """bwrap argv for submitted code: nothing of the machine but the system
    view, `readable` folders read-only, `writable` ones and the `scratch`
    folder writable (the scratch also at /tmp), `devices` (GPUs) and its own
    /dev, /proc and user namespace. `processes` caps its tasks inside that
    namespace (RLIMIT_NPROC counts per user namespace, so the user's other
    processes do not count)."""
    binary = bwrap_binary()
    if binary is None:
        raise EnvironmentProblem(_find()[1] or "bubblewrap is not usable here", hint=HINT)
    # --as-pid-1: the submitted command itself is the namespace's first
    # process, the child bwrap waits for, so its CPU time and peak memory
    # (and its children's) reach hills.sdk's RUSAGE_CHILDREN (docs/audit.md);
    # bwrap's own reaper would take them with it. The namespace still ends,
    # every process in it killed, when that first process exits.
    wrapped = [binary, "--die-with-parent", "--new-session", "--unshare-pid", "--as-pid-1", "--unshare-ipc",
               "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        wrapped.append("--unshare-net")
    wrapped += _system_view(network) + ["--dev", "/dev"]
    for device in devices:
        wrapped += ["--dev-bind", device, device]
    # /dev/shm (multiprocessing, torch) as a tmpfs of bounded size, the rest
    # of /dev and the root read-only: no unbounded memory to write into.
    if shm_size:
        wrapped += ["--size", str(shm_size)]
    wrapped += ["--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--proc", "/proc"]
    scratch = real(scratch)
    readable, writable = list(readable), list(writable)
    system = [path for path in SYSTEM_DIRS if os.path.isdir(path) and not os.path.islink(path)]
    binds = [("--ro-bind", path) for path in map(real, readable) if os.path.exists(path) and not _under(path, system)]
    binds += [("--bind", path) for path in map(real, writable)]
    links = _links_on_the_way([*readable, *writable, cwd])
    # /tmp is the scratch folder. A folder of the view under the machine's
    # /tmp is bound inside it, in a read-only tmpfs per top folder, so its
    # way there holds nothing to write and the scratch only an empty
    # mount point.
    tops = sorted({"/tmp/" + path[len("/tmp/"):].split("/")[0]
                   for path in [path for _, path in binds] + links[2::3] if _under(path, ["/tmp"]) and path != "/tmp"})
    wrapped += ["--bind", scratch, "/tmp"]
    for top in tops:
        wrapped += ["--tmpfs", top]
    for option, path in binds:
        wrapped += [option, path, path]
    if not _under(scratch, ["/tmp"]):
        wrapped += ["--bind", scratch, scratch]
    wrapped += links
    for top in tops:
        wrapped += ["--remount-ro", top]
    wrapped += ["--remount-ro", "/", "--chdir", real(cwd), "--"]
    prlimit = next((path for path in ("/usr/bin/prlimit", "/bin/prlimit") if os.access(path, os.X_OK)), None)
    # RLIMIT_NPROC is never enforced for root (the pids cgroup caps it).
    if processes and prlimit and os.geteuid() != 0:
        wrapped += [prlimit, f"--nproc={processes}:{processes}", "--"]
    return wrapped + list(argv)


class Confinement:
    """The isolation of one eval: how to wrap the evaluator, and the
    configuration handed to `hills.sdk` for the submitted code it starts."""

    def __init__(self, level: str, *, home: str, run_dir: str, run_hill_dir: str, hill_dir: str, env_dir: str,
                 sdk_dir: str, network: bool, limits: Mapping[str, int], public: Iterable[str] = (),
                 elsewhere: Iterable[str] = (), gpu: bool = False) -> None:
        self.level = level
        self.home = home
        self.run_dir = run_dir
        self.run_hill_dir = run_hill_dir
        self.hill_dir = hill_dir
        public = list(public)
        self.readable = [env_dir, sdk_dir]
        # The hill's private data and blobs, which the run folder links to,
        # for the evaluator alone: where the hill itself lies in machine
        # state (a Ray node's copy, HILLS_HOME/cluster/hills), the tmpfs over
        # machine state would hide them from the one process that must read them.
        inside = real(home) + os.sep
        self.hill_data = [path for path in [os.path.join(hill_dir, "private"), *public]
                          if real(path).startswith(inside) and os.path.exists(path)]
        # What submitted code may read of the hill: its committed files (the
        # link to private/ in there then leads nowhere) and the blobs.
        self.public = [run_hill_dir] + list(public)
        self.network = network
        self.limits = limits
        self.elsewhere = list(elsewhere)
        self.env_dir = env_dir
        self.gpu = gpu
        # Where hills.sdk records each start of submitted code and each cap
        # it hit: the run folder, which submitted code never sees.
        self.events = os.path.join(run_dir, EVENTS_FILE)
        self.cgroup: str | None = None
        self._cgroup_tried = False

    def evaluator(self, argv: Sequence[str], cwd: str, hide: Iterable[str] = ()) -> list[str]:
        """The evaluator's argv, with the run folder's folders in `hide` out of its sight."""
        if self.level != LEVEL_BWRAP:
            return list(argv)
        wrapped = evaluator_argv(argv, home=self.home, run_dir=self.run_dir, run_hill_dir=self.run_hill_dir,
                                 readable=self.readable + self.hill_data, network=self.network, cwd=cwd,
                                 hidden=self.elsewhere,
                                 covered=hide, devices=gpu_devices() if self.gpu else ())
        cgroup = self.pids_cgroup()
        if cgroup:
            # The one writable spot of /sys: where hills.sdk moves the
            # submitted code it starts into the eval's pids cgroup.
            cut = wrapped.index("--chdir")
            wrapped[cut:cut] = ["--bind", cgroup, cgroup]
        return wrapped

    def submission_config(self, submission_dir: str, scratch_dir: str,
                          readable: Iterable[str] = ()) -> dict[str, Any]:
        """JSON-able settings for hills.sdk.run_submission: the view (the
        bwrap prefix), the caps, and where to record what happened."""
        os.makedirs(scratch_dir, exist_ok=True)
        caps = {name: self.limits[name] for name in CAPS if self.limits.get(name)}
        config: dict[str, Any] = {"cwd": submission_dir, "scratch": scratch_dir, "timeout": self.limits["time"],
                  "memory_mb": max(1, self.limits["memory"] // (1024 * 1024)), "prefix": [],
                  "public": list(self.public), "limits": caps, "events": self.events}
        cgroup = self.pids_cgroup()
        if cgroup:
            config["cgroup"] = cgroup
        if self.level == LEVEL_BWRAP:
            config["prefix"] = submission_argv(
                [], writable=[submission_dir], scratch=scratch_dir,
                readable=self.readable + interpreter_base(self.env_dir) + self.public + list(readable),
                network=self.network, cwd=submission_dir, devices=gpu_devices() if self.gpu else (),
                processes=caps.get("processes"), shm_size=caps.get("disk") if bwrap_sizes_tmpfs() else None)
            # Inside, the scratch folder is /tmp and the home folder too.
            config["tmpdir"] = "/tmp"
            config["home"] = "/tmp"
        config["audit"] = os.path.join(self.readable[1], "audit")
        config["view"] = self.audit_view(submission_dir, scratch_dir, readable)
        return config

    def audit_view(self, submission_dir: str, scratch_dir: str, readable: Iterable[str] = ()) -> dict[str, Any]:
        """What the access audit holds an attempt against (docs/audit.md):
        the folders submitted code may read and those it may write."""
        write = [real(submission_dir), real(scratch_dir), "/dev/shm"]
        read = [real(path) for path in [*self.readable, *interpreter_base(self.readable[0]), *self.public,
                                        *readable] if os.path.exists(path)]
        read += [path for path in SYSTEM_DIRS if os.path.exists(path)]
        read += [os.path.join("/etc", name) for name in ETC_FILES] + ["/dev"]
        return {"read": read, "write": write, "network": self.network,
                "tmp": "/tmp" if self.level == LEVEL_BWRAP else None,
                "deny": [os.path.join(real(self.run_hill_dir), "private")]}

    def pids_cgroup(self) -> str | None:
        """A pids cgroup of this eval capped at `limits.processes`, made on
        first use where hills may make one (root, or a delegated cgroup2
        tree); None elsewhere."""
        if not self._cgroup_tried and self.limits.get("processes"):
            self._cgroup_tried = True
            self.cgroup = make_pids_cgroup(int(self.limits["processes"]))
        return self.cgroup

    def close(self) -> None:
        """Remove the eval's cgroup once nothing of the eval runs in it."""
        if self.cgroup:
            remove_pids_cgroup(self.cgroup)
            self.cgroup = None

    def record(self) -> dict[str, Any]:
        """The report's `isolation` entry: how the evaluator ran, whether
        submitted code was started confined and how often, the caps in
        force and each cap it hit, from the events hills.sdk wrote."""
        starts, hits = read_events(self.events)
        confined = [start for start in starts if start.get("confined")]
        if not starts:
            submitted = "not started by hills"
        elif len(confined) == len(starts):
            submitted = "confined"
        else:
            submitted = "unconfined" if not confined else "partly confined"
        started_by: dict[str, int] = {}
        for start in starts:
            name = str(start.get("by", "sdk"))
            started_by[name] = started_by.get(name, 0) + 1
        caps = {name: self.limits[name] for name in ("time", "memory", *CAPS) if self.limits.get(name)}
        mechanisms = sorted({str(start["processes_by"]) for start in starts if start.get("processes_by")})
        entry: dict[str, Any] = {"evaluator": self.level, "submitted_code": submitted, "runs": len(starts),
                                 "confined_runs": len(confined), "started_by": started_by, "limits": caps,
                                 "caps_hit": hits}
        if mechanisms:
            entry["processes_by"] = mechanisms[0] if len(mechanisms) == 1 else mechanisms
        if self.level == LEVEL_BWRAP:
            entry["bwrap"] = bwrap_binary()
        from ..base.startup import named_overrides

        entry["overrides"] = named_overrides()
        return entry


def trial(hill_name: str, hill_dir: str, python: str, spec: Mapping[str, Any]) -> str | None:
    """Start the hill environment's interpreter as an eval would, once as
    the evaluator and once as submitted code, through the same Confinement
    and in a run folder of its own: None when both start, else why not
    (what would make every eval of this hill buggy)."""
    import shutil
    import tempfile

    from ..base import state
    from .env import sdk_path

    root = state.runs_dir(hill_name)
    made_root = not os.path.isdir(root)
    os.makedirs(root, exist_ok=True)
    # A dot name: run pruning and listings skip it.
    run_dir = tempfile.mkdtemp(prefix=".check-", dir=root)
    confinement: Confinement | None = None
    try:
        run_hill_dir, submission_dir = os.path.join(run_dir, "hill"), os.path.join(run_dir, "submission")
        os.mkdir(run_hill_dir)
        os.mkdir(submission_dir)
        confinement = Confinement(LEVEL_BWRAP, home=state.home(), run_dir=run_dir, run_hill_dir=run_hill_dir,
                                  hill_dir=hill_dir, env_dir=os.path.dirname(os.path.dirname(python)),
                                  sdk_dir=sdk_path(), network=bool(spec["network"]), limits=spec["limits"],
                                  elsewhere=private_elsewhere(hill_dir), gpu=spec.get("exclusive") == "gpu")
        command = [python, "-I", "-c", ""]
        config = confinement.submission_config(submission_dir, os.path.join(run_dir, "scratch"))
        for role, argv in (("the evaluator", confinement.evaluator(command, cwd=run_hill_dir)),
                           ("submitted code", list(config["prefix"]) + command)):
            problem = _start(argv)
            if problem:
                return f"{role} does not start under bubblewrap: {problem}"
        return None
    finally:
        if confinement is not None:
            confinement.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        if made_root:  # a check leaves no trace of a run where none was made
            with contextlib.suppress(OSError):
                os.rmdir(root)


def _start(argv: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20,
                              env={"PATH": os.environ.get("PATH", os.defpath)})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1][-300:] if lines else f"exit code {done.returncode}"
