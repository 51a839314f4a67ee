"""Attacks by submitted code on what it must not see or exhaust, each run
through a real eval: the user's sockets, keys and project, /etc/shadow
(with `sandbox: none` as the control showing the attack works with the
boundary off), and the caps under `limits:` (processes, disk, file size,
CPU time), each stopping the code and named in the report."""

import json
import os
import socket
import tempfile
from pathlib import Path

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import hills, make_hill, on_machine, submission
from hills.base import state

# Runs attack.py from the submission through hills.sdk and reports what it
# printed: the one way this evaluator starts submitted code.
ATTACK_EVAL = """\
    import json
    import sys
    from pathlib import Path

    from hills import sdk

    def eval(submission, *, final=False, **params):
        done = sdk.run_submission([sys.executable, "attack.py"], capture_output=True, text=True)
        lines = done.stdout.strip().splitlines()
        seen = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        details = {"exit": done.returncode, "seen": seen, "stderr": done.stderr[-2000:]}
        if done.returncode != 0:
            details["reason"] = f"attack.py exited with status {done.returncode}"
        return {"passed": done.returncode == 0, "metrics": [{"name": "total", "value": 1.0, "direction": "max"}],
                "details": details}
    """
LIMITS = "limits:\n  time: 30\n  disk: 50MB\n  file_size: 20MB\n  cpu: 2\n"

READER = """\
import json, os, socket
paths = json.load(open("paths.json"))
seen = {}
def attempt(name, action):
    try:
        seen[name] = action()
    except Exception as exc:
        seen[name] = "refused: " + type(exc).__name__
def connect(path):
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    client.close()
    return "connected"
attempt("home socket", lambda: connect(paths["home_socket"]))
attempt("tmp socket", lambda: connect(paths["tmp_socket"]))
attempt("ssh key", lambda: open(paths["ssh_key"]).read())
attempt("netrc", lambda: open(paths["netrc"]).read())
attempt("project", lambda: sorted(os.listdir(paths["project"])))
attempt("shadow", lambda: open("/etc/shadow").read()[:10])
attempt("home listing", lambda: sorted(os.listdir(paths["home"])))
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def hills_made(module_machine):
    with on_machine(module_machine):
        boxed = make_hill("boxed", ATTACK_EVAL, timeout=60, extra=LIMITS + "sandbox: bwrap\n")
        opened = make_hill("opened", ATTACK_EVAL, timeout=60, extra=LIMITS + "sandbox: none\n")
        return {"boxed": boxed, "opened": opened}


@pytest.fixture
def secrets(hermetic):
    """The user's secrets: an ssh key and a netrc in HOME, an agent socket
    listening in HOME and another in the machine's /tmp."""
    home = hermetic.home
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- secret\n")
    (home / ".netrc").write_text("machine example.org login me password hunter2\n")
    listeners = []
    folder = tempfile.mkdtemp(prefix="hills-agent-", dir="/tmp")
    paths = {"home_socket": str(home / "agent.sock"), "tmp_socket": os.path.join(folder, "agent.sock")}
    for path in paths.values():
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(8)
        listeners.append(listener)
    paths.update(ssh_key=str(home / ".ssh" / "id_rsa"), netrc=str(home / ".netrc"), project=str(hermetic.project),
                 home=str(home))
    yield paths
    for listener in listeners:
        listener.close()
    for path in (paths["home_socket"], paths["tmp_socket"]):
        if os.path.exists(path):
            os.unlink(path)
    os.rmdir(folder)


def attack(tmp_path: Path, hill: str, code: str, files: dict[str, str] | None = None) -> tuple[int, dict]:
    sub = submission(tmp_path / "sub", {"attack.py": code, **(files or {})})
    result = hills("eval", sub, "-H", hill, "--json")
    return result.code, result.report


