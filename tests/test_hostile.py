"""Hostile submissions (issue 5): code submitted to a hill tries to read the
held-out data, the machine key and the run folder, to write the hill, the
result or the report, to outlive the eval, to exhaust memory, to flood its
output and to reach the network. Every attempt is blocked, and logged as an
attempt with its reason.

The function-shape hill `hostile` runs the submission's solution.py through
`hills.sdk.run_submission` and "passes" only when the solution printed the
held-out secret: a failing report is a blocked attack, and its reason is
the solution's own account of what it tried. The command-shape hill
`hostile-cmd` runs `"$HILLS_PYTHON" "$HILLS_SOLUTION" > out.txt` and then a
scorer that only the verifier runs. Also covered: links left behind for a
more trusted process to follow (by submitted code for the evaluator, by the
evaluator for hills itself), and the held-out data of the machine's other
hills.

Known gap worked around here: `hills check` (and so `hills commit`) imports
eval.py without the SDK on PYTHONPATH, so the evaluator imports
`hills.sdk` inside eval() rather than at the top of the module.
"""

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from testing.command_fixtures import make_command_hill
from testing.util import needs_bwrap
from testing.eval_fixtures import hills, hills_home, last_report, make_hill, on_machine, real, submission
from hills.run import runner

pytestmark = needs_bwrap

SECRET = "the-held-out-answer-4242\n"

# The evaluator: reads the secret from private/ (it may), runs solution.py
# confined, forwards its stderr (all of it: the run folder's log caps it),
# and passes only if the solution printed the secret. With a probe.json in
# the submission it also records what it can itself read and write.
HOSTILE_EVAL = """\
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    HERE = Path(__file__).resolve().parent

    def _probe(paths):
        seen = {}
        for path in paths.get("read", []):
            try:
                seen["read " + path] = Path(path).read_text()[:200]
            except OSError as exc:
                seen["read " + path] = type(exc).__name__
        for path in paths.get("write", []):
            try:
                with open(path, "a") as handle:
                    handle.write("the evaluator was here\\n")
                seen["write " + path] = "written"
            except OSError as exc:
                seen["write " + path] = type(exc).__name__
        return seen

    def _verdict(value, details, reason):
        if value < 1:
            details["reason"] = reason
        return {"passed": value >= 1, "metrics": [{"name": "leaked", "value": value, "direction": "max"}],
                "details": details}

    def eval(submission, *, final=False, **params):
        # Imported here, not at the top: `hills check` binds eval() without
        # the SDK on its path (reported; see the module docstring).
        from hills import sdk

        submission = Path(submission)
        secret = (HERE / "private" / "secret.txt").read_text()
        details = {}
        probe = submission / "probe.json"
        if probe.exists():
            details["probe"] = _probe(json.loads(probe.read_text()))
            details["env"] = dict(os.environ)
        try:
            done = sdk.run_submission([sys.executable, "solution.py"], timeout=10, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return _verdict(0.0, details, "solution.py ran past 10 s and was killed")
        sys.stderr.write(done.stderr)
        details["exit"] = done.returncode
        details["stderr_tail"] = done.stderr[-1500:]
        lines = done.stdout.strip().splitlines()
        try:
            verdict = json.loads(lines[-1]) if lines else {}
        except ValueError:
            verdict = {}
        details["seen"] = verdict.get("seen", {})
        # Like many evaluators, it also takes the answer from a file the
        # solution wrote, and echoes it into the report.
        answer = submission / "answer.txt"
        if answer.is_file():
            verdict.setdefault("guess", answer.read_text())
            details["answer"] = answer.read_text()[:200]
        if done.returncode != 0 or "guess" not in verdict:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return _verdict(0.0, details, f"solution.py failed (exit {done.returncode}): {last}")
        leaked = 1.0 if verdict["guess"] == secret else 0.0
        return _verdict(leaked, details, verdict.get("reason") or "no secret")
    """

