"""runner.run's gate: the evaluator's process boots while the gate (the
started entry) runs, and nothing after its read of the seal key runs before
the gate returns; a gate that fails leaves no process behind."""

import os
import sys
import time

import pytest

from hills import runner

# Stands for the shim: notes when it has booted, then reads the seal key
# from stdin (as the shim does before it imports the evaluator), then notes
# when it went on.
CHILD = """\
import os, sys, time
folder = sys.argv[1]
open(os.path.join(folder, "booted"), "w").write(repr(time.time()))
key = b""
while len(key) < 32:
    chunk = os.read(0, 32 - len(key))
    if not chunk:
        open(os.path.join(folder, "no-key"), "w").write("1")
        sys.exit(3)
    key += chunk
open(os.path.join(folder, "ran"), "w").write(repr(time.time()))
"""


def run(tmp_path, gate):
    return runner.run([sys.executable, "-c", CHILD, str(tmp_path)], cwd=str(tmp_path), env=dict(os.environ),
                      timeout=30, stdout_path=str(tmp_path / "out.log"), stderr_path=str(tmp_path / "err.log"),
                      result_pipe=True, gate=gate)


def test_the_child_boots_during_the_gate_and_runs_only_after_it(tmp_path):
    ended = []

    def gate():
        deadline = time.monotonic() + 30
        while not (tmp_path / "booted").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        ended.append(time.time())

    outcome = run(tmp_path, gate)
    assert outcome.exit_code == 0, (tmp_path / "err.log").read_text()
    booted, ran = float((tmp_path / "booted").read_text()), float((tmp_path / "ran").read_text())
    assert booted < ended[0] <= ran
    assert outcome.duration_s < 0.3 + 5  # counted from the gate's end, not the boot


def test_a_gate_that_fails_ends_the_child_without_its_key(tmp_path):
    class Refused(Exception):
        pass

    def gate():
        deadline = time.monotonic() + 30
        while not (tmp_path / "booted").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise Refused("the log cannot take the started entry")

    before = set(runner._children())
    with pytest.raises(Refused):
        run(tmp_path, gate)
    assert not (tmp_path / "ran").exists()
    assert set(runner._children()) <= before  # nothing left running or unreaped


def test_without_a_gate_the_key_is_there_at_once(tmp_path):
    outcome = runner.run([sys.executable, "-c", CHILD, str(tmp_path)], cwd=str(tmp_path), env=dict(os.environ),
                         timeout=30, stdout_path=str(tmp_path / "out.log"), stderr_path=str(tmp_path / "err.log"),
                         result_pipe=True)
    assert outcome.exit_code == 0 and (tmp_path / "ran").exists()
