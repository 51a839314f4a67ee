"""Running an evaluator process: its own session, a watchdog, bounded output
files, and nothing it spawned left alive afterwards."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time

from ..base.digests import blake2b, compare_digest
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from types import FrameType
    from typing import Any, Protocol, TextIO

    class _Echo(Protocol):
        """Where -v streams the evaluator's output: something taking bytes."""

        def write(self, chunk: bytes) -> object: ...

        def flush(self) -> object: ...


OUTPUT_CAP = 8 * 1024 * 1024
RESULT_CAP = 64 * 1024 * 1024
SEAL_KEY_SIZE = 32
# Variables the evaluator alone may know (the secret seed, seeds.ENV_SECRET):
# a process given a seal key gets them with it on stdin, never in its
# environment, which /proc/PID/environ shows to the user's other processes
# for as long as it lives (a standby waits minutes: docs/standby.md).
WITHHELD = ("HILLS_SECRET_SEED",)
_PR_SET_CHILD_SUBREAPER = 36
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Orphans of the evaluator (a double fork, a setsid daemon) are re-parented
    to this process instead of init, so they can be found and killed."""
    global _subreaper
    if _subreaper is None:
        try:
            _subreaper = prctl(_PR_SET_CHILD_SUBREAPER, 1) == 0
        except (OSError, AttributeError, ImportError, TypeError):
            _subreaper = False
    return _subreaper


def prctl(option: int, value: int) -> int:
    """prctl(2), called through _ctypes, the C part of ctypes: the ctypes
    package around it costs every eval about 2 ms more (hills.shim has a
    copy)."""
    import _ctypes

    class _Int(_ctypes._SimpleCData):  # ctypes.c_int
        _type_ = "i"

    class _Function(_ctypes.CFuncPtr):  # what ctypes.CDLL(None, use_errno=True).prctl is
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = _Int

    libc = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: the program and its libraries, as ctypes.CDLL(None)
    return int(_Function(_ctypes.dlsym(libc, "prctl"))(option, value, 0, 0, 0))


def _children() -> set[int]:
    pids: set[int] = set()
    task_root = f"/proc/{os.getpid()}/task"
    try:
        tasks = os.listdir(task_root)
    except OSError:
        return pids
    for task in tasks:
        try:
            with open(f"{task_root}/{task}/children") as handle:
                pids.update(int(p) for p in handle.read().split())
        except OSError:
            continue
    return pids


def _descendants(root_pids: Iterable[int]) -> set[int]:
    found, frontier = set(), list(root_pids)
    while frontier:
        pid = frontier.pop()
        if pid in found:
            continue
        found.add(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    frontier.extend(int(p) for p in handle.read().split())
        except OSError:
            continue
    return found


def reap_everything(keep: frozenset[int] = frozenset()) -> int:
    """Kill every descendant of this process except the children in `keep`
    (those it had before the run) and their own trees; return how many.

    Only those processes are waited for, never waitpid(-1): a caller running
    evals in-process (a notebook, a test runner) keeps its other children
    and their exit statuses.
    """
    killed = 0
    for _ in range(50):
        pids = _descendants(_children() - keep)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            waiting = _children() - keep
            if not waiting:
                break
            for pid in waiting:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            if not _children() - keep:  # all reaped: no need to sleep
                break
            time.sleep(0.001)
    return killed


class _Pump(threading.Thread):
    """Copy a pipe into a file up to a cap, optionally echoing to a stream."""

    def __init__(self, pipe: int, path: str, cap: int, echo: _Echo | None = None) -> None:
        super().__init__(daemon=True)
        self.pipe, self.path, self.cap, self.echo = pipe, path, cap, echo
        self.written = 0
        self.dropped = 0

    def run(self) -> None:
        with open(self.path, "wb") as out:
            while True:
                chunk = os.read(self.pipe, 65536)
                if not chunk:
                    break
                room = self.cap - self.written
                if room > 0:
                    out.write(chunk[:room])
                    self.written += min(room, len(chunk))
                self.dropped += max(0, len(chunk) - max(room, 0))
                if self.echo is not None:
                    self.echo.write(chunk)
                    self.echo.flush()
            if self.dropped:
                out.write(f"\n[hills: {self.dropped} more bytes of output dropped]\n".encode())
        os.close(self.pipe)


class _TextEcho:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, chunk: bytes) -> None:
        self.stream.write(chunk.decode("utf-8", "replace"))

    def flush(self) -> None:
        self.stream.flush()


def _echo_stream() -> _Echo:
    """Where -v streams output: stderr's bytes, or its text when it has no
    byte buffer (a notebook, a caller that redirected sys.stderr)."""
    buffer = getattr(sys.stderr, "buffer", None)
    return buffer if buffer is not None else _TextEcho(sys.stderr)


class _ResultReader(threading.Thread):
    def __init__(self, fd: int, cap: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap = fd, cap
        self.data = bytearray()
        self.overflow = False

    def run(self) -> None:
        while True:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                break
            if len(self.data) + len(chunk) > self.cap:
                self.overflow = True
                continue
            self.data.extend(chunk)
        os.close(self.fd)


class _StopSignals:
    """While the evaluator runs, SIGINT, SIGTERM and SIGHUP raise
    KeyboardInterrupt: the evaluator has its own session, so only this process
    can take its group down (a plain SIGTERM would leave it running). After the
    first one, later ones are ignored so they cannot cut the cleanup short; one
    arriving once disarmed (during cleanup) is kept in `pending`. Signals
    already ignored (nohup) stay ignored."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.armed = True
        self.pending: str | None = None
        self.previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self.previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        for other in self.previous:
            signal.signal(other, signal.SIG_IGN)
        name = signal.Signals(signum).name
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt(name)
        self.pending = self.pending or name

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