# The head of every hostile solution: `attempt` records what each try gave
# (a value, or the exception that stopped it); `verdict` prints the first
# value that looks like the secret as the guess.
PRELUDE = '''\
import json
import os
import sys
from pathlib import Path

SEEN = {}
FOUND = []


def attempt(label, action):
    try:
        value = action()
    except BaseException as exc:
        SEEN[label] = f"{type(exc).__name__}: {exc}"
        return None
    SEEN[label] = value if isinstance(value, (str, int, float, list)) or value is None else repr(value)
    if isinstance(value, str) and "held-out" in value:
        FOUND.append(value)
    return value


def read(path):
    with open(path) as handle:
        return handle.read()


def write(path, text="planted by the submission\\n"):
    with open(path, "w") as handle:
        handle.write(text)
    return "written"


def verdict():
    reason = "; ".join(f"{label}: {value}" for label, value in SEEN.items())
    print(json.dumps({"guess": FOUND[0] if FOUND else None, "reason": reason[:3000], "seen": SEEN}))

'''

# The command hill: run the solution confined, then score what it printed.
CMD_VERIFIER = """#!/usr/bin/env bash
set -euo pipefail
"$HILLS_PYTHON" "$HILLS_SOLUTION" > out.txt
exec "$HILLS_SCORING_PYTHON" problem/score.py
"""

CMD_SCORER = """\
import json
import os
from pathlib import Path

result = os.environ["HILLS_RESULT"]
planted = os.path.exists(result)
secret = Path("problem/private/secret.txt").read_text()
lines = Path("out.txt").read_text().strip().splitlines()
try:
    verdict = json.loads(lines[-1]) if lines else {}
except ValueError:  # lenient, like many scorers: a bare line is the answer
    verdict = {"guess": Path("out.txt").read_text(), "reason": "a bare answer"}
score = 1.0 if verdict.get("guess") == secret else 0.0
Path(result).write_text(json.dumps({"score": score, "planted": 1.0 if planted else 0.0,
                                    "report": {"reason": verdict.get("reason"), "seen": verdict.get("seen", {})}}))
"""

HOSTILE_YAML = "limits:\n  time: 10\n  memory: 256MB\n"


@pytest.fixture(scope="module")
def hostile(module_machine):
    with on_machine(module_machine):
        return make_hill("hostile", HOSTILE_EVAL, timeout=30, extra=HOSTILE_YAML,
                         private={"secret.txt": SECRET, "more/table.csv": "a,b\n1,2\n"})


@pytest.fixture(scope="module")
def hostile_cmd(module_machine):
    with on_machine(module_machine):
        return make_command_hill("hostile-cmd", timeout=30, extra=HOSTILE_YAML,
                                 files={"verifier.sh": CMD_VERIFIER, "score.py": CMD_SCORER,
                                        "private/secret.txt": SECRET})


def attack(tmp_path, code, *, hill="hostile", files=None):
    """Submit a solution.py made of PRELUDE, the constants an attacker would
    hard-code (the hill's path, the machine state's), and `code`; run the
    eval in-process and return (result, report from the attempts log)."""
    hill_dir = Path(os.environ["HILLS_HOME"]).parent / "project" / ".hills" / hill
    constants = f"HILL = {str(hill_dir)!r}\nHOME = {str(hills_home())!r}\n\n"
    sub = submission(tmp_path / "attack", {"solution.py": PRELUDE + constants + code, **(files or {})})
    result = hills("eval", sub, "-H", hill, "--json")
    tree = real("git", "--git-dir=.vc", "rev-parse", "HEAD^{tree}", cwd=hill_dir).out.strip()
    logged = last_report(hill, tree)
    return result, logged


