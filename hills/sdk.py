"""What a hill's evaluator may call: run submitted code confined.

    from hills import sdk
    done = sdk.run_submission([sys.executable, "solution.py"], timeout=60)

The submitted code runs with the submission snapshot as its folder (the
only place it can write, besides a scratch folder in TMPDIR and at /tmp),
seeing nothing of the machine but the system folders and its interpreter
(docs/confinement.md), under the hill's caps (time, memory, processes,
disk, file size, CPU time). Each start and each cap hit is recorded for
the report. Outside a hills eval it runs the command plainly, with the
time and memory limits, so an evaluator can be tried by hand.

Standard library only: hills puts a copy on the evaluator's PYTHONPATH.
`python -m hills.sdk ARGV...` runs ARGV the same way (the wrapper behind
`$HILLS_PYTHON $HILLS_SOLUTION` in command verifiers).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

ENV_CONFIG = "HILLS_SUBMISSION_SANDBOX"
ENV_GUARD = "HILLS_SCORING_GUARD"  # hills.scoringhook.ENV
DEFAULT_MEMORY_MB = 4096

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import IO, Any


def _config() -> dict[str, Any]:
    raw = os.environ.get(ENV_CONFIG)
    return json.loads(raw) if raw else {}


def _limit(memory_bytes: int, caps: dict[str, Any], cgroup: str | None) -> Callable[[], None]:
    """What the child sets before it becomes the submitted code: its rlimits
    (inherited by all it starts) and, first, its place in the eval's pids
    cgroup, so nothing it forks escapes the count."""
    def apply() -> None:
        import resource

        if cgroup:
            fd = os.open(os.path.join(cgroup, "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        largest = [caps[name] for name in ("file_size", "disk") if caps.get(name)]
        if largest:
            resource.setrlimit(resource.RLIMIT_FSIZE, (min(largest), min(largest)))
        if caps.get("cpu"):
            seconds = max(1, math.ceil(caps["cpu"]))
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    return apply


def run_submission(argv: Sequence[str], *, timeout: float | None = None, memory_mb: int | None = None,
                   capture_output: bool = False, input: str | bytes | None = None, text: bool | None = None,
                   cwd: Path | str | None = None, stdout: int | IO[Any] | None = None,
                   stderr: int | IO[Any] | None = None,
                   config: dict[str, Any] | None = None) -> subprocess.CompletedProcess[Any]:
    """Run `argv` as submitted code; return a subprocess.CompletedProcess.

    In an eval it runs in the submission snapshot whatever `cwd` says; by
    hand, in `cwd` (default: the current folder). `stdout` and `stderr` may
    be files to write to instead of capturing. Raises
    subprocess.TimeoutExpired (after killing everything it started) when it
    runs past `timeout` seconds (default: the hill's limit). A cap of the
    hill (processes, disk, file size, CPU time) that is hit stops it: the
    returncode is then non-zero and a line on stderr names the cap.
    `config` is the eval's settings (default: from the environment).
    """
    config = _config() if config is None else config
    prefix = config.get("prefix", [])
    cwd = config.get("cwd") or (os.fspath(cwd) if cwd is not None else os.getcwd())
    timeout = timeout if timeout is not None else config.get("timeout")
    memory = (memory_mb if memory_mb is not None else config.get("memory_mb", DEFAULT_MEMORY_MB)) * 1024 * 1024
    caps = dict(config.get("limits") or {})
    # The eval's secret seed is the evaluator's alone (hills-eval(1), FRESH INPUTS).
    env = {k: v for k, v in os.environ.items() if k not in (ENV_CONFIG, "HILLS_RESULT_FD", "HILLS_SECRET_SEED",
                                                            ENV_GUARD)}
    # The scoring phase's guard is for its own interpreters, never for the
    # submitted code: that runs confined, free to run its own files.
    if env.get("PYTHONPATH"):
        guard_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scoring")
        env["PYTHONPATH"] = os.pathsep.join(p for p in env["PYTHONPATH"].split(os.pathsep)
                                            if os.path.abspath(p) != guard_dir)
    if config.get("scratch"):
        env["TMPDIR"] = config.get("tmpdir") or config["scratch"]
    if config.get("home"):
        env["HOME"] = config["home"]
    argv = list(argv)
    if prefix and argv and os.path.isabs(argv[0]):
        # Only real paths exist in the submission's view: a link on the way
        # to the interpreter (a linked HILLS_HOME) leads nowhere there.
        argv[0] = os.path.join(os.path.realpath(os.path.dirname(argv[0])), os.path.basename(argv[0]))
    cgroup = config.get("cgroup") if caps.get("processes") else None
    watch = _Watch(config, caps, cgroup, bool(prefix), memory)
    _record(config, {"event": "start", "by": config.get("by", "sdk"), "confined": bool(prefix),
                     "processes_by": watch.processes_by} if caps else
            {"event": "start", "by": config.get("by", "sdk"), "confined": bool(prefix)})
    used_before = _children_cpu()
    audit = _AuditPipe(config, env)
    # Measured here, in the process that starts the submitted code: no
    # clock or counter of its own can move these figures.
    clock = _Clock()
    # This start is the confined one the scoring guard sends code to: the
    # guard (in the evaluator's own process) lets it through.
    guard = getattr(sys, "_hills_scoring_guard", None)
    if guard is not None:
        guard.busy = True
    try:
        process = subprocess.Popen(prefix + argv, cwd=cwd, env=env, start_new_session=True,
                                   preexec_fn=_limit(memory, caps, cgroup), pass_fds=audit.pass_fds,
                                   stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE if capture_output else stdout,
                                   stderr=subprocess.PIPE if capture_output else stderr, text=text)
    except BaseException:
        audit.close()
        watch.clean()
        raise
    finally:
        if guard is not None:
            guard.busy = False
    audit.started()
    watch.start(process)
    try:
        try:
            out, err = process.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            watch.stop()
            _kill(process)
            out, err = process.communicate()
            watch.hit("time", timeout, round(float(exc.timeout), 3))
            _record(config, watch.hits[-1])
            raise subprocess.TimeoutExpired(argv, exc.timeout, out, err)
        except BaseException:
            watch.stop()
            _kill(process)
            raise
        watch.stop()
        watch.check(final=True)
        _kill(process)  # anything it left behind in its group
        code = process.returncode
        if caps.get("cpu") and not watch.hits and code in (-signal.SIGXCPU, 128 + signal.SIGXCPU,
                                                          -signal.SIGKILL, 128 + signal.SIGKILL):
            used = _children_cpu() - used_before
            if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or used >= caps["cpu"]:
                # Only reaped processes count in RUSAGE_CHILDREN; SIGXCPU
                # itself says the cap was reached.
                watch.hit("cpu", caps["cpu"], max(round(used, 3), caps["cpu"]))
        if code != 0 and not watch.hits and watch.memory_hit():
            watch.hit("memory", memory, watch.memory_peak)
    finally:
        _record(config, clock.event(config.get("by", "sdk")))
        audit.finish(config)
        watch.clean()
        _tidy(config)
    for event in watch.hits:
        if event["cap"] != "time":
            _record(config, event)
            if capture_output and isinstance(err, str):
                err += _said(event) + "\n"
            elif capture_output and isinstance(err, bytes):
                err += (_said(event) + "\n").encode()
            else:
                sys.stderr.write(_said(event) + "\n")
    if any(event["cap"] != "time" for event in watch.hits) and code == 0:
        code = -signal.SIGKILL
    return subprocess.CompletedProcess(argv, code, out, err)


def _said(event: dict[str, Any]) -> str:
    unit = {"processes": " tasks", "cpu": " CPU seconds", "time": "s"}.get(event["cap"], " bytes")
    return (f"hills: submitted code hit its {event['cap']} cap ({event['limit']}{unit}; "
            f"seen {event['seen']}) and was stopped")


def _record(config: dict[str, Any], event: dict[str, Any]) -> None:
    """Append one event to the eval's record (the run folder, out of the
    submitted code's sight); by hand there is none."""
    path = config.get("events")
    if not path:
        return
    line = (json.dumps(event, sort_keys=True) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Clock:
    """Wall time, CPU time and peak memory of what one start ran, taken
    from outside it: the monotonic clock of this process and the kernel's
    account of its reaped children (RUSAGE_CHILDREN: CPU summed over every
    process that was waited for, memory the largest resident set)."""

    def __init__(self) -> None:
        import resource

        self.usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.began = time.monotonic()

    def event(self, by: str) -> dict[str, Any]:
        import resource

        wall = time.monotonic() - self.began
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (usage.ru_utime + usage.ru_stime) - (self.usage.ru_utime + self.usage.ru_stime)
        return {"event": "measured", "by": by, "wall_s": round(wall, 6), "cpu_s": round(max(cpu, 0.0), 6),
                "peak_rss_bytes": int(usage.ru_maxrss) * 1024,
                "replicate": os.environ.get("HILLS_REPLICATE_SEED")}


class _AuditPipe:
    """The access audit of one start: a pipe whose write end the audit hook
    in the submitted interpreter writes to (hills/audithook.py), read here
    up to a cap, and summed into one `audit` event for the report."""

    CAP = 1024 * 1024
    FIRST = 10

    def __init__(self, config: dict[str, Any], env: dict[str, str]) -> None:
        self.read_fd: int | None = None
        self.pass_fds: tuple[int, ...] = ()
        self.lines: list[bytes] = []
        self.thread: threading.Thread | None = None
        self.denied = bool(config.get("prefix"))
        folder, view = config.get("audit"), config.get("view")
        if not folder or not view or not os.path.isdir(folder):
            return
        self.read_fd, write_fd = os.pipe()
        self.pass_fds = (write_fd,)
        # The pipe's inode beside its number: a process that did not inherit
        # the fd (subprocess closes fds) must not write into whatever file
        # holds that number in it.
        env["HILLS_AUDIT_FD"] = f"{write_fd}:{os.fstat(write_fd).st_ino}"
        # The format of audithook.parse_view: its hook loads no json.
        env["HILLS_AUDIT_VIEW"] = "\n".join([os.pathsep.join(view.get("read", ())),
                                             os.pathsep.join(view.get("write", ())), view.get("tmp") or "",
                                             "1" if view.get("network") else "0",
                                             os.pathsep.join(view.get("deny", ()))])
        env["PYTHONPATH"] = os.pathsep.join([folder] + [p for p in [env.get("PYTHONPATH")] if p])

    def started(self) -> None:
        if self.read_fd is None:
            return
        os.close(self.pass_fds[0])
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.read_fd is not None
        held = 0
        with open(self.read_fd, "rb", closefd=True) as pipe:
            for line in pipe:
                if held < self.CAP:
                    self.lines.append(line)
                    held += len(line)

    def close(self) -> None:
        if self.read_fd is not None:
            for fd in (self.read_fd, *self.pass_fds):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.read_fd = None

    def finish(self, config: dict[str, Any]) -> None:
        """Record what the hook reported; a process the code left behind
        may hold the pipe open, so the wait for its end is short."""
        if self.read_fd is None or self.thread is None:
            return
        self.thread.join(timeout=1)
        counts: dict[str, int] = {}
        first: list[dict[str, str]] = []
        for line in list(self.lines):
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"kind": "garbled", "path": line[:100].decode("utf-8", "replace")}
            if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
                entry = {"kind": "garbled", "path": str(entry)[:100]}
            kind = entry["kind"][:20]
            counts[kind] = counts.get(kind, 0) + 1
            if len(first) < self.FIRST:
                first.append({"kind": kind, "path": str(entry.get("path", ""))[:300]})
        _record(config, {"event": "audit", "by": config.get("by", "sdk"), "denied": self.denied,
                         "counts": counts, "first": first})


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _Watch:
    """Watches what submitted code writes to its snapshot and scratch
    folder and how many tasks it runs, and stops it at a cap. The kernel
    enforces what it can (RLIMIT_FSIZE, the pids cgroup, RLIMIT_NPROC in the
    sandbox's user namespace); the watch names the cap that was hit, stops
    the rest, and caps what the kernel cannot (bytes over many files; tasks
    where no cgroup can be made and no user namespace counts them)."""

    def __init__(self, config: dict[str, Any], caps: dict[str, Any], cgroup: str | None, confined: bool,
                 memory: int = 0) -> None:
        self.caps = caps
        self.memory = memory  # RLIMIT_AS: the watch notes the largest address space it sees
        self.memory_peak = 0
        self.cgroup = cgroup
        self.hits: list[dict[str, Any]] = []
        self.snapshot = config.get("cwd") if caps.get("disk") or caps.get("file_size") else None
        self.scratch = config.get("scratch") if caps else None
        self.baseline: dict[str, tuple[int, int, int]] = {}
        self.base_bytes = 0
        self.processes_by: str | None = None
        if caps.get("processes"):
            self.processes_by = "cgroup" if cgroup else ("rlimit" if confined and os.geteuid() != 0 else "watch")
        self.pids_max_before = self._pids_max_events()
        if self.snapshot and os.path.isdir(self.snapshot):
            self.base_bytes = _usage(self.snapshot, self.baseline, record=True)[0]
        self.process: subprocess.Popen[Any] | None = None
        self.stopping = threading.Event() if caps or memory else None
        self.thread: threading.Thread | None = None
        self.interval = 0.02

    def start(self, process: subprocess.Popen[Any]) -> None:
        self.process = process
        if self.stopping is not None:
            self.thread = threading.Thread(target=self._loop, daemon=True)
            self.thread.start()

    def stop(self) -> None:
        if self.stopping is not None and self.thread is not None:
            self.stopping.set()
            self.thread.join()

    def _loop(self) -> None:
        assert self.stopping is not None
        while not self.stopping.wait(self.interval):
            started = time.monotonic()
            if self.check() and self.process is not None:
                _kill(self.process)
                return
            # A large folder is walked less often.
            self.interval = min(0.5, max(0.02, 20 * (time.monotonic() - started)))

    def memory_hit(self) -> bool:
        """Whether code that failed had come up to its memory cap: the
        kernel refuses an allocation past RLIMIT_AS, and the code then
        fails, so a failure with the largest address space seen within a
        sixteenth (at least 64 MiB) of the cap is taken as the cap's. One
        allocation far past the cap, refused at once, leaves no such trace."""
        margin = max(64 * 1024 * 1024, self.memory // 16)
        return bool(self.memory) and self.memory_peak >= self.memory - margin

    def hit(self, cap: str, limit: Any, seen: Any) -> None:
        if not any(event["cap"] == cap for event in self.hits):
            self.hits.append({"event": "cap", "cap": cap, "limit": limit, "seen": seen})

    def check(self, final: bool = False) -> bool:
        """Whether a cap is hit now (recorded in `hits`)."""
        caps = self.caps
        if self.memory and self.process is not None and not final:
            self.memory_peak = max(self.memory_peak, _address_space_peak(self.process.pid))
        if caps.get("processes"):
            if self.cgroup:
                if self._pids_max_events() > self.pids_max_before:
                    self.hit("processes", caps["processes"], self._pids_peak() or caps["processes"])
            elif self.process is not None:
                tasks = _tasks(self.process.pid)
                if tasks >= caps["processes"] - (0 if self.processes_by == "watch" else 1):
                    self.hit("processes", caps["processes"], tasks)
        if self.snapshot or self.scratch:
            written, largest = 0, 0
            if self.snapshot and os.path.isdir(self.snapshot):
                total, largest = _usage(self.snapshot, self.baseline)
                written += total - self.base_bytes
            if self.scratch and os.path.isdir(self.scratch):
                total, biggest = _usage(self.scratch, {})
                written += total
                largest = max(largest, biggest)
            if caps.get("disk") and written >= caps["disk"]:
                self.hit("disk", caps["disk"], written)
            elif caps.get("file_size") and largest >= caps["file_size"]:
                self.hit("file_size", caps["file_size"], largest)
        return bool(self.hits)

    def _pids_max_events(self) -> int:
        if not self.cgroup:
            return 0
        try:
            with open(os.path.join(self.cgroup, "pids.events"), encoding="utf-8") as handle:
                for line in handle:
                    name, _, value = line.partition(" ")
                    if name == "max":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def _pids_peak(self) -> int | None:
        assert self.cgroup is not None
        try:
            with open(os.path.join(self.cgroup, "pids.peak"), encoding="utf-8") as handle:
                return int(handle.read())
        except (OSError, ValueError):
            return None

    def clean(self) -> None:
        """Empty the scratch folder, always; and when a cap on bytes was
        hit, remove from the snapshot what the run wrote there, so the bytes
        do not outlive the run."""
        if self.scratch and os.path.isdir(self.scratch):
            for name in os.listdir(self.scratch):
                _remove(os.path.join(self.scratch, name))
        if self.snapshot and any(event["cap"] in ("disk", "file_size") for event in self.hits):
            _remove_written(self.snapshot, self.baseline)


def _usage(folder: str, baseline: dict[str, tuple[int, int, int]], record: bool = False) -> tuple[int, int]:
    """(bytes on disk under `folder`, largest file written since `baseline`),
    links not followed; with `record`, fill `baseline` instead."""
    total, largest = 0, 0
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            size = max(info.st_size, info.st_blocks * 512)
            total += size
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            if record:
                baseline[entry.path] = (info.st_ino, info.st_size, info.st_mtime_ns)
            elif entry.is_file(follow_symlinks=False) and size > largest and \
                    baseline.get(entry.path) != (info.st_ino, info.st_size, info.st_mtime_ns):
                largest = size
    return total, largest


def _remove_written(folder: str, baseline: dict[str, tuple[int, int, int]]) -> None:
    """Remove every entry under `folder` that is new or changed since `baseline`."""
    for current, dirs, files in os.walk(folder):
        for name in list(dirs) + files:
            path = os.path.join(current, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            before = baseline.get(path)
            if before is None or (not os.path.isdir(path) or os.path.islink(path)) and \
                    before != (info.st_ino, info.st_size, info.st_mtime_ns):
                _remove(path)
                if name in dirs:
                    dirs.remove(name)


def _address_space_peak(pid: int) -> int:
    """The largest peak address space (VmPeak) among `pid` and its
    descendants, in bytes."""
    peak = 0
    for current in [pid] + _descendants(pid):
        try:
            with open(f"/proc/{current}/status", encoding="ascii", errors="replace") as handle:
                for line in handle:
                    if line.startswith("VmPeak:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
                        break
        except (OSError, ValueError, IndexError):
            continue
    return peak


def _tasks(pid: int) -> int:
    """The tasks (threads) of `pid`'s descendants, as RLIMIT_NPROC counts them."""
    count = 0
    for child in _descendants(pid):
        try:
            count += len(os.listdir(f"/proc/{child}/task"))
        except OSError:
            continue
    return count


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    children = [int(p) for p in handle.read().split()]
                found += children
                frontier += children
        except OSError:
            continue
    return found


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _kill(process: subprocess.Popen[Any]) -> None:
    # Its descendants first (a sandbox's own processes are not in this
    # group), and only once they are gone does the caller tidy its folder.
    descendants = _descendants(process.pid) if process.poll() is None else []
    for pid in descendants:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 2
    while descendants and time.monotonic() < deadline:
        descendants = [pid for pid in descendants if not _dead(pid)]
        if descendants:
            time.sleep(0.001)


def _tidy(config: dict[str, Any]) -> None:
    """After submitted code ran, in a hills eval: put back the links to the
    hill that later verifier steps go through (./problem, ./data), and
    remove every symlink it left in its folder that leads outside what it
    may read. The evaluator can read private/; a link left for it to follow
    would make it read held-out data on the submission's behalf."""
    folder = config.get("cwd")
    if not folder or not os.path.isdir(folder):
        return
    links = config.get("links", {})
    roots = [os.path.realpath(p) for p in [folder] + list(config.get("public", []))]
    for name, target in links.items():
        path = os.path.join(folder, name)
        try:
            if os.readlink(path) == target:
                continue
        except OSError:
            pass
        _remove(path)
        os.symlink(target, path)
        sys.stderr.write(f"hills: submitted code replaced '{name}'; the link to the hill was put back\n")
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(current, name)
            if not os.path.islink(path) or (current == folder and name in links):
                continue
            real = os.path.realpath(path)
            if not any(real == root or real.startswith(root + os.sep) for root in roots):
                os.unlink(path)
                rel = os.path.relpath(path, folder)
                sys.stderr.write(f"hills: removed the link '{rel}' left by submitted code: it leads outside "
                                 "what submitted code may read\n")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil

        def writable(function: Callable[..., Any], failed: str, info: Any) -> None:
            # A folder submitted code made read-only is removed all the same.
            with contextlib.suppress(OSError):
                os.chmod(os.path.dirname(failed), 0o700)
                os.chmod(failed, 0o700)
                function(failed)

        shutil.rmtree(path, onerror=writable)
    elif os.path.lexists(path):
        os.unlink(path)


def main(argv: Sequence[str]) -> int:
    config = _config()
    config.setdefault("by", "interpreter")
    try:
        done = run_submission(argv, config=config)
    except subprocess.TimeoutExpired as exc:
        sys.stderr.write(f"hills: submitted code ran past its {exc.timeout}s limit and was killed\n")
        return 124
    return done.returncode if done.returncode >= 0 else 128 - done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