@needs_bwrap
def test_the_users_sockets_keys_and_project_are_out_of_sight(hills_made, secrets, tmp_path):
    code, report = attack(tmp_path, "boxed", READER, {"paths.json": json.dumps(secrets)})
    assert code == 0, report
    seen = report["details"]["seen"]
    for name in ("home socket", "tmp socket", "ssh key", "netrc", "project", "shadow", "home listing"):
        assert str(seen[name]).startswith("refused: "), (name, seen[name])
    isolation = report["isolation"]
    assert isolation["evaluator"] == "bwrap" and isolation["submitted_code"] == "confined"
    assert isolation["runs"] == 1 and isolation["started_by"] == {"sdk": 1} and isolation["caps_hit"] == []
    assert {"name": "isolation", "value": "bwrap", "primary": True} in report["config"]


def test_with_the_boundary_off_the_same_attacks_succeed(hills_made, secrets, tmp_path):
    """The control: without the sandbox, each attack above reaches its target."""
    code, report = attack(tmp_path, "opened", READER, {"paths.json": json.dumps(secrets)})
    assert code == 0, report
    seen = report["details"]["seen"]
    assert seen["home socket"] == "connected" and seen["tmp socket"] == "connected"
    assert "PRIVATE KEY" in seen["ssh key"] and "hunter2" in seen["netrc"]
    assert ".hills" in seen["project"] or seen["project"], seen["project"]
    if os.geteuid() == 0:
        assert not str(seen["shadow"]).startswith("refused: ")
    assert report["isolation"]["submitted_code"] == "unconfined" and report["isolation"]["evaluator"] == "none"


FORKS = """\
import json, subprocess
started = 0
for _ in range(3000):
    try:
        subprocess.Popen(["sleep", "60"])
        started += 1
    except OSError:
        break
print(json.dumps({"started": started}))
"""


@needs_bwrap
def test_3000_sleeps_are_stopped_well_short(hills_made, tmp_path):
    code, report = attack(tmp_path, "boxed", FORKS)
    assert code == 1, report
    hit = report["isolation"]["caps_hit"]
    assert [entry["cap"] for entry in hit] == ["processes"], report["isolation"]
    assert hit[0]["limit"] == 512 and report["isolation"]["limits"]["processes"] == 512
    started = report["details"]["seen"].get("started", 0)
    assert started < 1000, started
    assert "stopped at its cap: processes" in report["reason"]


DISK = """\
import os
block = b"x" * (10 * 1000 * 1000)
for number in range(240):
    with open(f"big-{number}.bin", "wb") as handle:
        handle.write(block)
print("{}")
"""


@needs_bwrap
def test_writing_2_4_gb_is_stopped_at_the_disk_cap_and_the_bytes_are_gone(hills_made, tmp_path):
    code, report = attack(tmp_path, "boxed", DISK)
    assert code == 1, report
    hit = report["isolation"]["caps_hit"]
    assert [entry["cap"] for entry in hit] == ["disk"], report["isolation"]
    assert hit[0]["limit"] == 50 * 1000 * 1000 and hit[0]["seen"] < 1000 * 1000 * 1000
    assert "stopped at its cap: disk" in report["reason"]
    run_dir = Path(state.runs_dir("boxed")) / report["run_id"]
    written = sum(path.stat().st_size for path in run_dir.rglob("big-*.bin"))
    assert written == 0, written


FILE = """\
with open("one.bin", "wb") as handle:
    for _ in range(30):
        handle.write(b"y" * (1000 * 1000))
"""


@needs_bwrap
def test_a_file_over_file_size_is_stopped(hills_made, tmp_path):
    code, report = attack(tmp_path, "boxed", FILE)
    assert code == 1, report
    hit = report["isolation"]["caps_hit"]
    assert [entry["cap"] for entry in hit] == ["file_size"], report["isolation"]
    assert hit[0]["limit"] == 20 * 1000 * 1000
    # The kernel's limit (EFBIG) and hills' own watch race for the file:
    # either way the evaluator's stderr says which stopped it.
    stderr = report["details"]["stderr"]
    assert "File too large" in stderr or "hit its file_size cap (20000000 bytes" in stderr, stderr
    assert not (Path(state.runs_dir("boxed")) / report["run_id"] / "submission" / "one.bin").exists()