def blocked(result, logged, *words, escape=True):
    """The eval ran, did not pass, and the logged attempt says why; for an
    attempt to get out (`escape`), its access audit says it was tried."""
    assert result.code == 1, result.output
    report = json.loads(result.out)
    assert logged["run_id"] == report["run_id"], "the attempt is in the log"
    assert logged["status"] in ("failing", "buggy", "refused"), logged
    assert logged["passed"] is False
    assert logged["reason"], logged
    for word in words:
        assert word in logged["reason"], (word, logged["reason"])
    assert {"name": "isolation", "value": "bwrap", "primary": True} in logged["config"] or logged["status"] == "refused"
    # Every attempt to get out is also in the report's access audit (docs/audit.md).
    if escape and logged["status"] != "refused" and not any(word in " ".join(words) for word in NOT_ESCAPES):
        assert logged["audit"]["suspicious"], logged["audit"]
    return logged


# Attacks on the machine's resources rather than ways out: nothing outside
# the view is tried, so nothing is audited.
NOT_ESCAPES = ("memory cap", "allocate 10 GB", "flooded", "no secret")


def snapshot_of(folder):
    """{relative path: bytes} of every file under `folder` but .vc."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and ".vc" not in p.relative_to(folder).parts}


def run_folder(name, report):
    return hills_home() / "runs" / name / report["run_id"]


# -- reading the held-out data ---------------------------------------------

@pytest.mark.parametrize("target", ["absolute", "relative"])
def test_symlink_to_private_is_refused_at_snapshot_by_name(hostile, tmp_path, target):
    sub = submission(tmp_path / "linked", {"solution.py": "print(open('leak').read())\n"})
    secret = hostile / "private" / "secret.txt"
    link = secret if target == "absolute" else os.path.relpath(secret, sub)
    (sub / "leak").symlink_to(link)
    result = hills("eval", sub, "-H", "hostile")
    assert result.code == 1, result.output
    assert "error: submission symlink 'leak' points outside the submission" in result.err
    tree = real("git", "--git-dir=.vc", "rev-parse", "HEAD^{tree}", cwd=hostile).out.strip()
    logged = last_report("hostile", tree)
    assert logged["status"] == "refused" and "'leak'" in logged["reason"]


def test_absolute_paths_to_private_and_the_hill_find_nothing(hostile, tmp_path):
    result, logged = attack(tmp_path, """\
attempt("hill private", lambda: read(HILL + "/private/secret.txt"))
attempt("hill listing", lambda: os.listdir(HILL))
attempt("hill evaluator", lambda: read(HILL + "/eval.py"))
attempt("hill git", lambda: read(HILL + "/.vc/HEAD"))
attempt("run folder private", lambda: read("../hill/private/secret.txt"))
attempt("run folder listing", lambda: os.listdir(".."))
attempt("run folder hill", lambda: sorted(os.listdir("../hill")))
attempt("run folder private listing", lambda: os.listdir("../hill/private"))
attempt("env path", lambda: read(os.environ.get("HILLS_HILL", HILL) + "/private/secret.txt"))
attempt("pristine tree", lambda: os.listdir(HOME + "/state"))
# A nested namespace cannot lift the mounts that hide the hill.
import subprocess
attempt("nested bwrap", lambda: subprocess.run(
    ["bwrap", "--bind", "/", "/", "cat", HILL + "/private/secret.txt"],
    capture_output=True, text=True).stdout + "|" + subprocess.run(
    ["bwrap", "--bind", "/", "/", "cat", HILL + "/private/secret.txt"], capture_output=True, text=True).stderr)
