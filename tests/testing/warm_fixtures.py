"""The warm server's test helpers (docs/warm.md): servers on for one
test, in a socket folder of its own (the `warm` fixture in conftest), the
stop at its end, and readers of their log."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def warm_servers(monkeypatch) -> Iterator[Path]:
    """Warm servers on inside the block, their sockets in a folder of its
    own; at the end every process started with that folder (server, spare,
    workers) is asked to stop and waited for, however long that takes, up
    to a deadline that only a stuck process reaches (then it is killed)."""
    runtime = tempfile.mkdtemp(prefix="hw-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.delenv("HILLS_WARM", raising=False)
    try:
        yield Path(runtime) / "hills-warm"
    finally:
        subprocess.run([sys.executable, "-m", "hills.warm", "stop", "--all"], capture_output=True, env=dict(os.environ))
        left = _wait_gone(processes_started_in(runtime), 60)
        for pid in left:
            with _gone_already():
                os.kill(pid, signal.SIGKILL)
        _wait_gone(left, 10)
        shutil.rmtree(runtime, ignore_errors=True)


def processes_started_in(runtime: str) -> list[int]:
    """Pids whose environment names `runtime` as XDG_RUNTIME_DIR: the warm
    servers of one test and what they forked."""
    wanted = b"XDG_RUNTIME_DIR=" + runtime.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if wanted in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _wait_gone(pids: list[int], deadline_s: float) -> list[int]:
    """Poll until every pid has exited (or is a zombie); those still
    running at the deadline."""
    from testing.eval_fixtures import alive

    deadline = time.monotonic() + deadline_s
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [pid for pid in left if alive(pid)]
    return left


@contextmanager
def _gone_already() -> Iterator[None]:
    try:
        yield
    except ProcessLookupError:
        pass


def log_of(folder):
    log = folder / "warm.log"
    return log.read_text() if log.exists() else ""


def wait_for_server(folder, count=1, timeout=30):
    """Until `count` servers have started in `folder` and listen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log_of(folder).count(" started for HILLS_HOME ") >= count and len(list(folder.glob("*.sock"))) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no warm server came up; warm.log:\n{log_of(folder)}")


def served(folder):
    return log_of(folder).count(" served ")


def without_ids(report):
    """A report less what differs between any two runs of one eval."""
    varying = ("run_id", "timestamp", "duration_s", "signature", "seeds", "measured", "attempt")
    return {key: value for key, value in report.items() if key not in varying}


