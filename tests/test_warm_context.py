"""A warm server serves only a caller in its own security context
(docs/warm.md, "When a worker declines"), and a waiting standby holds no
secret the caller's shell can read (docs/standby.md, "The threat it must
not open"). Each attack is run against the boundary and, as a control,
against a server with the boundary switched off, where it succeeds."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from testing.util import BWRAP_USABLE, REPO_ROOT
from testing.eval_fixtures import make_hill, real, submission
from testing.warm_fixtures import log_of, served, wait_for_server

pytestmark = pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap (bwrap) is missing or cannot create "
                                                         "namespaces here (install the Debian package 'bubblewrap')")

EVAL = """\
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        value = float((Path(submission) / "score.txt").read_text())
        return {"passed": True, "metrics": [{"name": "total", "value": value, "direction": "max"}], "details": {}}
    """

# Confines itself as its JSON argument says, then execs the rest of its
# argv: no_new_privs; a seccomp filter that allows every call (a filter
# all the same); a Landlock domain that reads only the paths listed.
LAUNCHER = r'''
import ctypes, json, os, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
how, command = json.loads(sys.argv[1]), sys.argv[2:]


def check(result, what):
    if result < 0:
        sys.exit(f"launcher: {what} failed: {os.strerror(ctypes.get_errno())}")
    return result


if how.get("no_new_privs"):
    check(libc.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
if how.get("seccomp"):
    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    rules = (Filter * 1)(Filter(0x06, 0, 0, 0x7FFF0000))  # BPF_RET|BPF_K: SECCOMP_RET_ALLOW
    program = Program(1, rules)
    check(libc.prctl(22, 2, ctypes.byref(program), 0, 0), "PR_SET_SECCOMP")
if "landlock" in how:
    READ = (1 << 2) | (1 << 3)  # LANDLOCK_ACCESS_FS_READ_FILE | READ_DIR
    ruleset = check(libc.syscall(444, ctypes.create_string_buffer(struct.pack("=Q", READ)), 8, 0),
                    "landlock_create_ruleset")
    for path in how["landlock"]:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = ctypes.create_string_buffer(struct.pack("=Qi", READ if os.path.isdir(path) else 1 << 2, fd), 12)
        check(libc.syscall(445, ruleset, 1, rule, 0), f"landlock_add_rule {path}")
        os.close(fd)
    check(libc.syscall(446, ruleset, 0), "landlock_restrict_self")
for path in how.get("unreadable", []):  # the precondition: confined, it cannot read these
    try:
        open(path, "rb").close()
    except PermissionError:
        print(f"launcher: cannot read {path}", file=sys.stderr, flush=True)
    else:
        sys.exit(f"launcher: can still read {path}")
os.execvp(command[0], command)
'''


def own_status(field):
    with open("/proc/self/status") as handle:
        return next(line.split()[1] for line in handle if line.startswith(field + ":"))


# The tests' own process, and so the server it starts, must be outside the
# confinement a test gives its caller, or there is no difference to see.
needs_privs = pytest.mark.skipif(own_status("NoNewPrivs") != "0",
                                 reason="the tests already run with no_new_privs (inside a sandbox): a caller "
                                        "that sets it is in the server's context")


def landlock_abi():
    """The kernel's Landlock ABI version, or 0 where it has none (or it is off)."""
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(444, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    return max(version, 0)


@pytest.fixture
def hill():
    make_hill("ctx", EVAL)
    return "ctx"


@pytest.fixture
def launcher(tmp_path):
    path = tmp_path / "launcher.py"
    path.write_text(LAUNCHER)
    return path


def confined(launcher, how, *argv, env=None):
    return real(sys.executable, launcher, json.dumps(how), *[str(a) for a in argv], env=env)


def declined(folder):
    return [line.split(" declined: ", 1)[1] for line in log_of(folder).splitlines() if " declined: " in line]


def serving(warm, hill, folder):
    """A warm server for this machine, seen to serve a plain eval."""
    assert real("hills", "eval", folder, "-H", hill).code == 0
    wait_for_server(warm)
    before = served(warm)
    assert real("hills", "eval", folder, "-H", hill).code == 0
    assert served(warm) == before + 1, log_of(warm)


def restart_without(warm, patch):
    """Stop this machine's server and start one at the same socket with
    `patch` (Python run first in it): a boundary switched off, for a control."""
    [socket_path] = warm.glob("*.sock")
    started = log_of(warm).count(" started for HILLS_HOME ")
    stopped = subprocess.run([sys.executable, "-m", "hills.warm", "stop"], capture_output=True, text=True)
    assert "stopped 1 warm server" in stopped.stdout, stopped.stdout + stopped.stderr
    deadline = time.monotonic() + 30
    while (socket_path.exists() or " stopped: stopped" not in log_of(warm)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not socket_path.exists(), log_of(warm)
    process = subprocess.Popen([sys.executable, "-c", f"import sys; from hills.run import runner; "
                                                      f"from hills.warm import server, spare, worker; {patch}; "
                                                      "sys.exit(server.serve(sys.argv[1], []))", str(socket_path)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 30
    while log_of(warm).count(" started for HILLS_HOME ") <= started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert socket_path.exists() and log_of(warm).count(" started for HILLS_HOME ") == started + 1, log_of(warm)
    return process


def test_the_server_reads_its_own_context_as_a_callers():
    from hills.warm import worker as module

    own = module.security_context("self")
    assert own["NoNewPrivs"] in ("0", "1") and own["Seccomp"] in ("0", "1", "2")
    assert own["CapEff"] and not own["CapEff"].startswith("(") and own["ns/mnt"].startswith("mnt:[")
    # Another process of the same context reads the same, field for field.
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert module.security_context(str(child.pid)) == own
    finally:
        child.kill()
        child.wait()
    gone = module.security_context(str(child.pid))
    assert list(gone) == ["the process"] and gone["the process"].startswith("(unreadable")


@pytest.mark.slow
@needs_privs
def test_a_caller_with_no_new_privs_is_declined_and_its_eval_runs_cold(warm, hill, tmp_path, launcher):
    folder = submission(tmp_path / "s", {"score.txt": "2"})
    serving(warm, hill, folder)
    before = served(warm)
    done = confined(launcher, {"no_new_privs": True}, "hills", "eval", folder, "-H", hill)
    assert done.code == 0, done.output  # cold: the same eval, in the caller's own process
    assert json.loads(done.out)["metrics"][0]["value"] == 2.0
    assert served(warm) == before, log_of(warm)
    assert declined(warm) == ["the caller's NoNewPrivs (1) is not the server's (0)"], log_of(warm)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="a seccomp filter without no_new_privs needs CAP_SYS_ADMIN (root)")
def test_a_caller_under_a_seccomp_filter_is_declined(warm, hill, tmp_path, launcher):
    folder = submission(tmp_path / "s", {"score.txt": "2"})
    serving(warm, hill, folder)
    before = served(warm)
    done = confined(launcher, {"seccomp": True}, "hills", "eval", folder, "-H", hill)
    assert done.code == 0, done.output
    assert served(warm) == before, log_of(warm)
    [reason] = declined(warm)
    # Seccomp itself, or (where the tests already run under a filter) the number of filters.
    assert reason.startswith("the caller's Seccomp"), log_of(warm)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="a caller with fewer capabilities than its server: needs root and setpriv (util-linux)")
def test_a_caller_with_fewer_capabilities_is_declined(warm, hill, tmp_path):
    folder = submission(tmp_path / "s", {"score.txt": "2"})
    serving(warm, hill, folder)
    before = served(warm)
    drop = ("setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", "hills", "eval", folder, "-H", hill)
    done = real(*drop)
    assert served(warm) == before, log_of(warm)
    [reason] = declined(warm)
    assert reason.startswith("the caller's CapBnd (0000000000000000) is not the server's"), log_of(warm)
    # What it got is what the same caller gets with no warm server at all
    # (here bubblewrap, without capabilities, cannot start as root).
    cold = real(*drop, env=dict(os.environ, HILLS_WARM="off"))
    assert (done.code, json.loads(done.out)["status"]) == (cold.code, json.loads(cold.out)["status"]), done.output


# A caller with a lower file size limit than its server, which tells the
# limits it had before ("lie") or the ones it has ("honest").
LIMITS_PROBE = """\
import _socket, resource, sys
from hills.warm import client as warm

before = warm.limits()
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
assert warm.limits() != before
if sys.argv[2] == "lie":
    warm.limits = lambda: before
for _ in range(2):  # as warm.call does: a spare made for another call says "retry"
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    conn.connect(sys.argv[1])
    warm._send(conn, warm._request("hills", ["eval", "--help"]), [0, 1, 2])
    answer = warm._await(conn)
    conn.close()
    if not answer.retry:
        break
print(answer.code)
"""


def test_a_caller_whose_request_misstates_its_limits_is_declined(warm, hill, tmp_path):
    folder = submission(tmp_path / "s", {"score.txt": "2"})
    serving(warm, hill, folder)
    [socket_path] = warm.glob("*.sock")
    probe = tmp_path / "probe.py"
    probe.write_text(LIMITS_PROBE)
    before = served(warm)
    lied = real(sys.executable, probe, socket_path, "lie")
    assert lied.code == 0 and lied.out.strip().splitlines()[-1] == "None", lied.output  # declined: it runs cold
    [reason] = declined(warm)
    assert reason == "the caller's RLIMIT_FSIZE (1048576:1048576) is not the one its request gives (-1:-1)", reason
    assert served(warm) == before
    # The same caller, telling the limits it has, is served with them.
    honest = real(sys.executable, probe, socket_path, "honest")
    assert honest.code == 0 and honest.out.strip().splitlines()[-1] == "0", honest.output
    assert served(warm) == before + 1 and len(declined(warm)) == 1, log_of(warm)


def landlocked(tmp_path, readable):
    """The launcher's JSON for a caller that reads the system, hills, this
    machine's state and project, and `readable`, but nothing else of HOME."""
    home = Path(os.environ["HOME"])
    paths = ["/usr", "/etc", "/proc", "/dev", "/sys", "/run", "/var", "/opt", "/bin", "/sbin", "/lib", "/lib64",
             str(REPO_ROOT), sys.base_prefix, sys.prefix, os.environ["HILLS_HOME"], os.environ["GIT_CONFIG_GLOBAL"],
             os.environ["UV_CACHE_DIR"], os.environ["XDG_RUNTIME_DIR"], os.getcwd(), str(readable),
             *os.environ["PATH"].split(os.pathsep)]
    paths = sorted({path for path in paths if os.path.exists(path) and not str(home).startswith(path.rstrip("/") + "/")
                    and path != str(home)})
    return {"no_new_privs": True, "landlock": paths}


needs_landlock = pytest.mark.skipif(not landlock_abi() or own_status("NoNewPrivs") != "0",
                                    reason="this kernel has no Landlock (or it is off: landlock_create_ruleset "
                                           "reports no ABI), or the tests already run with no_new_privs")


@pytest.mark.slow
@needs_landlock
def test_a_landlocked_caller_is_declined_and_cannot_read_the_secret_cold(warm, hill, tmp_path, launcher):
    readable = submission(tmp_path / "s", {"score.txt": "2"})
    secret = submission(Path(os.environ["HOME"]) / "secret", {"score.txt": "42"})
    serving(warm, hill, readable)
    before = served(warm)
    how = dict(landlocked(tmp_path, readable), unreadable=[str(secret / "score.txt")])
    done = confined(launcher, how, "hills", "eval", secret, "-H", hill, "-o", tmp_path / "outside.json")
    assert f"launcher: cannot read {secret / 'score.txt'}" in done.err  # the attack ran confined
    assert done.code != 0 and "error: " in done.err and "Permission denied" in done.err, done.output
    assert "42" not in done.out and not (tmp_path / "outside.json").exists()
    assert served(warm) == before, log_of(warm)
    assert declined(warm) == ["the caller's NoNewPrivs (1) is not the server's (0)"], log_of(warm)


@needs_landlock
def test_without_the_context_check_the_warm_worker_reads_what_the_landlocked_caller_cannot(warm, hill, tmp_path,
                                                                                           launcher):
    readable = submission(tmp_path / "s", {"score.txt": "2"})
    secret = submission(Path(os.environ["HOME"]) / "secret", {"score.txt": "42"})
    serving(warm, hill, readable)
    unchecked = restart_without(warm, "worker.context_difference = lambda conn, request, host: None")
    try:
        before = served(warm)
        how = dict(landlocked(tmp_path, readable), unreadable=[str(secret / "score.txt")])
        done = confined(launcher, how, "hills", "eval", secret, "-H", hill, "-o", tmp_path / "outside.json")
        assert f"launcher: cannot read {secret / 'score.txt'}" in done.err
        assert done.code == 0, done.output + log_of(warm)
        assert served(warm) == before + 1 and declined(warm) == [], log_of(warm)
        assert json.loads(done.out)["metrics"][0]["value"] == 42.0  # read by the unconfined worker
        assert json.loads((tmp_path / "outside.json").read_text())["metrics"][0]["value"] == 42.0
    finally:
        unchecked.terminate()
        unchecked.wait(timeout=30)


# -- a waiting standby's secrets ------------------------------------------------

# Run as the caller's shell would be: the same uid, no capabilities. Reads
# /proc/PID/environ and the writable memory (/proc/PID/mem) of each pid
# given, says which it could read, then waits for the secret seed on stdin
# and says where it was found.
READER = r'''
import json, os, re, sys

caps = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("CapEff:"))
read = {}
for pid in sys.argv[1:]:
    got = {}
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            got["environ"] = handle.read()
    except OSError as exc:
        got["environ"] = exc.strerror
    try:
        chunks = []
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for line in maps.read().splitlines():
                span, perms = line.split()[:2]
                start, end = (int(part, 16) for part in span.split("-"))
                if perms.startswith("rw") and end - start <= 256 << 20:
                    try:
                        mem.seek(start)
                        chunks.append(mem.read(end - start))
                    except OSError:
                        pass
        got["mem"] = b"".join(chunks)
        if not got["mem"]:
            got["mem"] = "nothing read"
    except OSError as exc:
        got["mem"] = exc.strerror
    read[pid] = got
print(json.dumps({"caps": caps, "readable": {pid: {what: isinstance(value, bytes) for what, value in got.items()}
                                              for pid, got in read.items()}}), flush=True)
seed = sys.stdin.readline().strip().encode()
pattern = re.compile(rb"(?<![0-9])" + seed + rb"(?![0-9])")
print(json.dumps({pid: {what: bool(pattern.search(value)) if isinstance(value, bytes) else value
                        for what, value in got.items()} for pid, got in read.items()}), flush=True)
'''


def waiting_spare(folder, count=1, timeout=60):
    """Until `count` spares have said they wait; (pid, run folder) of the last."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [line for line in log_of(folder).splitlines() if " waits with a standby in " in line]
        if len(lines) >= count:
            head, run_dir = lines[-1].split(" waits with a standby in ", 1)
            return int(head.rsplit(" ", 1)[1]), Path(run_dir)
        time.sleep(0.05)
    raise AssertionError(f"no spare came to wait; warm.log:\n{log_of(folder)}")


def descendants(pid):
    """`pid` and every process under it."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                ppid = next(int(line.split()[1]) for line in handle if line.startswith("PPid:"))
        except (OSError, ValueError, StopIteration):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        queue.extend(parents.get(current, []))
    return found


class Climber:
    """A user of its own (root's CAP_SYS_PTRACE reads any process, so the
    attack needs an unprivileged one) with a machine state, a project, a
    warm socket folder and one committed hill; every call runs as it
    through runuser, with one environment, so a spare serves the same call."""

    def __init__(self, user):
        from testing.service_fixtures import home_of, python_for_others

        self.user, self.home = user, Path(home_of(user))
        self.python, python_env = python_for_others()
        self.runtime = self.home / "run"
        self.warm = self.runtime / "hills-warm"
        self.project = self.home / "project"
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home),
                    "HILLS_HOME": str(self.home / "hills-home"), "XDG_RUNTIME_DIR": str(self.runtime),
                    "HILLS_SERVICE": "off", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Hills Test",
                    "GIT_AUTHOR_EMAIL": "test@hills.invalid", "GIT_COMMITTER_NAME": "Hills Test",
                    "GIT_COMMITTER_EMAIL": "test@hills.invalid", **python_env}

    def argv(self, argv):
        from testing.service_fixtures import tool

        return [tool("runuser"), "-u", self.user, "--", "env", "-i", *[f"{k}={v}" for k, v in self.env.items()],
                *[str(word) for word in argv]]

    def run(self, *argv, timeout=180):
        done = subprocess.run(self.argv(argv), cwd=self.project, capture_output=True, text=True, timeout=timeout)
        return done

    def hills(self, *args):
        return self.run(*self.python, "-m", "hills", *args)

    def own(self, path):
        subprocess.run(["chown", "-R", f"{self.user}:{self.user}", str(path)], check=True)