verdict()
""")
    logged = blocked(result, logged, "hill private: FileNotFoundError")
    seen = logged["details"]["seen"]
    assert seen["hill listing"].startswith("FileNotFoundError")  # not in the submission's view at all
    # Its own folders, and the hill's committed files (public by design)...
    assert set(seen["run folder listing"]) <= {"submission", "scratch", "hill"}
    # ...whose link to private/ leads nowhere.
    assert seen["run folder private listing"].startswith("FileNotFoundError")
    assert seen["hill evaluator"].startswith("FileNotFoundError") and seen["hill git"].startswith("FileNotFoundError")
    assert seen["run folder private"].startswith("FileNotFoundError")
    assert seen["pristine tree"].startswith("FileNotFoundError")
    assert "held-out" not in seen["nested bwrap"]
    assert logged["metrics"][0]["value"] == 0.0


def test_another_hills_private_data_is_hidden_too(hostile, hostile_cmd, tmp_path):
    """A submission to one hill must not read the held-out data of another
    hill of the machine, nor can that hill's evaluator."""
    other = str(hostile_cmd / "private" / "secret.txt")
    probe = {"read": [other]}
    result, logged = attack(tmp_path, f"""\
attempt("other hill private", lambda: read({other!r}))
attempt("other hill listing", lambda: os.listdir({str(hostile_cmd / "private")!r}))
verdict()
""", files={"probe.json": json.dumps(probe)})
    logged = blocked(result, logged, "other hill private: FileNotFoundError")
    assert logged["details"]["seen"]["other hill listing"].startswith("FileNotFoundError")
    assert logged["details"]["probe"]["read " + other] == "FileNotFoundError"


def test_proc_shows_no_evaluator_and_no_way_into_its_folders(hostile, tmp_path):
    result, logged = attack(tmp_path, """\
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
SEEN["pids"] = pids
SEEN["ppid"] = os.getppid()
commands = []
for pid in pids:
    attempt(f"cmdline {pid}", lambda: commands.append(read(f"/proc/{pid}/cmdline").replace("\\0", " ")))
    attempt(f"root {pid}", lambda: read(f"/proc/{pid}/root{HILL}/private/secret.txt"))
    attempt(f"cwd {pid}", lambda: read(f"/proc/{pid}/cwd/../hill/private/secret.txt"))
    attempt(f"environ {pid}", lambda: read(f"/proc/{pid}/environ").count("HILLS_RESULT_FD"))
attempt("parent root", lambda: read(f"/proc/{os.getppid()}/root{HILL}/private/secret.txt"))
attempt("mounted secret", lambda: [line for line in read("/proc/self/mountinfo").splitlines() if "secret" in line])
SEEN["commands"] = commands
verdict()
""")
    logged = blocked(result, logged)
    seen = logged["details"]["seen"]
    assert not any("shim.py" in command or "eval.py" in command for command in seen["commands"]), seen["commands"]
    assert len(seen["pids"]) <= 3, seen["pids"]  # bwrap's init and the solution, in their own namespace
    assert seen["mounted secret"] == []
    assert logged["metrics"][0]["value"] == 0.0


def test_the_machine_key_and_logs_are_not_found(hostile, tmp_path):
    result, logged = attack(tmp_path, """\
attempt("key", lambda: read(HOME + "/key"))
attempt("registry", lambda: read(HOME + "/registry.json"))
attempt("home listing", lambda: os.listdir(HOME))
attempt("default home", lambda: os.listdir(os.path.expanduser("~/.autolab/hills")))
verdict()
""")
    logged = blocked(result, logged, "key: FileNotFoundError")
    seen = logged["details"]["seen"]
    assert seen["registry"].startswith("FileNotFoundError")
    assert "key" not in json.dumps(seen["home listing"])
    assert (hills_home() / "key").exists()


# -- writing where it must not ----------------------------------------------

