"""The warm eval server (docs/warm.md): an eval it serves prints, logs and
exits as a cold one; signals reach the worker; a killed caller takes its
eval down; a worker that cannot be the caller declines; new code names a
new server; no other user is served."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.util import BWRAP_USABLE, REPO_ROOT, default_signals
from testing.eval_fixtures import (attempts_log, hills_home, log_entries, make_hill, processes_with, real,
                                   submission, tree_of)
from testing.warm_fixtures import log_of, served, wait_for_server, without_ids

pytestmark = pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap (bwrap) is missing or cannot create "
                                                         "namespaces here (install the Debian package 'bubblewrap')")

# Scores score.txt; sleeps first when the submission holds sleep.txt (a
# number of seconds), after writing its pid where the test can see it.
EVAL = """\
    import os, time
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        submission = Path(submission)
        if (submission / "sleep.txt").exists():
            time.sleep(float((submission / "sleep.txt").read_text()))
        value = float((submission / "score.txt").read_text())
        return {"passed": value >= 0, "metrics": [{"name": "total", "value": value, "direction": "max"}],
                "details": {} if value >= 0 else {"reason": "negative score"}}
    """


@pytest.fixture
def hill():
    make_hill("w", EVAL)
    return "w"


def sub(root, score="2.5", **more):
    return submission(root, {"score.txt": score, **more})


def test_an_eval_served_warm_prints_logs_and_exits_as_a_cold_one(warm, hill, tmp_path):
    folder = sub(tmp_path / "s")
    first = real("hills", "eval", folder, "-H", hill)
    assert first.code == 0, first.output
    wait_for_server(warm)
    second = real("hills", "eval", folder, "-H", hill)
    assert second.code == 0, second.output
    assert served(warm) == 1, log_of(warm)
    assert "housekeeping failed" not in log_of(warm)
    cold = real("hills", "eval", folder, "-H", hill, env=dict(os.environ, HILLS_WARM="off"))
    assert served(warm) == 1
    assert without_ids(json.loads(second.out)) == without_ids(json.loads(cold.out))
    assert second.err == cold.err
    entries = log_entries(attempts_log(hill, tree_of(Path(".hills") / hill)))
    reports = [entry["report"] for entry in entries if "report" in entry]
    assert [report["run_id"] for report in reports] == [json.loads(done.out)["run_id"]
                                                          for done in (first, second, cold)]
    verified = real("hills", "verify", "-", input=second.out)
    assert verified.code == 0 and "signature valid" in verified.out, verified.output


def old_run_folders(hill):
    """Enough run folders that the oldest is pruned by the next eval, the
    oldest of 40,000 files: its removal takes a while."""
    from hills.run import folders

    runs = hills_home() / "runs" / hill
    for index in range(folders.KEEP_RUNS):
        (runs / f"20000101T0000{index:02d}-old").mkdir(parents=True)
    oldest = runs / "19990101T000000-old"
    for index in range(200):
        part = oldest / f"{index:03d}"
        part.mkdir(parents=True)
        for name in range(200):
            (part / str(name)).write_bytes(b"")
    an_hour_ago = time.time() - 3600
    os.utime(oldest, (an_hour_ago, an_hour_ago))
    return oldest


@pytest.mark.slow
def test_a_caller_reading_the_output_to_its_end_is_done_when_it_has_the_exit_code(warm, hill, tmp_path):
    """`score=$(hills eval ...)` ends with the eval, not with the worker's
    housekeeping after it: here the removal of an old run folder of many
    files, which the worker is still doing when the caller's pipes close."""
    folder = sub(tmp_path / "s")
    first = real("hills", "eval", folder, "-H", hill)
    assert first.code == 0, first.output
    wait_for_server(warm)
    oldest = old_run_folders(hill)
    done = subprocess.run(["hills", "eval", str(folder), "-H", hill, "--json"], capture_output=True, text=True,
                          timeout=120)
    # The caller read both pipes to their end: the worker must have let go of them.
    assert done.returncode == 0 and json.loads(done.stdout)["passed"], done.stderr
    lines = [line for line in log_of(warm).splitlines() if " served hills eval" in line]
    assert len(lines) == 1, log_of(warm)
    worker = int(lines[0].split(" served ")[0].split()[-1])
    with open(f"/proc/{worker}/stat") as handle:  # a worker that had exited would be gone, or a zombie
        assert handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    assert oldest.exists()
    deadline = time.monotonic() + 60
    while oldest.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not oldest.exists(), "the worker never pruned the old run folder"


