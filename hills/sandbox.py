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
import os
import shutil
import subprocess
import tempfile

from .errors import EnvironmentProblem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

LEVEL_BWRAP = "bwrap"
LEVEL_NONE = "none"
_probe: dict[str, bool] = {}


def bwrap_binary() -> str | None:
    return os.environ.get("HILLS_BWRAP") or shutil.which("bwrap")


def bwrap_works() -> bool:
    """Whether bwrap exists and can build a namespace here (probed once)."""
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
    try:
        done = subprocess.run([binary, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _probe_cached(binary: str) -> bool:
    """Run the probe once per bwrap binary (by path, size and mtime) and
    remember the answer in machine state, sealed: evals skip the probe."""
    from . import state

    try:
        st = os.stat(binary)
    except OSError:
        return False
    identity = [os.path.realpath(binary), st.st_size, st.st_mtime_ns]
    path = os.path.join(state.home(), "cache", "bwrap-probe.json")
    cached = state.sealed_read(path)
    if isinstance(cached, dict) and cached.get("identity") == identity:
        return bool(cached.get("works"))
    works = probe(binary)
    state.ensure_home()
    state.sealed_write(path, {"identity": identity, "works": works})
    return works


def level_for(spec: Mapping[str, Any]) -> str:
    """The isolation an eval of this hill gets: `bwrap` or `none`."""
    wanted = spec.get("sandbox", "auto")
    if wanted == LEVEL_NONE:
        return LEVEL_NONE
    if bwrap_works():
        return LEVEL_BWRAP
    if wanted == LEVEL_BWRAP:
        raise EnvironmentProblem("hill.yaml asks for 'sandbox: bwrap', but bubblewrap is not usable here",
                                 hint="install bubblewrap (Debian package 'bubblewrap'), "
                                      "or set 'sandbox: auto' to run without isolation")
    return LEVEL_NONE


def _common(network: bool) -> list[str]:
    binary = bwrap_binary()
    if binary is None:
        raise EnvironmentProblem("bubblewrap (bwrap) is not installed or not on PATH",
                                 hint="install bubblewrap (Debian package 'bubblewrap'), or set HILLS_BWRAP")
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
                   network: bool, cwd: str, hidden: Iterable[str] = (), covered: Iterable[str] = ()) -> list[str]:
    """bwrap argv for an evaluator: machine state and every `hidden` folder
    (other hills' private/) hidden, but `readable` (the hill environment
    and the SDK), the run folder writable, the hill in it read-only, and
    the folders of the run folder in `covered` (the snapshot, once a
    solution phase ran it) hidden."""
    home, run_dir, run_hill_dir, cwd = real(home), real(run_dir), real(run_hill_dir), real(cwd)
    wrapped = _common(network) + ["--tmpfs", home]
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
    from . import state

    own = os.path.realpath(os.path.join(hill_dir, "private"))
    found: list[str] = []
    for _name, entry in state.registry_entries():
        path = os.path.join(entry["path"], "private")
        if os.path.isdir(path):
            real = os.path.realpath(path)
            if real != own and real not in found:
                found.append(real)
    return found


def submission_argv(argv: Sequence[str], *, home: str, hidden: Sequence[str], writable: Iterable[str],
                    readable: Iterable[str], network: bool, cwd: str) -> list[str]:
    """bwrap argv for submitted code: machine state and every `hidden`
    folder (the hill, the run folder) replaced by empty ones, only
    `writable` folders writable."""
    home, hidden = real(home), [real(path) for path in hidden]
    wrapped = _common(network) + ["--tmpfs", home]
    for path in hidden:
        wrapped += ["--tmpfs", path]
    for path in map(real, readable):
        wrapped += ["--ro-bind", path, path]
    for path in map(real, writable):
        wrapped += ["--bind", path, path]
    # The empty stand-ins become read-only once the binds inside them exist.
    for path in [home] + hidden:
        wrapped += ["--remount-ro", path]
    wrapped += ["--chdir", real(cwd), "--"]
    return wrapped + list(argv)


class Confinement:
    """The isolation of one eval: how to wrap the evaluator, and the
    configuration handed to `hills.sdk` for the submitted code it starts."""

    def __init__(self, level: str, *, home: str, run_dir: str, run_hill_dir: str, hill_dir: str, env_dir: str,
                 sdk_dir: str, network: bool, limits: Mapping[str, int], public: Iterable[str] = (),
                 elsewhere: Iterable[str] = ()) -> None:
        self.level = level
        self.home = home
        self.run_dir = run_dir
        self.run_hill_dir = run_hill_dir
        self.hill_dir = hill_dir
        self.readable = [env_dir, sdk_dir]
        # What submitted code may read of the hill: its committed files (the
        # link to private/ in there then leads nowhere) and the blobs.
        self.public = [run_hill_dir] + list(public)
        self.network = network
        self.limits = limits
        self.elsewhere = list(elsewhere)

    def evaluator(self, argv: Sequence[str], cwd: str, hide: Iterable[str] = ()) -> list[str]:
        """The evaluator's argv, with the run folder's folders in `hide` out of its sight."""
        if self.level != LEVEL_BWRAP:
            return list(argv)
        return evaluator_argv(argv, home=self.home, run_dir=self.run_dir, run_hill_dir=self.run_hill_dir,
                              readable=self.readable, network=self.network, cwd=cwd, hidden=self.elsewhere,
                              covered=hide)

    def submission_config(self, submission_dir: str, scratch_dir: str,
                          readable: Iterable[str] = ()) -> dict[str, Any]:
        """JSON-able settings for hills.sdk.run_submission."""
        os.makedirs(scratch_dir, exist_ok=True)
        config: dict[str, Any] = {"cwd": submission_dir, "scratch": scratch_dir, "timeout": self.limits["time"],
                  "memory_mb": max(1, self.limits["memory"] // (1024 * 1024)), "prefix": [],
                  "public": list(self.public)}
        if self.level == LEVEL_BWRAP:
            config["prefix"] = submission_argv(
                [], home=self.home, hidden=[self.hill_dir, self.run_dir] + self.elsewhere,
                writable=[submission_dir, scratch_dir],
                readable=self.readable + self.public + list(readable), network=self.network, cwd=submission_dir)
        return config


def trial(hill_name: str, hill_dir: str, python: str, spec: Mapping[str, Any]) -> str | None:
    """Start the hill environment's interpreter as an eval would, once as
    the evaluator and once as submitted code, through the same Confinement
    and in a run folder of its own: None when both start, else why not
    (what would make every eval of this hill buggy)."""
    from . import state
    from .evaluate import sdk_path

    root = state.runs_dir(hill_name)
    made_root = not os.path.isdir(root)
    os.makedirs(root, exist_ok=True)
    # A dot name: run pruning and listings skip it.
    run_dir = tempfile.mkdtemp(prefix=".check-", dir=root)
    try:
        run_hill_dir, submission_dir = os.path.join(run_dir, "hill"), os.path.join(run_dir, "submission")
        os.mkdir(run_hill_dir)
        os.mkdir(submission_dir)
        confinement = Confinement(LEVEL_BWRAP, home=state.home(), run_dir=run_dir, run_hill_dir=run_hill_dir,
                                  hill_dir=hill_dir, env_dir=os.path.dirname(os.path.dirname(python)),
                                  sdk_dir=sdk_path(), network=bool(spec["network"]), limits=spec["limits"],
                                  elsewhere=private_elsewhere(hill_dir))
        command = [python, "-I", "-c", ""]
        config = confinement.submission_config(submission_dir, os.path.join(run_dir, "scratch"))
        for role, argv in (("the evaluator", confinement.evaluator(command, cwd=run_hill_dir)),
                           ("submitted code", list(config["prefix"]) + command)):
            problem = _start(argv)
            if problem:
                return f"{role} does not start under bubblewrap: {problem}"
        return None
    finally:
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