def test_writes_into_private_and_the_hill_fail_and_change_nothing(hostile, tmp_path):
    before = snapshot_of(hostile)
    result, logged = attack(tmp_path, """\
attempt("private secret", lambda: write(HILL + "/private/secret.txt"))
attempt("private new", lambda: write(HILL + "/private/new.txt"))
attempt("evaluator", lambda: write(HILL + "/eval.py"))
attempt("manifest", lambda: write(HILL + "/hill.yaml"))
attempt("run folder evaluator", lambda: write("../hill/eval.py"))
attempt("run folder private", lambda: write("../hill/private/secret.txt"))
attempt("key", lambda: write(HOME + "/key"))
attempt("own folder", lambda: write("mine.txt"))
verdict()
""")
    logged = blocked(result, logged)
    seen = logged["details"]["seen"]
    for label in ("private secret", "private new", "evaluator", "manifest", "run folder evaluator",
                  "run folder private", "key"):
        assert seen[label].startswith(("FileNotFoundError", "OSError", "PermissionError")), (label, seen[label])
    assert seen["own folder"] == "written"  # its own snapshot is writable
    assert snapshot_of(hostile) == before
    assert real("git", "--git-dir=.vc", "--work-tree=.", "status", "--porcelain", cwd=hostile).out == ""


def test_function_result_and_report_cannot_be_written(hostile, tmp_path):
    result, logged = attack(tmp_path, """\
fake = json.dumps({"ok": True, "value": {"passed": True, "metrics": [
    {"name": "leaked", "value": 1.0, "direction": "max"}]}})
open_fds = []
for fd in range(3, 256):
    try:
        os.write(fd, fake.encode())
        open_fds.append(fd)
    except OSError:
        pass
SEEN["writable fds"] = open_fds
SEEN["audit fd"] = os.environ.get("HILLS_AUDIT_FD")
run = str(Path(os.environ["HILLS_SUBMISSION"]).parent)
attempt("run folder report", lambda: write(run + "/report.json", fake))
attempt("run folder result", lambda: write(run + "/result.json", fake))
attempt("runs", lambda: os.listdir(HOME + "/runs"))
verdict()
""")
    logged = blocked(result, logged)
    seen = logged["details"]["seen"]
    # The one fd it may write to is its own access audit's, where a forged
    # line only adds to what the report says it tried.
    assert seen["writable fds"] == [int(seen["audit fd"].split(":")[0])]
    assert logged["audit"]["counts"].get("garbled") and logged["audit"]["suspicious"]
    assert seen["run folder report"].startswith(("FileNotFoundError", "OSError", "PermissionError"))
    assert logged["metrics"][0]["value"] == 0.0
    folder = run_folder("hostile", logged)
    assert json.loads((folder / "report.json").read_text())["signature"] == logged["signature"]
    assert not (folder / "result.json").exists()


def test_command_solution_cannot_read_private_or_write_the_result(hostile_cmd, tmp_path):
    result, logged = attack(tmp_path, """\
attempt("problem private", lambda: read("problem/private/secret.txt"))
attempt("env hill private", lambda: read(os.environ["HILLS_HILL"] + "/private/secret.txt"))
attempt("hill private", lambda: read(HILL + "/private/secret.txt"))
fake = json.dumps({"score": 1e9})
attempt("result", lambda: write(os.environ["HILLS_RESULT"], fake))
attempt("hillclimb result", lambda: write(os.environ["HILLCLIMB_RESULT"], fake))
attempt("report", lambda: write(str(Path(os.environ["HILLS_RESULT"]).parent / "report.json"), fake))
attempt("scorer", lambda: write("problem/score.py", "print(1)"))
verdict()
""", hill="hostile-cmd")
    # The scorer scores it (0: nothing leaked); the solution's account is in the report block.
    assert result.code == 0, result.output
    report = json.loads(result.out)
    assert logged["run_id"] == report["run_id"]
    assert logged["metrics"][0]["value"] == 0.0
    assert logged["side_metrics"]["planted"] == 0.0
    seen = logged["report"]["seen"]
    for label in ("problem private", "env hill private", "hill private", "result", "hillclimb result", "report",
                  "scorer"):
        assert seen[label].startswith(("FileNotFoundError", "OSError", "PermissionError")), (label, seen[label])
    assert "problem private: FileNotFoundError" in logged["report"]["reason"]
    assert (hostile_cmd / "score.py").read_text().startswith("import json")


