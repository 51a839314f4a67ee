"""The access audit: what submitted code tried outside its view (paths to
read or write, /proc, tools that are not there, the network, sockets) is
in its report, counted with the first paths, and `hills show` and
`hills attempts` flag it whatever the score; an honest solution shows
none. Each attack is also run with the audit switched off: denied all the
same by the sandbox, and unseen."""

import json

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import hills, hills_home, last_report, make_hill, on_machine, submission, tree_of
from hills.run import sandbox

pytestmark = needs_bwrap

AUDITED_EVAL = """\
    import sys

    def eval(submission, *, final=False, **params):
        from hills import sdk

        done = sdk.run_submission([sys.executable, "solution.py"], timeout=20, capture_output=True, text=True)
        return {"passed": done.returncode == 0, "metrics": [{"name": "ran", "value": 1.0, "direction": "max"}],
                "details": {"stdout": done.stdout[-2000:], "stderr": done.stderr[-1000:]}}
    """

HONEST = """\
import json, os, tempfile
from pathlib import Path
data = json.loads(Path("data.json").read_text())
Path("out.json").write_text(json.dumps(data))
with tempfile.NamedTemporaryFile("w", delete=False) as handle:
    handle.write("scratch")
os.listdir(".")
print("done")
"""

ATTACKS = {
    "read": "open(TARGETS['private']).read()",
    "key": "open(TARGETS['key']).read()",
    "proc": "os.listdir('/proc'); open('/proc/2/environ').read()",
    "write": "open('/etc/hills-was-here', 'w').write('x')",
    "exec": "subprocess.run(['/opt/hills-escape/tool'])",
    "network": "socket.create_connection(('192.0.2.1', 80), timeout=1)",
    "socket": "s = socket.socket(socket.AF_UNIX); s.connect('/run/hills-test.sock')",
    "link": "os.symlink(TARGETS['private'], 'answer.txt'); open('answer.txt').read()",
    "run folder": "open('../hill/private/secret.txt').read()",
}
EXPECTED_KIND = {"read": "read", "key": "read", "proc": "proc", "write": "write", "exec": "exec",
                 "network": "network", "socket": "socket", "link": "link", "run folder": "read"}

