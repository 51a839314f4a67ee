"""Evaluators that misbehave: hang (with children and daemons), crash,
segfault, return NaN or a malformed dict, or flood stdout. Every outcome is
a logged `buggy` report with a precise reason, and nothing survives."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from testing.util import default_signals
from testing.eval_fixtures import (attempts_log, hills, hills_home, log_entries, make_hill, on_machine,
                                   processes_with, real, submission, tree_of)

MODES = ["ok", "hang", "crash", "segfault", "nan", "inf", "bool-metric", "not-dict", "no-passed",
         "metrics-not-list", "unknown-key", "bad-direction", "flood", "not-json", "huge-int", "nested-nan"]

# One hill whose evaluator misbehaves as its `mode` param says. To hang, it
# starts a child, a setsid daemon and a double-forked daemon, all carrying
# `token` on their command line (the host sees them by it, whatever pid
# namespace the sandbox gives them), writes ready-TOKEN in its cwd (the run
# folder) and sleeps forever.
BAD_EVAL = """\
    import math
    import os
    import signal
    import subprocess
    import sys
    import time

    SLEEPER = "import time\\nwhile True: time.sleep(1)"

    def _spawn(token):
        subprocess.Popen([sys.executable, "-c", SLEEPER, token])
        subprocess.Popen([sys.executable, "-c", SLEEPER, token], start_new_session=True)
        read_end, write_end = os.pipe()
        middle = os.fork()
        if middle == 0:
            os.setsid()
            if os.fork() == 0:
                os.close(read_end)
                os.write(write_end, b"up")
                os.close(write_end)
                os.execv(sys.executable, [sys.executable, "-c", SLEEPER, token])
            os._exit(0)
        os.close(write_end)
        os.waitpid(middle, 0)
        assert os.read(read_end, 2) == b"up"
        with open(f"ready-{token}", "w") as handle:
            handle.write("spawned")

    def eval(submission, *, final=False, mode="ok", token=""):
        good = {"passed": True, "metrics": [{"name": "m", "value": 1.0, "direction": "max"}]}
        if mode == "hang":
            _spawn(token)
            while True:
                time.sleep(1)
        if mode == "crash":
            raise RuntimeError("the evaluator fell over")
        if mode == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode == "nan":
            good["metrics"][0]["value"] = math.nan
        if mode == "inf":
            good["metrics"][0]["value"] = math.inf
        if mode == "bool-metric":
            good["metrics"][0]["value"] = True
        if mode == "not-dict":
            return [1, 2, 3]
        if mode == "no-passed":
            del good["passed"]
        if mode == "metrics-not-list":
            good["metrics"] = {"m": 1.0}
        if mode == "unknown-key":
            good["score"] = 1.0
        if mode == "bad-direction":
            good["metrics"][0]["direction"] = "up"
        if mode == "huge-int":
            good["metrics"][0]["value"] = 10 ** 400
        if mode == "nested-nan":
            good["config"] = [{"name": "grid", "value": [1.0, math.nan], "primary": True}]
        if mode == "not-json":
            good["details"] = {"when": object()}
        if mode == "flood":
            line = b"x" * (1 << 20)
            for _ in range(200):
                sys.stdout.buffer.write(line)
            sys.stdout.flush()
        return good
    """

PARAMS = f"""\
mode:
  type: categorical
  default: ok
  choices: [{", ".join(MODES)}]
token:
  type: str
  default: ""
