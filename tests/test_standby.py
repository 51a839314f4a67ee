"""The standby evaluator (docs/standby.md): a warm server's spare starts the
evaluator of the request it served last before that request comes again;
the eval it serves prints, logs and exits as a cold one; another request is
sent back to the server; a changed hill is never scored by the old process;
a hill registered meanwhile stays hidden (and would not, without the refit);
nothing of the hill runs before the call; Ctrl-C reaches an eval served
with a standby; a standby that died is not used; a malformed request to a
spare is logged; stopping the server leaves no process and no run folder."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from testing.util import BWRAP_USABLE, default_signals
from hills.base import errors
from hills.evidence import trust
from hills.run import evaluate, runner, standby
from hills.disk import hill as hill_module

from testing.eval_fixtures import (attempts_log, hills, hills_home, log_entries, make_hill, processes_with, real,
                                    submission, tree_of)
from testing.warm_fixtures import log_of, wait_for_server, without_ids

pytestmark = pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap (bwrap) is missing or cannot create "
                                                         "namespaces here (install the Debian package 'bubblewrap')")

# Scores score.txt times FACTOR, after sleeping sleep.txt's seconds; its
# import leaves a mark in the run folder (the one folder it may write), and
# it says whether it could read PEEK.
EVAL = """\
    import time
    from pathlib import Path

    FACTOR = {factor}
    PEEK = {peek!r}
    (Path(__file__).resolve().parent.parent / "imported").write_text("yes")

    def eval(submission, *, final=False, **params):
        if (Path(submission) / "sleep.txt").exists():
            time.sleep(float((Path(submission) / "sleep.txt").read_text()))
        value = float((Path(submission) / "score.txt").read_text()) * FACTOR
        try:
            peeked = Path(PEEK).read_text() if PEEK else None
        except OSError:
            peeked = None
        return {{"passed": True, "metrics": [{{"name": "total", "value": value, "direction": "max"}}],
                 "details": {{"peeked": peeked}}}}
    """


def source(factor=1, peek=""):
    return textwrap.dedent(EVAL).format(factor=factor, peek=peek)


@pytest.fixture
def hill():
    make_hill("sb", source())
    return "sb"


def waiting(folder, count=1, timeout=30):
    """Until `count` spares have said they wait with a standby; the run folder of the last."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [line for line in log_of(folder).splitlines() if " waits with a standby in " in line]
        if len(lines) >= count:
            return Path(lines[-1].split(" waits with a standby in ", 1)[1])
        time.sleep(0.05)
    raise AssertionError(f"no spare came to wait; warm.log:\n{log_of(folder)}")


def shown_status(spare, timeout=10):
    """`hills warm status`, once it shows the spare `spare` waiting (the
    server writes what it shows as the spare tells it)."""
    deadline = time.monotonic() + timeout
    while True:
        shown = real("hills", "warm", "status")
        assert shown.code == 0, shown.output
        listed = json.loads(real("hills", "warm", "status", "--json").out)
        if [row["spare"] for row in listed] == [{"pid": spare, "standby": True}] or time.monotonic() > deadline:
            assert [row["spare"] for row in listed] == [{"pid": spare, "standby": True}], listed
            return shown.out
        time.sleep(0.1)


def gone(path, timeout=10):
    """Whether `path` is removed within `timeout` (a spare ends its standby as it leaves)."""
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


def with_standby(folder):
    return log_of(folder).count(" with its standby")


def runs(name):
    return sorted(path.name for path in (hills_home() / "runs" / name).iterdir())


def stop_servers(folder):
    real(sys.executable, "-m", "hills.warm", "stop", "--all")
    deadline = time.monotonic() + 20
    while (list(folder.glob("*.sock")) or " stopped: " not in log_of(folder)) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.slow
def test_a_repeated_eval_is_served_with_its_standby_as_a_cold_one_is(warm, hill, tmp_path):
    folder = submission(tmp_path / "s", {"score.txt": "2.5"})
    real("hills", "eval", folder, "-H", hill)
    wait_for_server(warm)
    assert real("hills", "eval", folder, "-H", hill).code == 0
    reserved = waiting(warm)
    assert reserved.is_dir() and os.listdir(reserved / "hill") == [] and not (reserved / "imported").exists()
    spare = int(log_of(warm).split(" waits with a standby in ")[-2].rsplit(" spare ", 1)[1])
    assert f"  spare        pid {spare}, waiting with a standby" in shown_status(spare)  # hills warm status
    third = real("hills", "eval", folder, "-H", hill)
    assert third.code == 0, third.output
    assert with_standby(warm) == 1, log_of(warm)
    report = json.loads(third.out)
    assert report["run_id"] == reserved.name and report["metrics"][0]["value"] == 2.5
    cold = real("hills", "eval", folder, "-H", hill, env=dict(os.environ, HILLS_WARM="off"))
    assert without_ids(report) == without_ids(json.loads(cold.out))
    assert third.err == cold.err
    entries = log_entries(attempts_log(hill, tree_of(Path(".hills") / hill)))
    assert ["started" in entry for entry in entries] == [True, False] * 4
    assert entries[5]["start"] == {"seq": entries[4]["seq"], "mac": entries[5]["prev"]}
    verified = real("hills", "verify", "-", input=third.out)
    assert verified.code == 0 and "signature valid" in verified.out, verified.output


