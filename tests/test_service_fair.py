"""Fair share in the evaluation service, attacked: a user with no role
holding every connection it can, a climber sending a byte at a time, a
climber filling the state disk, while sixteen other climbers' evals land
and an admin commits. The service runs under its own user with its state
folder on a small tmpfs (so that filling it is cheap); each attack runs
first against the bound switched off, as a control. Without root these
tests skip, saying why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from hills.service import protocol
from testing.service_fixtures import (Service, error_of, home_of, make_hill, make_user, needs_root, raw_bytes,
                                      remove_user, request, submission)

pytestmark = needs_root

DEMO = "fairhill"
OTHERS = 16
TMPFS_MIB = 256
# The floor the tests' service keeps (the default, 512 MiB, is more than its tmpfs holds).
FLOOR = 32 << 20

# Holds as many connections as it can for `seconds`, opening a new one for
# each the service closes; says how many it made and what it was told.
FLOOD = '''\
import json, socket, struct, sys, time
spec = json.load(sys.stdin)
held, made, answers, refused = [], 0, {}, 0
until = time.monotonic() + spec["seconds"]
while time.monotonic() < until:
    while len(held) < spec["hold"] and time.monotonic() < until:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(1.0)
        try:
            sock.connect(spec["socket"])
        except OSError:
            sock.close()
            break
        sock.setblocking(False)
        held.append(sock)
        made += 1
    alive = []
    for sock in held:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            alive.append(sock)
            continue
        except OSError:
            data = b""
        if data[:1] == b"R" and len(data) >= 5:
            refused += 1
            try:
                message = json.loads(data[5:5 + struct.unpack(">I", data[1:5])[0]])["message"]
                key = message[:120]
                answers[key] = answers.get(key, 0) + 1
            except ValueError:
                pass
        sock.close()
    held = alive
    time.sleep(0.002)
print(json.dumps({"made": made, "refused": refused, "answers": answers}))
'''

# A request that sends its upload a byte at a time, or stops partway: it
# reports when and how the service ended it.
TRICKLE = '''\
import json, select, socket, struct, sys, time
from hills.service import protocol
spec = json.load(sys.stdin)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(spec["socket"])
conn = protocol.Connection(sock)
conn.record(spec["request"])
answer = conn.receive_record(time.monotonic() + 30)
started = time.monotonic()
outcome = {"accepted": answer["type"] == "accepted", "first": answer}
try:
    if answer["type"] == "accepted":
        conn.record({"type": "entry", "path": "blob", "kind": "file", "mode": 420, "size": spec["size"]})
        sent = 0
        while sent < spec["fast"]:
            chunk = min(1 << 20, spec["fast"] - sent)
            conn.data(b"x" * chunk)
            sent += chunk
        outcome["sent"] = sent
        # Then a byte every `every` seconds, for as long as the service listens.
        # (The wait ends early when the service answers: it has ended the request.)
        deadline = time.monotonic() + spec["hold"]
        while time.monotonic() < deadline:
            sock.sendall(protocol._HEADER.pack(protocol.DATA, 1))
            if select.select([sock], [], [], spec["every"])[0]:
                break
            sock.sendall(b"x")
except (OSError, protocol.ProtocolError) as exc:
    outcome["stopped"] = str(exc)
try:
    sock.settimeout(5)
    record = conn.receive_record()
    outcome["answer"] = record
except protocol.ProtocolError as exc:
    outcome["answer"] = {"type": "broken", "message": exc.message}
outcome["seconds"] = time.monotonic() - started
print(json.dumps(outcome))
'''


class Fair(Service):
    """A service with many climbers, its state folder on a tmpfs."""

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.others = [f"{self.climber}x{index}" for index in range(OTHERS)]
        self.slow = f"{self.climber}s"
        self.filler = f"{self.climber}f"

    def users(self) -> list[str]:
        return [self.admin, self.climber, self.outsider, self.slow, self.filler, *self.others]

    def set_config(self, **values: object) -> None:
        """Change the service's config as its admin would (root writes it;
        the service reads it again at the next connection)."""
        path = self.state / "service.json"
        current = json.loads(path.read_text())
        for key, value in values.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        staged = path.with_suffix(".new")
        staged.write_text(json.dumps(current, indent=2))
        os.chmod(staged, 0o644)
        os.replace(staged, path)

    def script(self, user: str, source: str, spec: dict, timeout: float = 120) -> subprocess.Popen:
        process = subprocess.Popen(self.argv(user, [*self.python, "-c", source]), cwd=home_of(user),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stdin is not None
        process.stdin.write(json.dumps({"socket": str(self.socket), **spec}))
        process.stdin.close()
        return process

    def start_unfair(self) -> None:
        """The control: the same service with fair share switched off
        (slots taken at accept, before the role is known; nothing per user)."""
        code = ("import sys; import hills.service.server; hills.service.server.FAIR = False; from hills import entry; "
                f"sys.exit(entry.run('hills', ['serve', '--state', {str(self.state)!r}]))")
        super().start(["-c", code])


def finished(process: subprocess.Popen, timeout: float = 120) -> dict:
    """What a script said, once it ended (it writes a line; its stdin was closed at start)."""
    assert process.stdout is not None and process.stderr is not None
    process.wait(timeout)
    out, err = process.stdout.read(), process.stderr.read()
    assert process.returncode == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def fair():
    base = Path(tempfile.mkdtemp(prefix="hills-fair-", dir="/tmp"))
    os.chmod(base, 0o755)
    svc = Fair(base)
    svc.state.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MIB}m,mode=0700", "tmpfs",
                              str(svc.state)], capture_output=True, text=True)
    if mounted.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"cannot mount a tmpfs for the state folder: {mounted.stderr.strip()}")
    for user in svc.users():
        make_user(user)
    try:
        climbers = [arg for user in (svc.climber, svc.slow, svc.filler, *svc.others) for arg in ("--climber", user)]
        done = subprocess.run(
            ["env", f"HILLS_SERVICE_CONFIG={svc.client_config}", f"HILLS_SYSTEMD_RUNNING={base / 'no-systemd'}",
             *svc.python, "-m", "hills", "setup", "service", "--user", svc.user, "--state", str(svc.state),
             "--socket", str(svc.socket), "--admin", svc.admin, *climbers],
            capture_output=True, text=True, env={**os.environ, **svc.python_env})
        assert done.returncode == 0, done.stderr
        svc.set_config(min_free_bytes=FLOOR)
        svc.start()
        committed = make_hill(svc, svc.admin, DEMO)
        assert committed.code == 0, committed.err
        yield svc
    finally:
        svc.stop()
        subprocess.run(["umount", "-l", str(svc.state)], capture_output=True)
        for user in svc.users() + [svc.user]:
            remove_user(user)
        shutil.rmtree(base, ignore_errors=True)


def _free(fair: Fair) -> int:
    info = os.statvfs(fair.state)
    return info.f_bavail * info.f_frsize


def _requests_left(fair: Fair) -> list[str]:
    return os.listdir(fair.state / "requests")


def _wait_for(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


# ------------------------------------------------------------ a no-role flood

@pytest.mark.slow
def test_control_with_fair_share_off_a_no_role_flood_blocks_the_admin(fair):
    fair.stop()
    fair.start_unfair()
    try:
        flood = fair.script(fair.outsider, FLOOD, {"seconds": 14, "hold": 200})
        time.sleep(3)
        answers = [fair.hills(fair.admin, "list", timeout=60) for _ in range(3)]
        result = finished(flood)
    finally:
        fair.stop()
        fair.start()
    assert result["made"] >= 64  # the attack ran: it held what it could
    busy = [answer for answer in answers if answer.code == 4 and "the hills service is busy" in answer.err]
    assert busy, [(answer.code, answer.err) for answer in answers]


@pytest.mark.slow
def test_a_no_role_flood_holds_no_slot_and_everyone_else_is_served(fair):
    flood = fair.script(fair.outsider, FLOOD, {"seconds": 12, "hold": 200})
    time.sleep(2)
    listed = [fair.hills(fair.admin, "list", timeout=60) for _ in range(3)]
    folder = submission(fair, fair.climber, "sub-flooded", answer="4")
    scored = fair.hills(fair.climber, "eval", folder, "-H", DEMO, "--json", timeout=120)
    result = finished(flood)
    assert result["made"] > 200 and result["refused"] > 100, result  # the attack ran, and was refused each time
    assert any("neither an admin nor a climber" in message for message in result["answers"]), result
    assert all(answer.code == 0 for answer in listed), [answer.err for answer in listed]
    assert scored.code == 0 and scored.report["metrics"][0]["value"] == 4, scored.err


@pytest.mark.slow
def test_one_user_holds_at_most_its_share_of_connections(fair):
    fair.set_config(user_connections=4)
    try:
        flood = fair.script(fair.slow, FLOOD, {"seconds": 8, "hold": 40})
        time.sleep(2)
        mine = fair.hills(fair.slow, "list", timeout=60)
        others = fair.hills(fair.climber, "list", timeout=60)
        result = finished(flood)
    finally:
        fair.set_config(user_connections=None)
    assert result["made"] > 4
    assert any("has 4 requests being served, the most one user may have" in message
               for message in result["answers"]), result
    assert mine.code == 4 and "the most one user may have" in mine.err and "hint:" in mine.err
    assert others.code == 0, others.err


@pytest.mark.slow
def test_the_admin_reserve_keeps_a_slot_for_admins(fair):
    fair.set_config(max_connections=6, admin_reserve=2, user_connections=6)
    try:
        flood = fair.script(fair.slow, FLOOD, {"seconds": 8, "hold": 40})
        time.sleep(2)
        climber = fair.hills(fair.climber, "list", timeout=60)
        admin = fair.hills(fair.admin, "list", timeout=60)
        result = finished(flood)
    finally:
        fair.set_config(max_connections=None, admin_reserve=None, user_connections=None)
    assert result["made"] > 4
    assert climber.code == 4 and "2 are kept for admins" in climber.err, climber.err
    assert admin.code == 0, admin.err


# ------------------------------------------------------------ slow senders

@pytest.mark.slow
def test_a_byte_at_a_time_holds_a_slot_for_seconds_not_minutes(fair):
    # Half a header, then nothing: the request record has its deadline.
    answer, seconds = raw_bytes(fair, fair.slow, b"R\x00", timeout=60)
    assert "too slow" in error_of(answer)["message"] and seconds < protocol.FIRST_DEADLINE_S + 3
    folder = submission(fair, fair.slow, "sub-trickle")
    trickle = finished(fair.script(fair.slow, TRICKLE, {
        "request": request("eval", submissions=[0], hill=DEMO), "size": 1 << 20, "fast": 1000, "every": 3,
        "hold": 120}), timeout=200)
    assert trickle["accepted"] and trickle["sent"] == 1000  # the upload began
    assert trickle["answer"]["type"] == "error" and "too slow" in trickle["answer"]["message"], trickle
    assert trickle["seconds"] < protocol.UPLOAD_BASE_S + protocol.FRAME_DEADLINE_S, trickle
    # A byte a minute: each frame has its deadline.
    minute = finished(fair.script(fair.slow, TRICKLE, {
        "request": request("eval", submissions=[0], hill=DEMO), "size": 1 << 20, "fast": 10, "every": 60,
        "hold": 120}), timeout=200)
    assert minute["accepted"] and "too slow" in minute["answer"]["message"], minute
    assert minute["seconds"] < protocol.FRAME_DEADLINE_S + 5, json.dumps(minute)
    assert folder and _wait_for(lambda: _requests_left(fair) == [])


# ------------------------------------------------------------ the disk

# What a full disk leaves: less than a submission with a little data needs.
LEAVE = 64 << 10


def _with_data(fair: Fair, user: str, name: str, answer: str = "7") -> str:
    """A submission with a MiB of data beside its answer, as most carry some."""
    folder = submission(fair, user, name, answer=answer)
    (Path(folder) / "data.bin").write_bytes(os.urandom(1 << 20))
    subprocess.run(["chown", "-R", user, folder], check=True)
    return folder


def _fill_spec(fair: Fair, leave: int) -> dict:
    """A file that fits, leaving `leave` bytes free, sent all but its last
    bytes at once and then held open: the disk stays full while it lasts."""
    size = max(_free(fair) - leave, 1 << 20)
    return {"request": request("eval", submissions=[0], hill=DEMO), "size": size, "fast": size - 1000,
            "every": 2, "hold": 6}


@pytest.mark.slow
def test_control_without_a_floor_a_climber_filling_the_disk_fails_the_others(fair):
    fair.set_config(min_free_bytes=0)
    try:
        filler = fair.script(fair.filler, TRICKLE, _fill_spec(fair, leave=LEAVE))
        # The attack ran: the disk is full.
        assert _wait_for(lambda: _free(fair) < 1 << 20 or filler.poll() is not None, timeout=60)
        assert _free(fair) < 1 << 20, (_free(fair), filler.poll() is not None and finished(filler))
        starved = fair.hills(fair.climber, "eval", _with_data(fair, fair.climber, "sub-starved"), "-H", DEMO,
                             timeout=120)
        finished(filler, timeout=120)
    finally:
        fair.set_config(min_free_bytes=FLOOR)
    assert starved.code == 4 and "the disk of its state folder is full" in starved.err, (starved.code, starved.err)
    assert _wait_for(lambda: _requests_left(fair) == [])


@pytest.mark.slow
def test_an_upload_that_would_pass_the_floor_is_refused_and_its_partial_upload_goes(fair):
    fair.set_config(min_free_bytes=64 << 20)
    try:
        filler = finished(fair.script(fair.filler, TRICKLE, _fill_spec(fair, leave=LEAVE)), timeout=120)
        fed = fair.hills(fair.climber, "eval", _with_data(fair, fair.climber, "sub-fed"), "-H", DEMO, timeout=120)
        # Through the CLI: files that pass the floor one by one as they arrive.
        big = Path(home_of(fair.filler)) / "sub-big"
        big.mkdir(exist_ok=True)
        (big / "answer.txt").write_text("1\n")
        for index in range(8):
            with open(big / f"part-{index}.bin", "wb") as handle:
                handle.truncate(30 << 20)
        subprocess.run(["chown", "-R", fair.filler, str(big)], check=True)
        cli = fair.hills(fair.filler, "eval", str(big), "-H", DEMO, timeout=120)
    finally:
        fair.set_config(min_free_bytes=FLOOR)
    assert filler["accepted"], filler
    assert filler["answer"]["type"] == "error" and filler["answer"]["exit"] == 4, filler
    assert "less than 64.0 MiB free" in filler["answer"]["message"] and filler["answer"]["hint"]
    assert fed.code == 0, fed.err
    assert cli.code == 4 and "less than 64.0 MiB free" in cli.err and "hint:" in cli.err, cli.err
    assert _requests_left(fair) == []
    assert _free(fair) > 128 << 20


@pytest.mark.slow
def test_one_users_uploads_are_bounded_together(fair):
    fair.set_config(user_upload_bytes=8 << 20)
    try:
        big = Path(home_of(fair.filler)) / "sub-share"
        big.mkdir(exist_ok=True)
        (big / "answer.txt").write_text("1\n")
        with open(big / "data.bin", "wb") as handle:
            handle.truncate(12 << 20)
        subprocess.run(["chown", "-R", fair.filler, str(big)], check=True)
        refused = fair.hills(fair.filler, "eval", str(big), "-H", DEMO, timeout=120)
        os.unlink(big / "data.bin")
        small = fair.hills(fair.filler, "eval", str(big), "-H", DEMO, timeout=120)
    finally:
        fair.set_config(user_upload_bytes=None)
    assert refused.code == 4 and "would hold more than 8.0 MiB of uploads at once" in refused.err, refused.err
    assert small.code == 0, small.err


# ------------------------------------------------------------ evaluators

@pytest.mark.slow
def test_tune_parallel_counts_against_the_users_evaluators(fair):
    fair.set_config(user_evaluators=2)
    try:
        folder = submission(fair, fair.climber, "sub-tune")
        (Path(folder) / "params.json").write_text(json.dumps({"scale": {"type": "float", "low": 0.5, "high": 2.0,
                                                                       "default": 1.0}}))
        subprocess.run(["chown", "-R", fair.climber, folder], check=True)
        refused = fair.hills(fair.climber, "tune", folder, "-H", DEMO, "--budget", "3", "--parallel", "3")
        slow = [submission(fair, fair.climber, f"sub-wait-{index}", sleep=4) for index in range(3)]
        runs: list = [None] * 3
        threads = [threading.Thread(target=lambda index=index: runs.__setitem__(
            index, fair.hills(fair.climber, "eval", slow[index], "-H", DEMO, timeout=120))) for index in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        fair.set_config(user_evaluators=None)
    assert refused.code == 2 and "'--parallel 3' is more evaluators than one user may run at once" in refused.err
    assert all(run.code == 0 for run in runs), [run.err for run in runs]
    assert any("waiting for an evaluator" in run.err for run in runs), [run.err for run in runs]


# ------------------------------------------------------------ all at once

@pytest.mark.slow
def test_a_flood_a_trickle_and_a_full_disk_while_sixteen_climbers_and_an_admin_are_served(fair):
    fair.set_config(min_free_bytes=64 << 20)
    started = time.monotonic()
    try:
        flood = fair.script(fair.outsider, FLOOD, {"seconds": 40, "hold": 200})
        trickle = fair.script(fair.slow, TRICKLE, {"request": request("eval", submissions=[0], hill=DEMO),
                                                  "size": 1 << 20, "fast": 10, "every": 5, "hold": 60})
        filler = fair.script(fair.filler, TRICKLE, _fill_spec(fair, leave=LEAVE))
        folders = [_with_data(fair, user, "sub-crowd", answer=str(index)) for index, user in enumerate(fair.others)]
        results: list = [None] * OTHERS

        def one(index: int) -> None:
            results[index] = fair.hills(fair.others[index], "eval", folders[index], "-H", DEMO, "--json",
                                        timeout=300)

        threads = [threading.Thread(target=one, args=(index,)) for index in range(OTHERS)]
        for thread in threads:
            thread.start()
        committed = make_hill(fair, fair.admin, "fairsecond")
        for thread in threads:
            thread.join()
        flooded, trickled, filled = finished(flood), finished(trickle, 200), finished(filler, 200)
    finally:
        fair.set_config(min_free_bytes=FLOOR)
    # The attacks ran, and each was refused.
    assert flooded["made"] > 200 and any("neither an admin" in message for message in flooded["answers"])
    assert trickled["accepted"] and "too slow" in trickled["answer"]["message"], trickled
    assert filled["answer"]["exit"] == 4 and "free" in filled["answer"]["message"], filled
    # And everyone else was served.
    assert all(result.code == 0 for result in results), [result.err for result in results if result.code]
    assert sorted(result.report["metrics"][0]["value"] for result in results) == [float(i) for i in range(OTHERS)]
    assert committed.code == 0, committed.err
    assert time.monotonic() - started < 240
    assert _wait_for(lambda: _requests_left(fair) == [])