"""


# The watchdog of the bad hills: long enough that a well-behaved mode, or a
# hanging one's set-up before the test signals it, ends well within it on a
# loaded 2-core machine; only `hang` runs into it.
WATCHDOG_S = 8


@pytest.fixture(scope="module")
def bad(module_machine):
    with on_machine(module_machine):
        return make_hill("bad", BAD_EVAL, timeout=WATCHDOG_S, params=PARAMS)


@pytest.fixture(scope="module")
def bad_bare(module_machine):
    """The same evaluator with `sandbox: none`: only the runner's own process
    group, subreaper and reaping stand between it and the machine."""
    with on_machine(module_machine):
        return make_hill("bad-bare", BAD_EVAL, timeout=WATCHDOG_S, params=PARAMS, extra="sandbox: none\n")


@pytest.fixture(params=["bad", "bad-bare"])
def hang_hill(request, bad, bad_bare):
    return request.param


@pytest.fixture
def sub(tmp_path):
    return submission(tmp_path / "sub", {"answer.txt": "42\n"})


@pytest.fixture
def token():
    """A word only the processes of one hanging eval carry; none is left behind."""
    word = "hang-" + uuid.uuid4().hex
    yield word
    for pid in processes_with(word):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def logged_last(name="bad"):
    """The newest report in the log of hill `name` (cwd is its project)."""
    return log_entries(attempts_log(name, tree_of(os.path.join(".hills", name))))[-1]["report"]


def gone(word):
    """Wait (bounded) for every process carrying `word` to be gone; True if so."""
    deadline = time.monotonic() + 10
    while processes_with(word) and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_with(word) == []


def test_well_behaved_mode_passes(bad, sub):
    result = hills("eval", sub, "-H", "bad")
    assert result.code == 0, result.output


@pytest.mark.slow
def test_hang_is_killed_with_everything_it_spawned(hang_hill, sub, token):
    result = real("hills", "eval", sub, "-H", hang_hill, "-p", "mode=hang", "-p", f"token={token}")
    assert result.code == 1, result.output
    report = result.report
    assert report["status"] == "buggy" and report["passed"] is False
    assert f"timed out after {WATCHDOG_S}s" in report["reason"]
    assert "BUGGY" in result.err and "timed out" in result.err
    run_dir = hills_home() / "runs" / hang_hill / report["run_id"]
    assert (run_dir / f"ready-{token}").read_text() == "spawned"
    assert gone(token)
    assert logged_last(hang_hill)["signature"] == report["signature"]


@pytest.mark.parametrize("stop, words", [
    (signal.SIGINT, "interrupted by the user (Ctrl-C)"),
    (signal.SIGTERM, "interrupted by SIGTERM"),
    (signal.SIGHUP, "interrupted by SIGHUP"),
])
def test_interrupt_kills_everything_and_is_logged(hang_hill, sub, token, stop, words):
    process = subprocess.Popen(["hills", "eval", str(sub), "-H", hang_hill, "-p", "mode=hang",
                                "-p", f"token={token}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=default_signals)
    ready = hills_home() / "runs" / hang_hill
    while not list(ready.glob(f"*/ready-{token}")) and process.poll() is None:
        time.sleep(0.02)
    assert process.poll() is None, process.communicate()
    deadline = time.monotonic() + 10
    while len(processes_with(token)) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)  # the double-forked one may still be exec'ing
    assert len(processes_with(token)) >= 5  # hills, the evaluator and the three it started
    process.send_signal(stop)
    out, err = process.communicate(timeout=60)
    assert gone(token)
    assert process.returncode == 130, out + err
    assert "error: interrupted" in err
    logged = logged_last(hang_hill)
    assert logged["status"] == "interrupted" and logged["reason"] == words
    printed = json.loads(out)  # the interrupted report is printed too, as logged
    assert printed["status"] == "interrupted" and printed["signature"] == logged["signature"]


def test_crash_names_the_exception(bad, sub):
    result = hills("eval", sub, "-H", "bad", "-p", "mode=crash")
    assert result.code == 1, result.output
    assert result.report["status"] == "buggy"
    assert "RuntimeError: the evaluator fell over" in result.report["reason"]
    run_dir = hills_home() / "runs" / "bad" / result.report["run_id"]
    assert "the evaluator fell over" in (run_dir / "stderr.log").read_text()


def test_segfault_names_the_signal(bad, sub):
    result = real("hills", "eval", sub, "-H", "bad", "-p", "mode=segfault")
    assert result.code == 1, result.output
    assert result.report["status"] == "buggy"
    assert "SIGSEGV" in result.report["reason"] and "no result" in result.report["reason"]
    assert logged_last()["reason"] == result.report["reason"]


@pytest.mark.parametrize("mode, words", [
    ("nan", ["metrics[0].value", "finite", "nan"]),
    ("inf", ["metrics[0].value", "finite", "inf"]),
    ("bool-metric", ["metrics[0].value", "finite number", "bool"]),
    ("not-dict", ["must return a dict", "list"]),
    ("no-passed", ["'passed' must be true or false"]),
    ("metrics-not-list", ["'metrics' must be a list"]),
    ("unknown-key", ["unknown key 'score'"]),
    ("bad-direction", ["metrics[0].direction", "'up'"]),
    ("not-json", ["object", "not JSON"]),
    ("huge-int", ["metrics[0].value", "too large"]),
    ("nested-nan", ["config[0].value[1]", "finite", "nan"]),
])
def test_malformed_results_are_buggy_with_a_precise_reason(bad, sub, mode, words):
    result = hills("eval", sub, "-H", "bad", "-p", f"mode={mode}")
    assert result.code == 1, result.output
    report = result.report
    assert report["status"] == "buggy" and report["passed"] is False and report["metrics"] == []
    for word in words:
        assert word in report["reason"], report["reason"]
    assert logged_last()["reason"] == report["reason"]
    assert hills("verify", hills_home() / "runs" / "bad" / report["run_id"] / "report.json").code == 0


def test_flooding_stdout_is_capped_and_the_eval_completes(bad, sub):
    from hills.run import runner

    result = real("hills", "eval", sub, "-H", "bad", "-p", "mode=flood")
    assert result.code == 0, result.output
    report = result.report
    assert report["status"] == "passing"
    run_dir = hills_home() / "runs" / "bad" / report["run_id"]
    size = (run_dir / "stdout.log").stat().st_size
    assert runner.OUTPUT_CAP <= size <= runner.OUTPUT_CAP + 200
    assert report["output_dropped_bytes"] == 200 * (1 << 20) - runner.OUTPUT_CAP
    assert "more bytes of output dropped" in (run_dir / "stdout.log").read_bytes()[-100:].decode()


def test_every_outcome_is_in_the_chained_log(bad):
    result = hills("attempts", "bad", "--json")
    assert result.code == 0, result.output
    attempts = json.loads(result.out)
    statuses = {a["report"]["status"] for a in attempts["attempts"]}
    assert {"passing", "buggy", "interrupted"} <= statuses
    assert attempts["chain"]["ok"] is True


def test_verbose_streams_the_evaluator_output(bad, tmp_path):
    folder = submission(tmp_path / "sub", {"answer.txt": "1"})
    for result in (real("hills", "eval", folder, "-H", "bad", "-p", "mode=crash", "-v"),
                   hills("eval", folder, "-H", "bad", "-p", "mode=crash", "-v")):
        assert result.code == 1, result.output
        assert "Traceback" in result.err and "RuntimeError: the evaluator fell over" in result.err
        assert "Traceback" not in result.out
    quiet = hills("eval", folder, "-H", "bad", "-p", "mode=crash")
    assert "Traceback" not in quiet.err


def test_an_in_process_eval_leaves_the_callers_other_children_alone(bad, sub):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    finished = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"])
    stat = f"/proc/{finished.pid}/stat"
    while not os.path.exists(stat) or open(stat).read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    try:
        result = hills("eval", sub, "-H", "bad", "-p", "mode=crash")
        assert result.code == 1, result.output
        assert bystander.poll() is None
        assert finished.wait() == 7
    finally:
        bystander.kill()
        bystander.wait()