@pytest.mark.slow
def test_another_request_goes_back_to_the_server_and_no_standby_is_left(warm, hill, tmp_path):
    first, other = submission(tmp_path / "a", {"score.txt": "1"}), submission(tmp_path / "b", {"score.txt": "7"})
    real("hills", "eval", first, "-H", hill)
    wait_for_server(warm)
    real("hills", "eval", first, "-H", hill)
    reserved = waiting(warm)
    done = real("hills", "eval", other, "-H", hill)
    assert done.code == 0, done.output
    assert json.loads(done.out)["metrics"][0]["value"] == 7.0
    assert " gave way to another request" in log_of(warm) and with_standby(warm) == 0
    assert gone(reserved)  # its run folder went with it
    waiting(warm, count=2)  # a spare for the request served last
    stop_servers(warm)
    assert len(runs(hill)) == 3  # the evals' own, and no spare's
    assert not processes_with(str(hills_home() / "runs"))


@pytest.mark.slow
def test_a_hill_committed_again_is_not_scored_by_the_old_standby(warm, hill, tmp_path):
    folder = submission(tmp_path / "s", {"score.txt": "3"})
    real("hills", "eval", folder, "-H", hill)
    wait_for_server(warm)
    real("hills", "eval", folder, "-H", hill)
    reserved = waiting(warm)
    hill_dir = Path(".hills") / hill
    (hill_dir / "eval.py").write_text(source(factor=2))
    assert hills("commit", hill, "-m", "doubled").code == 0
    done = real("hills", "eval", folder, "-H", hill)
    assert done.code == 0, done.output
    report = json.loads(done.out)
    assert report["metrics"][0]["value"] == 6.0 and report["tree_hash"] == tree_of(hill_dir)
    assert with_standby(warm) == 0 and gone(reserved)


@pytest.mark.slow
def test_ctrl_c_reaches_an_eval_served_with_its_standby(warm, hill, tmp_path):
    folder = submission(tmp_path / "s", {"score.txt": "1", "sleep.txt": "0"})
    env = dict(os.environ)  # one environment for the three calls: a spare serves only the same call

    def call():
        return subprocess.Popen(["hills", "eval", str(folder), "-H", hill], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, preexec_fn=default_signals)

    assert call().wait(timeout=120) == 0
    wait_for_server(warm)
    assert call().wait(timeout=120) == 0
    reserved = waiting(warm)
    (folder / "sleep.txt").write_text("2.5")  # the same call; what it submits is taken at the call (timeout 3 s)
    process = call()
    deadline = time.monotonic() + 30
    while not (reserved / "imported").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the evaluator is asleep
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, log_of(warm) + out + err
    assert json.loads(out)["status"] == "interrupted" and json.loads(out)["run_id"] == reserved.name
    last = log_entries(attempts_log(hill, tree_of(Path(".hills") / hill)))[-1]["report"]
    assert last["status"] == "interrupted" and last["reason"] == "interrupted by the user (Ctrl-C)"
    assert "exit 130" in log_of(warm) and with_standby(warm) == 1, log_of(warm)
    assert not processes_with(str(reserved))


@pytest.mark.slow
def test_without_standbys_no_spare_waits(warm, hill, tmp_path, monkeypatch):
    monkeypatch.setenv("HILLS_WARM_STANDBY", "off")
    folder = submission(tmp_path / "s", {"score.txt": "1"})
    for _ in range(3):
        assert real("hills", "eval", folder, "-H", hill).code == 0
        time.sleep(0.3)
    assert " served " in log_of(warm)
    assert " waits with a standby" not in log_of(warm) and with_standby(warm) == 0


# In-process: a spare's standby, made and adopted as in a spare.

# The standbys made in this process, each ended after its test (a no-op
# for one its eval took or ended).
RESERVED = []


@pytest.fixture
def loaded():
    trust.load_library()  # as a warm server does before it forks
    yield
    while RESERVED:
        RESERVED.pop().discard()


def reserved_for(name, folder):
    request = evaluate.EvalRequest(hill_module.resolve(name), str(folder))
    evaluate.evaluate(request)  # builds the environment: a standby needs it built
    made = standby.reserve(request)
    assert made is not None
    RESERVED.append(made)
    return request, made


