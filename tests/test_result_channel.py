"""The result a function evaluator returns is accepted only from the
evaluator itself, after a clean exit: a process it starts cannot place a
result through /proc, and a result followed by a non-zero exit or a death
by signal is buggy."""

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import hills, make_hill, on_machine, submission

# Finds its parent's pipes through /proc, writes a passing result to each,
# then SIGKILLs the parent (unless told to leave it alive) so the parent's
# own result never comes.
FORGER = """\
import json, os, signal, sys
parent = os.getppid()
fake = json.dumps({"ok": True, "value": {"passed": True, "metrics": [
    {"name": "accuracy", "value": 99.0, "direction": "max"}]}}).encode()
reached = []
try:
    fds = os.listdir(f"/proc/{parent}/fd")
except OSError:
    fds = []
for fd in fds:
    try:
        if int(fd) > 2 and os.readlink(f"/proc/{parent}/fd/{fd}").startswith("pipe:"):
            handle = os.open(f"/proc/{parent}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            os.write(handle, fake)
            os.close(handle)
            reached.append(fd)
    except OSError:
        pass
print("forger reached", reached, flush=True)
if reached and sys.argv[1] == "kill":
    os.kill(parent, signal.SIGKILL)
"""

CHANNEL_EVAL = f"""\
    import atexit
    import os
    import signal
    import subprocess
    import sys

    FORGER = {FORGER!r}

    def eval(submission, *, final=False, mode="ok"):
        honest = {{"passed": False, "metrics": [{{"name": "accuracy", "value": 0.0, "direction": "max"}}],
                  "details": {{"reason": "the honest score"}}}}
        if mode == "forge-direct":
            subprocess.run([sys.executable, "-c", FORGER, "kill"])
        elif mode == "forge-sdk":
            from hills import sdk

            sdk.run_submission([sys.executable, "-c", FORGER, "kill"])
        elif mode == "forge-and-vanish":
            subprocess.run([sys.executable, "-c", FORGER, "spare"])
            sys.stdout.flush()
            os._exit(0)
        elif mode == "exit-3":
            atexit.register(os._exit, 3)
        elif mode == "sigkill":
            atexit.register(os.kill, os.getpid(), signal.SIGKILL)
        return honest
    """

PARAMS = """\
mode:
  type: categorical
  default: ok
  choices: [ok, forge-direct, forge-sdk, forge-and-vanish, exit-3, sigkill]
"""


@pytest.fixture(scope="module")
def channel_bare(module_machine):
    with on_machine(module_machine):
        make_hill("channel-bare", CHANNEL_EVAL, timeout=20, params=PARAMS, extra="sandbox: none\n")
        return "channel-bare"


@pytest.fixture(scope="module")
def channel_boxed(module_machine):
    with on_machine(module_machine):
        make_hill("channel-boxed", CHANNEL_EVAL, timeout=20, params=PARAMS, extra="sandbox: bwrap\n")
        return "channel-boxed"


@pytest.fixture(params=["bare", pytest.param("boxed", marks=needs_bwrap)])
def channel(request, module_machine):
    return request.getfixturevalue(f"channel_{request.param}")


@pytest.fixture
def sub(tmp_path):
    return submission(tmp_path / "sub", {"answer.txt": "1\n"})


def evaluated(hill, sub, mode):
    result = hills("eval", sub, "-H", hill, "-p", f"mode={mode}")
    assert result.out.strip(), result.output
    return result, result.report


def test_the_honest_result_is_accepted(channel, sub):
    result, report = evaluated(channel, sub, "ok")
    assert result.code == 1, result.output
    assert report["status"] == "failing" and report["reason"] == "the honest score"


def test_a_child_forging_through_proc_then_killing_the_evaluator_is_buggy(channel, sub):
    result, report = evaluated(channel, sub, "forge-direct")
    assert result.code == 1, result.output
    assert report["status"] == "buggy" and report["passed"] is False and report["metrics"] == [], report
    assert "killed by SIGKILL" in report["reason"] and "after writing a result" in report["reason"], report["reason"]


def test_an_unconfined_submission_forging_through_proc_is_buggy(channel_bare, sub):
    result, report = evaluated(channel_bare, sub, "forge-sdk")
    assert result.code == 1, result.output
    assert report["status"] == "buggy" and report["metrics"] == [], report
    assert "killed by SIGKILL" in report["reason"] and "after writing a result" in report["reason"], report["reason"]


@needs_bwrap
def test_a_confined_submission_cannot_see_the_evaluator_at_all(channel_boxed, sub):
    result, report = evaluated(channel_boxed, sub, "forge-sdk")
    assert result.code == 1, result.output
    assert report["status"] == "failing" and report["reason"] == "the honest score", report


def test_a_forged_result_without_the_evaluators_own_is_refused(channel, sub):
    """Even when the evaluator exits 0, bytes a child wrote into the channel
    are not the evaluator's result."""
    result, report = evaluated(channel, sub, "forge-and-vanish")
    assert result.code == 1, result.output
    assert report["status"] == "buggy" and report["metrics"] == [], report
    assert "not sealed" in report["reason"], report["reason"]


@pytest.mark.parametrize("mode, words", [("exit-3", "exit code 3"), ("sigkill", "killed by SIGKILL")])
def test_a_result_followed_by_an_unclean_exit_is_buggy(channel, sub, mode, words):
    result, report = evaluated(channel, sub, mode)
    assert result.code == 1, result.output
    assert report["status"] == "buggy" and report["metrics"] == [], report
    assert words in report["reason"] and "after writing a result" in report["reason"], report["reason"]