@frozen
class ProcessOutcome:
    """How an evaluator process ended: its exit code (None when it was
    killed), whether the watchdog or a stop signal ended it, what came back
    on the result pipe (only a message sealed with the run's key; anything
    else there sets `result_unsealed`), and what the run cost."""

    exit_code: int | None = None
    timed_out: bool = False
    interrupted: bool = False
    stop_signal: str | None = None
    result_bytes: bytes | None = None
    result_unsealed: bool = False
    result_overflow: bool = False
    duration_s: float = 0.0
    output_dropped: int = 0
    killed_leftovers: int = 0

    def describe_exit(self) -> str:
        if self.exit_code is None:
            return "did not exit"
        if self.exit_code < 0:
            try:
                name = signal.Signals(-self.exit_code).name
            except ValueError:
                name = f"signal {-self.exit_code}"
            return f"killed by {name}"
        if 128 < self.exit_code < 128 + 65:
            # A wrapper (bwrap, a shell) reports a child killed by signal N as 128+N.
            try:
                return f"exit code {self.exit_code}: killed by {signal.Signals(self.exit_code - 128).name}"
            except ValueError:
                pass
        return f"exit code {self.exit_code}"


def run(argv: Sequence[str], *, cwd: str, env: Mapping[str, str], timeout: float | None, stdout_path: str,
        stderr_path: str, verbose: bool = False, result_pipe: bool = False,
        own_pid_namespace: bool = False, gate: Callable[[], None] | None = None,
        prepare: Callable[[], None] | None = None) -> ProcessOutcome:
    """Run `argv` under the watchdog. When `result_pipe`, a pipe's write end
    is passed to the child as an inherited fd, named in env HILLS_RESULT_FD,
    and a fresh seal key arrives on its stdin; the message it writes there,
    sealed with that key, is returned in `ProcessOutcome.result_bytes`.

    `own_pid_namespace` says that argv starts everything it runs in a pid
    namespace of its own that dies with it (bwrap --unshare-pid
    --die-with-parent): an orphan there is re-parented to that namespace's
    init, never to a subreaper outside it, and killed when the namespace
    ends. This process then becomes a subreaper only once the child is
    started, while it boots (the import of _ctypes, a few ms, is then off
    the eval's critical path), to reap the namespace's init, which bwrap
    leaves behind as it exits.

    `gate` (with `result_pipe`): called once the child is started, before
    it gets its seal key. The shim reads the key before it imports the
    evaluator, so the child boots (the sandbox, the interpreter, the shim)
    while `gate` runs, and nothing of the hill runs before `gate` returns;
    the watchdog and the duration count from then. When `gate` raises, the
    child gets no key, is ended, and the exception goes on.

    `prepare` (with `gate`): called first, while the child boots, where a
    stop signal interrupts it (the run is then interrupted, and the child
    ended, before `gate`); `gate` itself runs with stop signals held until
    it returns, so what it writes is never cut in half."""
    started = start(argv, cwd=cwd, env=env, stdout_path=stdout_path, stderr_path=stderr_path, verbose=verbose,
                    result_pipe=result_pipe, own_pid_namespace=own_pid_namespace, gated=gate is not None)
    return started.finish(timeout, gate=gate, prepare=prepare)