@pytest.mark.slow
def test_nothing_of_the_hill_runs_before_the_call(loaded, tmp_path):
    make_hill("early", source())
    children = runner._children()
    request, made = reserved_for("early", submission(tmp_path / "s", {"score.txt": "4"}))
    run_dir = Path(made.ctx.run_dir)
    time.sleep(1.0)  # the standby has booted long since
    assert not (run_dir / "imported").exists()
    assert os.listdir(run_dir / "hill") == [] and os.listdir(run_dir / "submission") == []
    log = attempts_log("early", tree_of(Path(".hills") / "early"))
    before = len(log_entries(log))
    outcome = evaluate.evaluate(request, standby=made)
    assert outcome.exit_code == errors.EXIT_OK, outcome.report
    assert outcome.report["run_id"] == run_dir.name and made.used
    assert (run_dir / "imported").read_text() == "yes"
    assert len(log_entries(log)) == before + 2 and runner._children() <= children


def test_a_hill_registered_after_the_standby_stays_hidden(loaded, tmp_path):
    secret = Path(".hills") / "later" / "private" / "answer.txt"
    make_hill("peeker", source(peek=str(secret.resolve())))
    request, made = reserved_for("peeker", submission(tmp_path / "s", {"score.txt": "1"}))
    make_hill("later", source(), private={"answer.txt": "42\n"})  # hidden from every other hill's eval
    outcome = evaluate.evaluate(request, standby=made)
    assert outcome.exit_code == errors.EXIT_OK, outcome.report
    assert not made.used and not Path(made.ctx.run_dir).exists()  # it did not fit: ended, its folder removed
    assert outcome.report["details"]["peeked"] is None


def test_without_the_refit_the_old_standby_would_read_that_hills_private_data(loaded, tmp_path, monkeypatch):
    secret = Path(".hills") / "later" / "private" / "answer.txt"
    make_hill("peeker", source(peek=str(secret.resolve())))
    request, made = reserved_for("peeker", submission(tmp_path / "s", {"score.txt": "1"}))
    make_hill("later", source(), private={"answer.txt": "42\n"})
    monkeypatch.setattr(standby, "_refit", lambda plan, held: True)  # the boundary switched off
    outcome = evaluate.evaluate(request, standby=made)
    assert outcome.exit_code == errors.EXIT_OK, outcome.report
    assert made.used and outcome.report["details"]["peeked"] == "42\n"


def test_an_eval_not_handed_the_standby_starts_its_own(loaded, tmp_path):
    make_hill("unhanded", source())
    request, made = reserved_for("unhanded", submission(tmp_path / "s", {"score.txt": "3"}))
    outcome = evaluate.evaluate(request)  # no standby argument: nothing found elsewhere either
    assert outcome.exit_code == errors.EXIT_OK, outcome.report
    assert not made.used and made.alive() and outcome.report["run_id"] != os.path.basename(made.ctx.run_dir)
    # The control: handed it, the same eval takes it; a second eval is never handed it twice.
    taken = evaluate.evaluate(request, standby=made)
    assert taken.exit_code == errors.EXIT_OK and made.used
    assert taken.report["run_id"] == os.path.basename(made.ctx.run_dir)
    assert made.adopt(evaluate.resolve(request)) is None


def test_a_standby_that_died_meanwhile_is_not_used(loaded, tmp_path):
    make_hill("dies", source())
    request, made = reserved_for("dies", submission(tmp_path / "s", {"score.txt": "5"}))
    process = made._started.process
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    outcome = evaluate.evaluate(request, standby=made)
    assert outcome.exit_code == errors.EXIT_OK, outcome.report  # a fresh evaluator scored it
    assert not made.used and outcome.report["run_id"] != os.path.basename(made.ctx.run_dir)
    assert not Path(made.ctx.run_dir).exists()


def test_a_malformed_request_to_a_spare_is_logged_and_the_next_eval_is_served(warm, hill, tmp_path):
    import _socket

    folder = submission(tmp_path / "s", {"score.txt": "1"})

    def send(garbage):
        [socket_path] = warm.glob("*.sock")
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.connect(str(socket_path))
        conn.sendall(garbage)
        conn.shutdown(_socket.SHUT_WR)
        answer = conn.recv(100)
        conn.close()
        return answer

    real("hills", "eval", folder, "-H", hill)
    wait_for_server(warm)
    real("hills", "eval", folder, "-H", hill)
    first = waiting(warm)
    assert send(b"\xff\xff\xff\xff") == b""  # no P, no X: a caller would run its eval cold
    assert gone(first)
    assert real("hills", "eval", folder, "-H", hill).code == 0
    second = waiting(warm, count=2)
    assert send(b"\x00\x00\x00\x05hello") == b"R\n"  # a client would send it again, to the server
    assert gone(second)
    log = log_of(warm)
    assert "refused a request: request of 4294967295 bytes, at most 1048576" in log
    assert "gave way to another request (a request it cannot read)" in log
    done = real("hills", "eval", folder, "-H", hill)
    assert done.code == 0 and json.loads(done.out)["metrics"][0]["value"] == 1.0