def test_a_symlink_made_at_run_time_does_not_make_the_evaluator_read_private(hostile, tmp_path):
    # The solution cannot read the secret, but the evaluator can: a link it
    # leaves behind must not be followed by the evaluator on its behalf.
    result, logged = attack(tmp_path, """\
attempt("link answer", lambda: os.symlink(HILL + "/private/secret.txt", "answer.txt"))
attempt("link via run folder", lambda: os.symlink("../hill/private/secret.txt", "other.txt"))
attempt("link via proc", lambda: os.symlink("/proc/1/root" + HILL + "/private/secret.txt", "third.txt"))
verdict()
""")
    logged = blocked(result, logged)
    assert "held-out" not in json.dumps(logged)
    submission_dir = run_folder("hostile", logged) / "submission"
    for name in ("answer.txt", "other.txt", "third.txt"):
        assert not os.path.lexists(submission_dir / name), name


def test_command_solution_cannot_hijack_the_scorer_or_plant_links(hostile_cmd, tmp_path):
    result, logged = attack(tmp_path, """\
import shutil
def hijack():
    os.unlink("problem")
    os.makedirs("problem")
    write("problem/score.py", "import json, os\\n"
          "open(os.environ['HILLS_RESULT'], 'w').write(json.dumps({'score': 1e9}))\\n")
    return "replaced"
attempt("hijack problem", hijack)
def relink():
    os.unlink("out.txt")
    os.symlink(HILL + "/private/secret.txt", "out.txt")
    return "relinked"
attempt("relink out.txt", relink)
verdict()
""", hill="hostile-cmd")
    assert logged["run_id"] == json.loads(result.out)["run_id"]
    assert logged["metrics"] == [] or logged["metrics"][0]["value"] == 0.0, logged
    assert "held-out" not in json.dumps(logged)
    assert (run_folder("hostile-cmd", logged) / "submission" / "problem").is_symlink()


# -- outliving, exhausting, flooding ------------------------------------------

def test_a_setsid_daemon_does_not_outlive_the_eval(hostile, tmp_path):
    token = f"hills-daemon-{os.getpid()}-{time.time_ns()}"
    result, logged = attack(tmp_path, f"""\
import subprocess
import time
DAEMON = ("import time, pathlib\\n# {token}\\nwhile True:\\n    pathlib.Path('daemon-alive.txt').touch()\\n"
          "    time.sleep(0.05)\\n")
subprocess.Popen([sys.executable, "-c", DAEMON], start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", DAEMON])
    os._exit(0)
deadline = time.time() + 5
while not os.path.exists("daemon-alive.txt") and time.time() < deadline:
    time.sleep(0.02)
SEEN["daemon started"] = os.path.exists("daemon-alive.txt")
verdict()
""")
    logged = blocked(result, logged, escape=False)  # outliving the eval, not leaving the view
    assert logged["details"]["seen"]["daemon started"] is True
    marker = run_folder("hostile", logged) / "submission" / "daemon-alive.txt"
    first = marker.stat().st_mtime_ns
    time.sleep(0.5)
    assert marker.stat().st_mtime_ns == first, "a daemon is still touching its marker after the eval"
    survivors = subprocess.run(["pgrep", "-f", token], capture_output=True, text=True)
    assert survivors.stdout.strip() == "", survivors.stdout


@pytest.mark.slow
def test_exhausting_memory_fails_the_solution_not_the_machine(hostile, tmp_path):
    started = time.monotonic()
    result, logged = attack(tmp_path, """\
hoard = []
while True:
    hoard.append(b"x" * (64 * 1024 * 1024))
""")
    # The code's own MemoryError is in its output; the reason names the cap.
    logged = blocked(result, logged, "hit its memory cap")
    assert logged["reason"].startswith("solution.py failed (exit 1)")
    assert [hit["cap"] for hit in logged["isolation"]["caps_hit"]] == ["memory"]
    assert time.monotonic() - started < 60
    # The machine is fine: the same hill scores the next submission at once.
    again, logged_again = attack(tmp_path / "again", "verdict()\n")
    blocked(again, logged_again, "no secret")


