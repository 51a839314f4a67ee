"""The warm server's test helpers (docs/warm.md): servers on for one
test, in a socket folder of its own, and readers of their log."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest


@pytest.fixture
def warm(monkeypatch):
    """Warm servers on for this test, their sockets in a folder of its own;
    every server it started is stopped after."""
    runtime = tempfile.mkdtemp(prefix="hw-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.delenv("HILLS_WARM", raising=False)
    folder = Path(runtime) / "hills-warm"
    yield folder
    subprocess.run([sys.executable, "-m", "hills.warm", "stop", "--all"], capture_output=True, env=dict(os.environ))
    deadline = time.monotonic() + 10
    while list(folder.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(runtime, ignore_errors=True)


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