@pytest.fixture
def climber():
    import uuid

    from testing.eval_fixtures import TRIVIAL_TEST
    from testing.eval_fixtures import hill_yaml
    from testing.service_fixtures import make_user, remove_user, skip_reason

    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    user = make_user(f"hwc{uuid.uuid4().hex[:5]}")
    try:
        who = Climber(user)
        who.runtime.mkdir(mode=0o700)
        who.project.mkdir()
        who.own(who.runtime)
        who.own(who.project)
        made = who.hills("new", "sb")
        assert made.returncode == 0, made.stderr
        hill_dir = who.project / ".hills" / "sb"
        (hill_dir / "eval.py").write_text(textwrap.dedent(EVAL))
        (hill_dir / "hill.yaml").write_text(hill_yaml("sb"))
        for test in (hill_dir / "tests").glob("test_*.py"):
            test.unlink()
        (hill_dir / "tests" / "test_eval.py").write_text(TRIVIAL_TEST)
        (hill_dir / "README.md").write_text("# sb\n\nWrite a number in score.txt; larger is better.\n")
        shutil.rmtree(hill_dir / "examples" / "basic")
        (hill_dir / "examples" / "basic").mkdir()
        (hill_dir / "examples" / "basic" / "score.txt").write_text("1\n")
        who.own(hill_dir)
        committed = who.hills("commit", "sb", "-m", "first")
        assert committed.returncode == 0, committed.stderr
        who.folder = who.home / "s"
        who.folder.mkdir()
        (who.folder / "score.txt").write_text("3")
        who.own(who.folder)
        yield who
    finally:
        subprocess.run(Climber(user).argv([*Climber(user).python, "-m", "hills.warm", "stop"]), capture_output=True,
                       cwd="/")
        remove_user(user)