ATTACK = """\
import json, os, socket, subprocess
TARGETS = json.load(open("targets.json"))
results = {{}}
try:
    {code}
    results["outcome"] = "succeeded"
except Exception as exc:
    results["outcome"] = type(exc).__name__
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def audited(module_machine):
    with on_machine(module_machine):
        hill_dir = make_hill("audited", AUDITED_EVAL, timeout=60, private={"secret.txt": "the answer\n"})
        yield hill_dir, tree_of(hill_dir)


def _targets(hill_dir):
    return json.dumps({"private": str(hill_dir / "private" / "secret.txt"), "key": str(hills_home() / "key")})


def _attack(tmp_path, hill_dir, name):
    return submission(tmp_path, {"solution.py": ATTACK.format(code=ATTACKS[name]), "targets.json": _targets(hill_dir)})


def test_an_honest_solution_shows_nothing(audited, tmp_path):
    _, tree = audited
    folder = submission(tmp_path, {"solution.py": HONEST, "data.json": "[1, 2]"})
    result = hills("eval", folder, "-H", "audited")
    assert result.code == 0, result.output
    audit = last_report("audited", tree)["audit"]
    assert audit["runs"] == 1 and audit["denied"] is True
    assert audit["attempts"] == 0 and audit["suspicious"] is False, audit


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attempt_is_in_the_audit_and_flagged(audited, tmp_path, name):
    hill_dir, tree = audited
    result = hills("eval", _attack(tmp_path, hill_dir, name), "-H", "audited", "-o", tmp_path / "report.json")
    report = last_report("audited", tree)
    assert json.loads(report["details"]["stdout"].strip().splitlines()[-1])["outcome"] != "succeeded"
    audit = report["audit"]
    assert audit["suspicious"] is True and audit["counts"].get(EXPECTED_KIND[name]), audit
    assert any(attempt["kind"] == EXPECTED_KIND[name] for attempt in audit["first"])
    if name == "read":
        assert {"kind": "read", "path": str(hill_dir / "private" / "secret.txt")} in audit["first"]
    # Flagged even though the report passes with a perfectly ordinary score.
    assert result.code == 0 and report["status"] == "passing"
    shown = hills("show", tmp_path / "report.json")
    assert "SUSPICIOUS: submitted code tried and was denied" in shown.output, shown.output
    listed = hills("attempts", "audited")
    row = next(line for line in listed.output.splitlines() if report["submission_hash"][:19] in line)
    assert "! SUSPICIOUS" in row


@pytest.mark.parametrize("name", ["read", "proc", "network"])
def test_control_with_the_audit_off_the_same_attempt_goes_unseen(audited, tmp_path, monkeypatch, name):
    hill_dir, tree = audited
    original = sandbox.Confinement.submission_config

    def without_audit(self, *args, **kwargs):
        config = original(self, *args, **kwargs)
        config.pop("audit")
        return config

    monkeypatch.setattr(sandbox.Confinement, "submission_config", without_audit)
    hills("eval", _attack(tmp_path, hill_dir, name), "-H", "audited")
    report = last_report("audited", tree)
    assert json.loads(report["details"]["stdout"].strip().splitlines()[-1])["outcome"] != "succeeded"
    assert report["audit"] == {"runs": 0, "denied": False, "attempts": 0, "counts": {}, "first": [],
                               "suspicious": False}



def test_imports_from_its_own_folder_are_not_attempts(audited, tmp_path):
    """Importing a module of the submission looks for its bytecode in a
    __pycache__ that does not exist: inside its own folder, not an attempt."""
    _, tree = audited
    folder = submission(tmp_path / "sub", {"solution.py": "import helper\nprint(helper.VALUE)\n",
                                           "helper.py": "VALUE = 42\n"})
    assert hills("eval", folder, "-H", "audited").code == 0
    audit = last_report("audited", tree)["audit"]
    assert audit["attempts"] == 0, audit


@pytest.mark.slow
@pytest.mark.parametrize("template", ["dataset", "circle-packing"])
def test_the_templates_honest_examples_try_nothing(tmp_path, template):
    from pathlib import Path

    created = hills("new", f"honest-{template}", "-t", template)
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    committed = hills("commit", f"honest-{template}", "-m", "first")
    assert committed.code == 0, committed.output
    example = next(path for path in (hill_dir / "examples").iterdir() if path.is_dir())
    if template == "circle-packing":  # its example is outputs only: a solution.py writes them instead
        circles = (example / "circles.json").read_text()
        example = submission(tmp_path / "sub", {"solution.py": f"open('circles.json', 'w').write({circles!r})\n"})
    result = hills("eval", example, "-H", f"honest-{template}")
    assert result.code == 0, result.output
    audit = last_report(f"honest-{template}", tree_of(hill_dir))["audit"]
    assert audit["runs"] >= 1 and audit["attempts"] == 0, audit


def test_a_child_without_the_pipe_never_writes_into_a_file_holding_its_number(audited, tmp_path):
    """subprocess closes inherited fds: a Python child of the submission
    finds the audit's variables but not its pipe, and its own file that got
    the same fd number is left alone."""
    _, tree = audited
    child = """\
import os
number = int(os.environ["HILLS_AUDIT_FD"].split(":")[0])
fd = -1
while fd < number:
    fd = os.open("mine-%d.txt" % fd, os.O_WRONLY | os.O_CREAT, 0o600)
try:
    open("/nonexistent-hills-path")
except OSError:
    pass
print(os.fstat(number).st_size)
"""
    solution = ("import subprocess, sys\n"
                "done = subprocess.run([sys.executable, 'child.py'], capture_output=True, text=True)\n"
                "print(done.stdout.strip() or done.stderr[-300:])\n")
    folder = submission(tmp_path / "sub", {"solution.py": solution, "child.py": child})
    assert hills("eval", folder, "-H", "audited").code == 0
    report = last_report("audited", tree)
    assert report["details"]["stdout"].strip() == "0", report["details"]


def test_a_sitecustomize_the_audit_shadows_still_runs(tmp_path):
    """The audit is the first sitecustomize on the path; one further down
    (a distribution's, a coverage tool's) runs after it, as without it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    audit, other = tmp_path / "audit", tmp_path / "other"
    audit.mkdir()
    other.mkdir()
    (audit / "sitecustomize.py").write_text((Path(sandbox.__file__).parent.parent / "audithook.py").read_text())
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.SHADOWED_RAN = True\n")
    done = subprocess.run([sys.executable, "-c", "import builtins; print(getattr(builtins, 'SHADOWED_RAN', False))"],
                          env=dict(os.environ, PYTHONPATH=f"{audit}{os.pathsep}{other}"), capture_output=True,
                          text=True)
    assert done.stdout.strip() == "True", done.stderr