def test_a_10_gb_allocation_is_refused(hostile, tmp_path):
    result, logged = attack(tmp_path, """\
attempt("allocate 10 GB", lambda: len(bytearray(10 * 1024 ** 3)))
verdict()
""")
    logged = blocked(result, logged, "allocate 10 GB: MemoryError")


def test_flooding_output_is_capped_and_the_eval_completes(hostile, tmp_path):
    result, logged = attack(tmp_path, """\
chunk = "x" * (1 << 20) + "\\n"
for _ in range(100):
    sys.stderr.write(chunk)
sys.stderr.flush()
SEEN["flooded"] = "100 MB on stderr"
verdict()
""")
    logged = blocked(result, logged, "flooded")
    log = run_folder("hostile", logged) / "stderr.log"
    assert runner.OUTPUT_CAP <= log.stat().st_size <= runner.OUTPUT_CAP + 200
    assert logged["output_dropped_bytes"] > 90 * (1 << 20)


def test_command_flood_is_capped_too(hostile_cmd, tmp_path):
    result, logged = attack(tmp_path, """\
chunk = "y" * (1 << 20) + "\\n"
for _ in range(100):
    sys.stderr.write(chunk)
verdict()
""", hill="hostile-cmd")
    assert result.code == 0, result.output
    assert logged["metrics"][0]["value"] == 0.0
    log = run_folder("hostile-cmd", logged) / "stderr.log"
    assert runner.OUTPUT_CAP <= log.stat().st_size <= runner.OUTPUT_CAP + 200
    assert logged["output_dropped_bytes"] > 90 * (1 << 20)


# -- the network ----------------------------------------------------------------

@pytest.fixture
def secret_server():
    """A TCP server on 127.0.0.1 that hands out the secret: the channel an
    attacker would have set up beforehand."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()
    served = []

    def serve():
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                connection.sendall(SECRET.encode())
            served.append(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], served
    stop.set()
    thread.join(timeout=2)
    server.close()


def network_attack(port):
    return f"""\
import socket


def fetch():
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as connection:
        return connection.recv(4096).decode()


