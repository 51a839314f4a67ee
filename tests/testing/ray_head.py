"""A Ray head for the tests and the benchmark: on loopback only, with
2 CPUs unless told otherwise, its node's machine state (HILLS_HOME) its own,
started in a process group of its own and stopped by killing that group."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Only loopback: Ray would otherwise take this machine's own network address.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Head:
    """`ray start --head --block` on 127.0.0.1; `address` is what --on takes."""

    def __init__(self, node_home, env, cpus=2):
        self.node_home = Path(node_home)
        self.port = free_port()
        # Short: Ray's unix socket paths live under it.
        self.temp = tempfile.mkdtemp(prefix="hr", dir="/tmp")
        self.env = dict(env, HILLS_HOME=str(node_home), **LOOPBACK)
        self.env.pop("RAY_ADDRESS", None)
        argv = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--num-cpus", str(cpus),
                "--port", str(self.port), "--node-ip-address", "127.0.0.1", "--temp-dir", self.temp,
                "--include-dashboard", "false", "--disable-usage-stats",
                "--dashboard-agent-listen-port", str(free_port())]
        self.log = open(os.path.join(self.temp, "head.log"), "w")
        self.process = subprocess.Popen(argv, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 90
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if self.process.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("the Ray head did not start")
            time.sleep(0.5)

    @property
    def address(self):
        return f"ray://127.0.0.1:{self.port}"

    def stop(self):
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.log.close()
        shutil.rmtree(self.temp, ignore_errors=True)
