"""runner.run's gate: the evaluator's process boots while the gate (the
started entry) runs, and nothing after its read of the seal key runs before
the gate returns; a gate that fails leaves no process behind, and a shim
that gets no key imports nothing of the hill."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hills.run import runner

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


SHIM = Path(__file__).resolve().parent.parent / "hills" / "shim.py"
KEY_CHECK = """    if len(seal_key) != SEAL_KEY_SIZE:
        # No key came (the eval was refused, or its standby ended, before
        # the started entry): nothing of the hill may run.
        return 3
"""


def run_shim_without_a_key(tmp_path, shim):
    """The shim as an evaluator's process runs it, its key pipe closed
    unwritten; whether the evaluator (which marks its import) was imported."""
    hill = tmp_path / "hill"
    hill.mkdir()
    marker = tmp_path / "imported"
    (hill / "eval.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\n"
                                  "def eval(submission, *, final=False):\n    return {'passed': True}\n")
    result_r, result_w = os.pipe()
    key_r, key_w = os.pipe()
    os.close(key_w)  # no key: the gate failed, or a standby was ended
    request = json.dumps({"hill_dir": str(hill), "entry": "eval.py", "submission": str(tmp_path), "final": False,
                          "params": {}, "result_fd": result_w})
    done = subprocess.run([sys.executable, str(shim), "eval", request], stdin=key_r, pass_fds=(result_w,),
                          capture_output=True, text=True, timeout=60)
    os.close(key_r)
    os.close(result_w)
    os.close(result_r)
    return done.returncode, marker.exists()


def test_without_its_key_the_shim_imports_nothing_of_the_hill(tmp_path):
    assert KEY_CHECK in SHIM.read_text()
    assert run_shim_without_a_key(tmp_path, SHIM) == (3, False)


def test_without_the_key_check_the_hills_code_would_run(tmp_path):
    unchecked = tmp_path / "shim.py"
    unchecked.write_text(SHIM.read_text().replace(KEY_CHECK, ""))
    assert run_shim_without_a_key(tmp_path, unchecked)[1] is True