def as_the_callers_shell(climber, pids):
    """The reader, started as a process of the climber's (no capabilities)."""
    reader = climber.home / "reader.py"
    reader.write_text(READER)
    climber.own(reader)
    process = subprocess.Popen(climber.argv([climber.python[0], reader, *pids]), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, cwd="/")
    first = json.loads(process.stdout.readline())
    assert first["caps"] == "0000000000000000", first
    return process, first["readable"]


def attack_a_waiting_standby(climber):
    """Read every process of a waiting standby, then let it serve its call
    and look for the seed it held; (readable, found, spare pid, evaluator pids)."""
    count = log_of(climber.warm).count(" waits with a standby in ")
    done = climber.hills("eval", climber.folder, "-H", "sb")
    assert done.returncode == 0, done.stderr
    spare, run_dir = waiting_spare(climber.warm, count + 1)
    pids = descendants(spare)
    evaluators = [pid for pid in pids if pid != spare]
    assert evaluators, (pids, log_of(climber.warm))
    reader, readable = as_the_callers_shell(climber, pids)
    try:
        done = climber.hills("eval", climber.folder, "-H", "sb")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        # The precondition: the eval was the standby's, so its seed is the one the standby held.
        assert report["run_id"] == run_dir.name and " with its standby" in log_of(climber.warm), log_of(climber.warm)
        [seed] = report["seeds"]["secret"]
        out, _ = reader.communicate(f"{seed}\n", timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    found = json.loads(out.strip().splitlines()[-1])
    return readable, found, str(spare), [str(pid) for pid in evaluators]


def serving_climber(climber):
    first = climber.hills("eval", climber.folder, "-H", "sb")  # cold: it starts the server
    assert first.returncode == 0, first.stderr
    wait_for_server(climber.warm, timeout=60)


@pytest.mark.slow
def test_a_waiting_standby_holds_no_secret_seed_the_callers_shell_can_read(climber):
    serving_climber(climber)
    readable, found, spare, evaluators = attack_a_waiting_standby(climber)
    # The spare holds the seeds, and nothing of it can be read.
    assert readable[spare] == {"environ": False, "mem": False}, found
    # Its evaluator can be read (it is the caller's own process), and holds no seed yet.
    assert any(readable[pid]["environ"] for pid in evaluators), readable
    for pid in evaluators:
        assert found[pid]["environ"] in (False, "Permission denied"), found
        assert found[pid]["mem"] in (False, "Permission denied", "nothing read"), found


@pytest.mark.slow
def test_without_the_fix_the_callers_shell_reads_the_waiting_standbys_seed(climber):
    serving_climber(climber)
    [socket_path] = climber.warm.glob("*.sock")
    started = log_of(climber.warm).count(" started for HILLS_HOME ")
    stopped = climber.run(*climber.python, "-m", "hills.warm", "stop")
    assert "stopped 1 warm server" in stopped.stdout, stopped.stdout + stopped.stderr
    deadline = time.monotonic() + 30
    while (socket_path.exists() or " stopped: " not in log_of(climber.warm)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not socket_path.exists(), log_of(climber.warm)
    # The same server with both halves of the fix switched off.
    patch = "runner.WITHHELD = (); spare.undumpable = lambda: True"
    unfixed = subprocess.Popen(climber.argv([*climber.python, "-c", "import sys; from hills.run import runner; "
                                             f"from hills.warm import server, spare; {patch}; "
                                             "sys.exit(server.serve(sys.argv[1], []))", socket_path]),
                               cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while log_of(climber.warm).count(" started for HILLS_HOME ") <= started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert socket_path.exists() and log_of(climber.warm).count(" started for HILLS_HOME ") == started + 1
        readable, found, spare, evaluators = attack_a_waiting_standby(climber)
        assert found[spare]["mem"] is True, found  # in the spare's memory
        assert any(found[pid]["environ"] is True for pid in evaluators), found  # in its evaluator's environment
    finally:
        climber.run(*climber.python, "-m", "hills.warm", "stop")
        try:
            unfixed.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(unfixed.pid, 9)
            unfixed.wait()