def start(argv: Sequence[str], *, cwd: str, env: Mapping[str, str], stdout_path: str, stderr_path: str,
          verbose: bool = False, result_pipe: bool = False, own_pid_namespace: bool = False,
          gated: bool = False, hold_signals: bool = True) -> Started:
    """Start `argv` as `run` does and return it running, for `Started.finish`
    (or `Started.discard`). `gated` (with `result_pipe`): the child waits for
    its seal key until finish() sends it. `hold_signals`: stop signals are
    caught from now on (kept until finish() can act on them); a standby
    (docs/standby.md) leaves them to its process until finish()."""
    if not own_pid_namespace:
        become_subreaper()
    self = Started()
    self.argv, self.env = list(argv), dict(env)
    self.callers_children = frozenset(_children())
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pass_fds: tuple[int, ...] = ()
    stdin: int = subprocess.DEVNULL
    if result_pipe:
        res_r, res_w = os.pipe()
        self.key_tail = b"".join(b"\0" + f"{name}={env[name]}".encode("utf-8", "surrogateescape")
                                 for name in WITHHELD if name in env)
        env = {name: value for name, value in env.items() if name not in WITHHELD}
        env["HILLS_RESULT_FD"] = str(res_w)
        pass_fds = (res_w,)
        if not gated:
            stdin, self.seal_key = _seal_key_pipe(self.key_tail)
        else:
            self.seal_key = os.urandom(SEAL_KEY_SIZE)
            stdin, self.key_w = os.pipe()
            os.set_inheritable(self.key_w, False)
    echo_out = _echo_stream() if verbose else None
    self.pumps = [_Pump(out_r, stdout_path, OUTPUT_CAP, echo_out), _Pump(err_r, stderr_path, OUTPUT_CAP, echo_out)]
    self.started = time.monotonic()
    # Installed before the evaluator starts, but disarmed: a stop signal
    # arriving while it starts is kept, and acted on once it can be killed.
    if hold_signals:
        self.stops = _StopSignals()
        self.stops.armed = False
    try:
        self.process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=stdin, stdout=out_w,
                                        stderr=err_w, pass_fds=pass_fds, start_new_session=True)
    except BaseException:
        if self.stops is not None:
            self.stops.restore()
        if self.key_w >= 0:
            os.close(self.key_w)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
        if result_pipe:
            os.close(res_w)
            os.close(stdin)
    for pump in self.pumps:
        pump.start()
    if result_pipe:
        self.reader = _ResultReader(res_r, RESULT_CAP)
        self.reader.start()
    if own_pid_namespace:
        become_subreaper()
    return self