@pytest.mark.slow
def test_a_cold_eval_ends_before_its_housekeeping(hill, tmp_path):
    """A cold eval (no warm server) exits once its report is out; the old
    run folder it prunes goes in a child of its own, holding none of the
    caller's pipes (D-350)."""
    folder = sub(tmp_path / "s")
    cold = dict(os.environ, HILLS_WARM="off")
    first = real("hills", "eval", folder, "-H", hill, env=cold)
    assert first.code == 0, first.output
    oldest = old_run_folders(hill)
    done = subprocess.run(["hills", "eval", str(folder), "-H", hill, "--json"], capture_output=True, text=True,
                          timeout=120, env=cold)
    assert done.returncode == 0 and json.loads(done.stdout)["passed"], done.stderr
    assert oldest.exists()
    deadline = time.monotonic() + 60
    while oldest.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not oldest.exists(), "the cold eval never pruned the old run folder"
    # Only the oldest went: the others are too new to prune (a minute), the two evals' own included.
    assert len(list(oldest.parent.iterdir())) == 20 + 2


@pytest.mark.slow
def test_failures_and_mistakes_have_the_cold_exit_codes_and_messages(warm, hill, tmp_path):
    real("hills", "eval", sub(tmp_path / "s"), "-H", hill)
    wait_for_server(warm)
    cases = [
        (["eval", sub(tmp_path / "neg", "-1"), "-H", hill], 1),
        (["eval", sub(tmp_path / "s2"), "-H", "no-such-hill"], 2),
        (["eval", tmp_path / "missing", "-H", hill], 2),
        (["eval", sub(tmp_path / "s3"), "-H", hill, "-p", "nothing=1"], 2),
    ]
    for argv, code in cases:
        warm_run = real("hills", *argv)
        cold_run = real("hills", *argv, env=dict(os.environ, HILLS_WARM="off"))
        assert (warm_run.code, cold_run.code) == (code, code), (argv, warm_run.output, cold_run.output)
        if code == 2:
            assert warm_run.err == cold_run.err and "error: " in warm_run.err, argv
    assert served(warm) == len(cases), log_of(warm)