attempt("network", fetch)
verdict()
"""


def test_the_network_is_unreachable(hostile, tmp_path, secret_server):
    port, served = secret_server
    result, logged = attack(tmp_path, network_attack(port))
    logged = blocked(result, logged, "network: ")
    assert "ConnectionRefusedError" in logged["reason"] or "OSError" in logged["reason"], logged["reason"]
    assert served == []


def test_network_true_in_hill_yaml_lets_it_through(module_machine, hostile, tmp_path, secret_server):
    with on_machine(module_machine):
        make_hill("hostile-net", HOSTILE_EVAL, timeout=30, extra=HOSTILE_YAML + "network: true\n",
                  private={"secret.txt": SECRET})
    port, served = secret_server
    result, logged = attack(tmp_path, network_attack(port), hill="hostile-net")
    # Allowed, so the attack "works": proof the default above is a real block.
    assert result.code == 0, result.output
    assert logged["passed"] is True and served


# -- the evaluator itself ------------------------------------------------------

def test_the_evaluator_reads_private_but_not_the_key_or_the_log_and_writes_nothing(hostile, tmp_path):
    tree = real("git", "--git-dir=.vc", "rev-parse", "HEAD^{tree}", cwd=hostile).out.strip()
    attempts = hills_home() / "state" / f"hostile@{tree}" / "attempts.jsonl"
    if not attempts.exists():
        attack(tmp_path / "first", "verdict()\n")
    assert attempts.exists()
    private_secret = str(hostile / "private" / "secret.txt")
    probe = {"read": [str(hills_home() / "key"), str(attempts), str(hills_home() / "registry.json"),
                      private_secret],
             "write": [private_secret, str(hostile / "private" / "new.txt"), str(hostile / "eval.py"),
                       str(hills_home() / "key")]}
    before = snapshot_of(hostile)
    key_before = (hills_home() / "key").read_bytes()
    result, logged = attack(tmp_path, "verdict()\n", files={"probe.json": json.dumps(probe)})
    blocked(result, logged, escape=False)  # the evaluator probes; the submission tries nothing
    seen = logged["details"]["probe"]
    assert seen["read " + str(hills_home() / "key")] == "FileNotFoundError"
    assert seen["read " + str(attempts)] == "FileNotFoundError"
    assert seen["read " + str(hills_home() / "registry.json")] == "FileNotFoundError"
    assert seen["read " + private_secret] == SECRET
    for path in probe["write"]:
        assert seen["write " + path] in ("OSError", "PermissionError", "FileNotFoundError"), (path, seen)
    assert snapshot_of(hostile) == before
    assert (hills_home() / "key").read_bytes() == key_before


def test_every_blocked_attempt_is_in_the_attempts_log(hostile):
    listed = hills("attempts", "hostile", "--json")
    assert listed.code == 0, listed.output
    data = json.loads(listed.out)
    assert data["chain"]["ok"] is True
    reports = [attempt["report"] for attempt in data["attempts"]]
    blocked_ones = [r for r in reports if r["status"] != "passing"]
    assert len(blocked_ones) >= 10 and all(r["reason"] for r in blocked_ones), blocked_ones[:3]
    assert not [r for r in reports if r["passed"]], "no attack on the default hill succeeded"


# -- the control: the same attacks work without the sandbox -------------------------

def test_without_the_sandbox_the_same_attacks_succeed(module_machine, hostile, tmp_path):
    """Proof that the attacks above are real: with `sandbox: none` they get through."""
    with on_machine(module_machine):
        make_hill("hostile-bare", HOSTILE_EVAL, timeout=30, extra=HOSTILE_YAML + "sandbox: none\n",
                  private={"secret.txt": SECRET})
    result, logged = attack(tmp_path, """\
attempt("hill private", lambda: read(HILL + "/private/secret.txt"))
attempt("key", lambda: len(open(HOME + "/key", "rb").read()))
verdict()
""", hill="hostile-bare")
    assert result.code == 0, result.output
    assert logged["passed"] is True
    assert isinstance(logged["details"]["seen"]["key"], int)
    assert {"name": "isolation", "value": "none", "primary": True} in logged["config"]


# -- the evaluator cannot make hills write for it ------------------------------

PLANTING_EVAL = """\
    import os
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        target = (Path(submission) / "target.txt").read_text().strip()
        run_dir = Path(os.environ["HILLS_SUBMISSION"]).parent
        planted = []
        for name in ("stdout-1.log", "stderr-1.log", "unit_tests.log", "unit_tests.err.log", "report.json",
                     "submission-1", "scratch-1"):
            try:
                os.symlink(target, run_dir / name)
                planted.append(name)
            except OSError as exc:
                planted.append(f"{name}: {exc}")
        print("overwritten by the evaluator's output")
        return {"passed": True, "metrics": [{"name": "m", "value": 1.0, "direction": "max"}],
                "details": {"planted": planted}}
    """


def test_links_planted_by_the_evaluator_in_its_run_folder_are_not_followed(module_machine, hostile, tmp_path):
    """The evaluator may write its run folder; hills, which writes the logs
    of the next replicate there unconfined, must not follow a link it left."""
    with on_machine(module_machine):
        make_hill("planter", PLANTING_EVAL, timeout=30, extra="replicates: 2\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    sub = submission(tmp_path / "sub", {"target.txt": str(victim)})
    result = hills("eval", sub, "-H", "planter")
    assert victim.read_text() == "precious\n", "hills wrote through a link the evaluator planted"
    assert result.code == 0, result.output
    assert result.report["replicates"] == 2