SPIN = """\
while True:
    pass
"""


@pytest.mark.slow
@needs_bwrap
def test_a_cpu_spin_is_stopped_at_the_cpu_cap(hills_made, tmp_path):
    code, report = attack(tmp_path, "boxed", SPIN)
    assert code == 1, report
    hit = report["isolation"]["caps_hit"]
    assert [entry["cap"] for entry in hit] == ["cpu"], report["isolation"]
    assert hit[0]["limit"] == 2 and hit[0]["seen"] >= 2
    assert report["details"]["exit"] != 0


@needs_bwrap
def test_the_report_with_isolation_verifies(hills_made, tmp_path):
    code, report = attack(tmp_path, "boxed", "print('{}')\n")
    assert code == 0, report
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    verified = hills("verify", saved)
    assert verified.code == 0, verified.output


@pytest.mark.parametrize("limits, words", [
    ("processes: 2", "key 'limits.processes': expected an integer >= 8"),
    ("disk: 10k", "key 'limits.disk': expected a size of at least 1MiB"),
    ("file_size: lots", "key 'limits.file_size': expected a size in bytes"),
    ("cpu: -1", "key 'limits.cpu': expected a number of seconds greater than 0"),
])
def test_a_bad_limit_names_the_file_the_key_and_what_was_expected(project, limits, words):
    created = hills("new", "badcaps")
    assert created.code == 0, created.output
    hill_yaml = Path(created.out.strip()) / "hill.yaml"
    hill_yaml.write_text(hill_yaml.read_text() + f"limits:\n  {limits}\n")
    checked = hills("check", "badcaps")
    assert checked.code == 1, checked.output
    assert "FAIL  manifest" in checked.output
    assert "hill.yaml" in checked.output and words in checked.output, checked.output


@pytest.mark.slow
@needs_bwrap
def test_the_solution_phase_counts_as_confined_and_no_code_as_not_started(committed_hill, tmp_path):
    grid = committed_hill / "examples" / "grid" / "circles.json"
    solver = submission(tmp_path / "solver",
                        {"solution.py": f"open('circles.json', 'w').write({grid.read_text()!r})\n"})
    result = hills("eval", solver, "-H", "circle-packing", "--json")
    assert result.code == 0, result.output
    isolation = result.report["isolation"]
    assert isolation["submitted_code"] == "confined" and isolation["started_by"] == {"solution": 1}, isolation
    assert isolation["limits"]["processes"] == 512 and isolation["limits"]["cpu"] == isolation["limits"]["time"]
    plain = submission(tmp_path / "plain", {"circles.json": grid.read_text()})
    result = hills("eval", plain, "-H", "circle-packing", "--json")
    assert result.code == 0, result.output
    assert result.report["isolation"]["submitted_code"] == "not started by hills"
    assert result.report["isolation"]["runs"] == 0


GREEDY = """\
chunks = []
while True:
    chunks.append(bytearray(8 * 1024 * 1024))
"""


@needs_bwrap
def test_memory_up_to_the_cap_is_refused_and_the_cap_named(tmp_path):
    """RLIMIT_AS refuses the allocation past the cap; the code fails, and the
    watch, having seen its address space come up to the cap, names it."""
    make_hill("greedy", ATTACK_EVAL, timeout=60, extra="limits:\n  time: 30\n  memory: 256MiB\nsandbox: bwrap\n")
    code, report = attack(tmp_path, "greedy", GREEDY)
    assert code == 1, report
    hit = report["isolation"]["caps_hit"]
    assert [entry["cap"] for entry in hit] == ["memory"], report["isolation"]
    assert hit[0]["limit"] == 256 * 1024 * 1024 and hit[0]["seen"] >= 192 * 1024 * 1024
    assert "MemoryError" in report["details"]["stderr"]
    assert "stopped at its cap: memory" in report["reason"]
    # A failure far from the cap is not the cap's.
    code, report = attack(tmp_path / "plain", "greedy", "raise SystemExit(3)\n")
    assert code == 1 and report["isolation"]["caps_hit"] == [], report["isolation"]