@pytest.mark.slow
def test_ctrl_c_reaches_the_worker_and_the_eval_is_logged_interrupted(warm, hill, tmp_path):
    real("hills", "eval", sub(tmp_path / "s"), "-H", hill)
    wait_for_server(warm)
    slow = sub(tmp_path / "slow", **{"sleep.txt": "30"})
    process = subprocess.Popen(["hills", "eval", str(slow), "-H", hill], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    runs = hills_home() / "runs" / hill
    deadline = time.monotonic() + 30
    while len(list(runs.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the evaluator is asleep
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, out + err
    assert "error: interrupted" in err
    assert json.loads(out)["status"] == "interrupted"
    last = log_entries(attempts_log(hill, tree_of(Path(".hills") / hill)))[-1]["report"]
    assert last["status"] == "interrupted" and last["reason"] == "interrupted by the user (Ctrl-C)"
    assert " served eval: exit 130" in log_of(warm).replace("hills eval", "eval")


@pytest.mark.slow
def test_a_signal_the_caller_ignores_is_not_passed_on(warm, hill, tmp_path):
    real("hills", "eval", sub(tmp_path / "s"), "-H", hill)
    wait_for_server(warm)
    slow = sub(tmp_path / "slow", **{"sleep.txt": "2"})
    marker = str(hills_home() / "runs" / hill) + "/"
    # As under nohup: SIGHUP ignored, which a cold eval leaves ignored too.
    process = subprocess.Popen(["bash", "-c", f"trap '' HUP; exec hills eval {slow} -H {hill}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + err
    assert json.loads(out)["status"] == "passing"
    assert served(warm) == 1, log_of(warm)


@pytest.mark.slow
def test_a_killed_caller_takes_its_worker_and_evaluator_down(warm, hill, tmp_path):
    real("hills", "eval", sub(tmp_path / "s"), "-H", hill)
    wait_for_server(warm)
    slow = sub(tmp_path / "slow", **{"sleep.txt": "60"})
    process = subprocess.Popen(["hills", "eval", str(slow), "-H", hill], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    marker = str(hills_home() / "runs" / hill) + "/"
    log = attempts_log(hill, tree_of(Path(".hills") / hill))

    def running():  # the evaluator's process is up and its started entry logged
        return processes_with(marker) and "started" in log_entries(log)[-1]

    deadline = time.monotonic() + 30
    while not running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running(), "the evaluator never started"
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []
    entries = log_entries(log)
    assert "started" in entries[-1] and "report" not in entries[-1]  # no outcome: ABANDONED
    shown = real("hills", "attempts", hill)
    assert "ABANDONED" in shown.out, shown.output


@pytest.mark.slow
def test_a_worker_that_cannot_take_the_callers_limits_declines_and_the_eval_runs_cold(warm, hill, tmp_path):
    folder = sub(tmp_path / "s")
    # The server inherits a lower hard limit than a later caller has.
    first = real("bash", "-c", f"ulimit -n 512 && exec hills eval {folder} -H {hill}")
    assert first.code == 0, first.output
    wait_for_server(warm)
    second = real("hills", "eval", folder, "-H", hill)
    assert second.code == 0, second.output
    assert served(warm) == 0
    assert "declined: cannot set RLIMIT_NOFILE" in log_of(warm)
    # A caller within the server's limits is served, and gets its own limit.
    third = real("bash", "-c", f"ulimit -n 300 && exec hills eval {folder} -H {hill}")
    assert third.code == 0, third.output
    assert served(warm) == 1, log_of(warm)


@pytest.mark.slow
def test_edited_hills_code_is_served_by_a_new_server(warm, hill, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(REPO_ROOT / "hills", copy / "hills", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("examples", "hooks", "skills"):
        os.symlink(REPO_ROOT / name, copy / name)
    launcher = tmp_path / "bin" / "hills"
    launcher.parent.mkdir()
    launcher.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(copy)!r})\n"
                        "from hills.entry import main\nmain()\n")
    launcher.chmod(0o755)
    folder = sub(tmp_path / "s")
    assert real(launcher, "eval", folder, "-H", hill).code == 0
    wait_for_server(warm)
    assert real(launcher, "eval", folder, "-H", hill).code == 0
    assert served(warm) == 1
    # An edit in the package: the running server's code is not the code on disk.
    summary = copy / "hills" / "commands" / "eval.py"
    summary.write_text(summary.read_text() + "\n# edited\n")
    edited = real(launcher, "eval", folder, "-H", hill)
    assert edited.code == 0, edited.output
    assert served(warm) == 1, log_of(warm)  # not served by the old server
    wait_for_server(warm, count=2)
    assert real(launcher, "eval", folder, "-H", hill).code == 0
    assert served(warm) == 2
    keys = {line.split()[1] for line in log_of(warm).splitlines() if " served " in line}
    assert len(keys) == 2, log_of(warm)


@pytest.mark.slow
def test_a_socket_folder_others_can_enter_is_not_used(warm, hill, tmp_path):
    warm.mkdir(mode=0o700)
    warm.chmod(0o777)
    folder = sub(tmp_path / "s")
    for _ in range(2):
        assert real("hills", "eval", folder, "-H", hill).code == 0
    time.sleep(1.0)
    assert list(warm.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to make a second user (useradd)")
def test_another_user_is_never_served_and_would_be_without_the_check(warm, hill, tmp_path):
    from testing.service_fixtures import make_user, remove_user, tool

    folder = sub(tmp_path / "s")
    assert real("hills", "eval", folder, "-H", hill).code == 0
    wait_for_server(warm)
    [socket_path] = warm.glob("*.sock")
    # The folder and socket opened to everyone: the peer check is what is left.
    os.chmod(Path(os.environ["XDG_RUNTIME_DIR"]), 0o755)
    warm.chmod(0o755)
    socket_path.chmod(0o777)
    user = make_user("hillswarm")
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python is None:
        pytest.skip("no python3 another user can run in /usr/local/bin, /usr/bin or /bin")
    probe = Path(os.environ["XDG_RUNTIME_DIR"]) / "probe.py"
    probe.write_text(
        "import _socket, os, sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "from hills.warm import client as warm\n"
        "conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)\n"
        "conn.connect(sys.argv[1])\n"
        # What a request claims is the caller's to write: it claims root's groups.
        "os.getgroups = lambda: [int(g) for g in sys.argv[2].split(',') if g]\n"
        "try:\n"
        "    warm._send(conn, warm._request('hills', ['eval', '--help']), [0, 1, 2])\n"
        "    print(warm._await(conn).code)\n"
        "except OSError:\n"  # as warm.call takes a refusal: the caller runs its own eval
        "    print(None)\n")
    probe.chmod(0o644)
    try:
        def attempt():
            claimed = ",".join(str(group) for group in os.getgroups())
            done = subprocess.run([tool("runuser"), "-u", user, "--", python, str(probe), str(socket_path), claimed],
                                  capture_output=True, text=True, timeout=60, cwd="/")
            assert done.returncode == 0, done.stderr
            return done.stdout.strip().splitlines()[-1]

        assert attempt() == "None"  # refused: the caller runs its own eval
        assert "refused a connection from another user" in log_of(warm)
        assert served(warm) == 0
        # The control: a server without the peer check (and without the
        # context check, which also tells another user apart) serves it.
        warm.chmod(0o700)  # as `stop` wants it
        stopped = subprocess.run([sys.executable, "-m", "hills.warm", "stop"], capture_output=True, text=True)
        assert "stopped 1 warm server" in stopped.stdout, stopped.stdout + stopped.stderr
        deadline = time.monotonic() + 10
        while socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        unchecked = subprocess.Popen(
            [sys.executable, "-c", "import sys; from hills.warm import common, server, worker; "
                                   "common.same_user = lambda conn: True; "
                                   "worker.context_difference = lambda conn, request, host: None; "
                                   "sys.exit(server.serve(sys.argv[1], []))", str(socket_path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not socket_path.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            warm.chmod(0o755)
            socket_path.chmod(0o777)
            assert attempt() == "0", log_of(warm)  # served as root
            assert served(warm) == 1
        finally:
            unchecked.terminate()
            unchecked.wait(timeout=30)
    finally:
        remove_user(user)


def test_a_malformed_request_or_idle_time_is_logged_and_the_server_serves_on(warm, hill, tmp_path, monkeypatch):
    import _socket

    folder = sub(tmp_path / "s")
    monkeypatch.setenv("HILLS_WARM_IDLE_S", "soon")
    assert real("hills", "eval", folder, "-H", hill).code == 0
    wait_for_server(warm)
    assert "HILLS_WARM_IDLE_S='soon' is not a number of seconds (at least 1): 600 s instead" in log_of(warm)
    [socket_path] = warm.glob("*.sock")
    for garbage in (b"\x00\x00\x00\x05hello", b"\xff\xff\xff\xff", b"\x00\x00\x00\x10hills-warm 9\x00x\x00y"):
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.connect(str(socket_path))
        conn.sendall(garbage)
        conn.shutdown(_socket.SHUT_WR)
        assert conn.recv(100) == b""  # no P, no X: a caller would run its eval cold
        conn.close()
    deadline = time.monotonic() + 10
    while log_of(warm).count("refused a request") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log_of(warm).count("refused a request") == 3, log_of(warm)
    assert "request of 4294967295 bytes, at most 1048576" in log_of(warm)
    assert "protocol 'hills-warm 9', expected 'hills-warm 1'" in log_of(warm)
    served_eval = real("hills", "eval", folder, "-H", hill)
    assert served_eval.code == 0 and served(warm) == 1, log_of(warm)
