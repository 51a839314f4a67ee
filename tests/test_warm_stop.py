"""`python -m hills.warm stop` stops on its first call every server it
names, eight at once, each with a spare that waits with its standby: the
connection meant to wake a server may reach its spare instead, and the stop
asks again until the server has ended."""

import json
import os
import subprocess
import sys
import time

import pytest

from testing.util import BWRAP_USABLE
from testing.eval_fixtures import SCORE_EVAL, make_hill, real, submission
from testing.warm_fixtures import log_of, wait_for_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap (bwrap) is missing or cannot create "
                                                          "namespaces here (install the Debian package 'bubblewrap')")]

SERVERS = 8


def running():
    """The warm servers of this test's socket folder, as `hills warm status` lists them."""
    listed = subprocess.run([sys.executable, "-c", "import json, time; from hills.warm import control; "
                             "print(json.dumps([s.as_json(time.time()) for s in control.servers()]))"],
                            capture_output=True, text=True, check=True)
    return json.loads(listed.stdout)


def test_eight_servers_with_waiting_spares_stop_on_the_first_call(warm, hermetic, tmp_path, monkeypatch):
    make_hill("eight", SCORE_EVAL)
    folder = submission(tmp_path / "sub", {"score.txt": "2"})
    # A variable the server's key covers (LC_*) gives each its own server.
    for round_ in range(2):  # the first eval of each starts its server, the second leaves a spare waiting
        for index in range(SERVERS):
            monkeypatch.setenv("LC_HILLS_TEST_SERVER", str(index))
            result = real("hills", "eval", folder, "-H", "eight")
            assert result.code == 0, result.output
        if round_ == 0:
            wait_for_server(warm, SERVERS)
    monkeypatch.delenv("LC_HILLS_TEST_SERVER")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(1 for s in running() if s["spare"]) < SERVERS:
        time.sleep(0.2)
    listed = running()
    assert len(listed) == SERVERS and all(s["spare"] for s in listed), log_of(warm)
    stopped = subprocess.run([sys.executable, "-m", "hills.warm", "stop", "--all"], capture_output=True, text=True,
                             env=dict(os.environ))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout == f"stopped {SERVERS} warm servers\n"
    assert running() == [], log_of(warm)
    assert log_of(warm).count(" stopped: stopped") == SERVERS