class Started:
    """An evaluator process `start` started: its pipes, its output pumps,
    and (gated) the seal key it waits for."""

    process: subprocess.Popen[bytes]
    argv: list[str]
    env: dict[str, str]

    def __init__(self) -> None:
        self.callers_children: frozenset[int] = frozenset()
        self.pumps: list[_Pump] = []
        self.reader: _ResultReader | None = None
        self.seal_key = b""
        self.key_tail = b""  # the WITHHELD variables, sent after the key
        self.key_w = -1
        self.stops: _StopSignals | None = None
        self.started = 0.0

    def finish(self, timeout: float | None, gate: Callable[[], None] | None = None,
               prepare: Callable[[], None] | None = None) -> ProcessOutcome:
        """Run `prepare` and `gate` (as `run` says), send the key, and wait
        for the process under the watchdog; everything it left is ended."""
        process = self.process
        if self.stops is None:
            self.stops = _StopSignals()
            self.stops.armed = False
        stops = self.stops
        exit_code: int | None = None
        timed_out = interrupted = False
        stop_signal: str | None = None
        result_bytes: bytes | None = None
        result_overflow = result_unsealed = False
        try:
            try:
                if self.key_w >= 0:
                    assert gate is not None
                    try:
                        if prepare is not None:
                            _prepare(prepare, stops)
                        gate()
                    except BaseException:
                        self._withhold_key()  # no key: the shim leaves before the evaluator is imported
                        _kill_group(process)
                        raise
                    try:
                        os.write(self.key_w, self.seal_key + self.key_tail)
                    except BrokenPipeError:
                        pass  # the child is gone; its exit says why
                    finally:
                        self._withhold_key()
                    self.started = time.monotonic()
                stops.armed = True
                if stops.pending:
                    early, stops.pending = stops.pending, None
                    stops.armed = False
                    raise KeyboardInterrupt(early)
                exit_code = _wait(process, timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process)
        except KeyboardInterrupt as exc:
            interrupted, stop_signal = True, str(exc) or "SIGINT"
            _kill_group(process)
        finally:
            stops.armed = False
            duration_s = time.monotonic() - self.started
            killed_leftovers = self._end()
            if self.reader is not None:
                result_overflow = self.reader.overflow
                result_bytes = unseal(bytes(self.reader.data), self.seal_key)
                result_unsealed = result_bytes is None and bool(self.reader.data)
            stops.restore()
        if stops.pending:
            raise KeyboardInterrupt(stops.pending)
        return ProcessOutcome(exit_code=exit_code, timed_out=timed_out, interrupted=interrupted,
                              stop_signal=stop_signal, result_bytes=result_bytes, result_unsealed=result_unsealed,
                              result_overflow=result_overflow, duration_s=duration_s,
                              output_dropped=sum(p.dropped for p in self.pumps), killed_leftovers=killed_leftovers)

    def discard(self) -> None:
        """End the process without its key (the shim then leaves before it
        imports anything of the hill), and everything it started."""
        self._withhold_key()
        _kill_group(self.process)
        self._end()
        if self.stops is not None:
            self.stops.restore()

    def _withhold_key(self) -> None:
        if self.key_w >= 0:
            os.close(self.key_w)
            self.key_w = -1

    def _end(self) -> int:
        killed = _end_group(self.process) + reap_everything(keep=self.callers_children)
        for pump in self.pumps:
            pump.join(timeout=5)
        if self.reader is not None:
            self.reader.join(timeout=5)
        return killed


def _prepare(prepare: Callable[[], None], stops: _StopSignals) -> None:
    """Run `prepare` with stop signals armed: one kept while the child
    started (or arriving now) interrupts it."""
    if stops.pending:
        early, stops.pending = stops.pending, None
        raise KeyboardInterrupt(early)
    stops.armed = True
    try:
        prepare()
    finally:
        stops.armed = False


def _seal_key_pipe(tail: bytes = b"") -> tuple[int, bytes]:
    """A fresh key, and the read end of a pipe holding it (and `tail`, the
    WITHHELD variables), for the child's stdin: the shim reads it before the
    evaluator is imported, so it is in no argv, no environment and no fd a
    process the evaluator starts can inherit or open later."""
    seal_key = os.urandom(SEAL_KEY_SIZE)
    key_r, key_w = os.pipe()
    try:
        os.write(key_w, seal_key + tail)
    finally:
        os.close(key_w)
    return key_r, seal_key


def seal(payload: bytes, seal_key: bytes) -> bytes:
    """The sealed form of a result: a keyed BLAKE2b digest of it in hex, a
    newline, the result. Written by the shim (which has its own copy)."""
    return blake2b(payload, key=seal_key, digest_size=32).hexdigest().encode() + b"\n" + payload


def unseal(data: bytes, seal_key: bytes) -> bytes | None:
    """The result in `data` when it is exactly one message sealed with
    `seal_key`; None for anything else (bytes another process wrote into
    the channel, before, after or instead of the evaluator's)."""
    digest, newline, payload = data.partition(b"\n")
    if not newline or not seal_key:
        return None
    expected = blake2b(payload, key=seal_key, digest_size=32).hexdigest().encode()
    return payload if compare_digest(digest, expected) else None


def _wait(process: subprocess.Popen[bytes], timeout: float | None) -> int:
    """Popen.wait with a timeout polls with growing sleeps; a pidfd wakes us
    the moment the process exits, which matters for short replicates."""
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return process.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(None if timeout is None else max(0, int(timeout * 1000))):
            raise subprocess.TimeoutExpired(process.args, timeout or 0.0)
        return process.wait()
    finally:
        os.close(fd)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def _end_group(process: subprocess.Popen[bytes]) -> int:
    """Kill what is left of the evaluator's process group after it exited."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
        return 1
    except (ProcessLookupError, PermissionError):
        return 0
