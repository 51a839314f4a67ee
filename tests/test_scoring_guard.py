"""The scoring phase never executes the submission (docs/confinement.md,
"The scoring phase runs no submitted code"): a naive one-phase evaluator
that starts the climber's run.py itself, however it starts it, gets a
buggy eval naming the file and how, never the score run.py forged. Each
attack has its control: the same hill with the guard switched off
(phases.SCORING_GUARD, a switch only these tests use) gets 1.0."""

import json
import textwrap

import pytest

from testing.eval_fixtures import hills, submission
from hills.freeze import commit
from hills.run import phases
from hills.disk.hill import Hill

ANSWER = "the-labels-are-7-7-7\n"

# A naive evaluator: it runs the submission's run.py itself (STARTS is how),
# then scores the answer.txt run.py left, against the private labels.
NAIVE = '''
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def eval(submission, *, final=False):
    submission = Path(submission)
    os.chdir(submission)
    try:
        STARTS
    except Exception as exc:  # a naive evaluator swallows what went wrong
        print("ignored:", exc, file=sys.stderr)
    labels = (HERE / "private" / "labels.json").read_text()
    got = (submission / "answer.txt").read_text() if (submission / "answer.txt").is_file() else ""
    return {"passed": True, "metrics": [{"name": "accuracy", "value": 1.0 if got == labels else 0.0,
                                         "direction": "max"}], "config": []}
'''

# The climber's run.py: copy the private labels where the scorer reads them.
THIEF = '''
import glob, shutil
for path in glob.glob("../hill/private/labels.json") + glob.glob("../../hill/private/labels.json"):
    shutil.copy(path, "answer.txt")
'''

STARTS = {
    "subprocess of sys.executable": 'subprocess.run([sys.executable, "run.py"], check=True)',
    "os.system of sys.executable": 'os.system(f"{sys.executable} run.py")',
    "runpy": '__import__("runpy").run_path("run.py")',
    "exec of its text": 'exec(open("run.py").read())',
    "import": 'sys.path.insert(0, str(submission)); __import__("run")',
    "a shell": 'subprocess.run("cd . && " + sys.executable + " run.py", shell=True)',
}


def naive_hill(name, starts, gate=False):
    """A hill with the naive evaluator, committed past the gate (as a hill
    committed before the gate held it, or with the gate switched off)."""
    source = textwrap.dedent(NAIVE).replace("STARTS", starts)
    created = hills("new", name, "-t", "circle-packing")
    assert created.code == 0, created.output
    from pathlib import Path

    hill_dir = Path(created.out.strip())
    (hill_dir / "eval.py").write_text(source)
    from testing.eval_fixtures import TRIVIAL_TEST, hill_yaml

    (hill_dir / "hill.yaml").write_text(hill_yaml(name, timeout=20))
    (hill_dir / "tests" / "test_eval.py").write_text(TRIVIAL_TEST)
    (hill_dir / "private").mkdir(exist_ok=True)
    (hill_dir / "private" / "labels.json").write_text(ANSWER)
    commit.commit(Hill(str(hill_dir)), "first", gate=gate)
    return hill_dir


def eval_report(*args):
    result = hills("eval", *map(str, args))
    return result, (json.loads(result.out) if result.out.strip() else None)


@pytest.mark.parametrize("how", sorted(STARTS))
def test_the_scoring_phase_cannot_run_the_climbers_run_py(tmp_path, monkeypatch, how):
    name = "naive-" + "".join(c for c in how if c.isalnum())[:20].lower()
    naive_hill(name, STARTS[how])
    sub = submission(tmp_path / "sub", {"run.py": THIEF})
    monkeypatch.setattr(phases, "SCORING_GUARD", False)
    result, report = eval_report(sub, "-H", name)
    # The control: without the guard the attack wins an official 1.0.
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 1.0, report
    monkeypatch.setattr(phases, "SCORING_GUARD", True)
    result, report = eval_report(sub, "-H", name)
    assert report is not None, result.output
    assert report["status"] == "buggy", report
    assert "the scoring phase tried to run the submission's file 'run.py'" in report["reason"], report["reason"]
    assert "submitted code runs only confined" in report["reason"]
    assert not report.get("metrics") or report["metrics"][0]["value"] != 1.0


def test_python3_on_the_evaluators_path_is_the_confined_interpreter(tmp_path):
    """`os.system("python3 run.py")` is no attack: python3 first on an
    evaluator's PATH is the confined interpreter, which the guard lets
    start (it judges its own arguments), and run.py reads nothing."""
    naive_hill("on-path", 'os.system("python3 run.py")')
    sub = submission(tmp_path / "sub", {"run.py": THIEF + "open('ran.txt', 'w').write('1')\n"})
    result, report = eval_report(sub, "-H", "on-path")
    assert result.code == 0, result.output
    assert report["status"] == "passing" and report["metrics"][0]["value"] == 0.0
    assert report["isolation"]["submitted_code"].startswith("confined"), report["isolation"]


def test_the_confined_start_of_the_sdk_is_let_through(tmp_path):
    """hills.sdk.run_submission is where the guard sends submitted code: the
    same run.py started through it runs (and, confined or not, is recorded
    as started by hills)."""
    hill_dir = naive_hill("through-sdk", 'from hills import sdk; sdk.run_submission([sys.executable, "run.py"])')
    sub = submission(tmp_path / "sub", {"run.py": "open('answer.txt', 'w').write('x')\n"})
    result, report = eval_report(sub, "-H", "through-sdk")
    assert result.code == 0, result.output
    assert report["status"] == "passing"
    assert hill_dir.is_dir()


def test_an_evaluator_reading_the_submissions_files_is_not_stopped(tmp_path):
    """Reading a file, or handing it to a program as data, is not running it."""
    naive_hill("reads", 'subprocess.run(["cat", "run.py"], check=True, stdout=subprocess.DEVNULL); '
                        'compile("x = 1", "<string>", "exec")')
    sub = submission(tmp_path / "sub", {"run.py": THIEF})
    result, report = eval_report(sub, "-H", "reads")
    assert result.code == 0, result.output
    assert report["status"] == "passing" and report["metrics"][0]["value"] == 0.0


# -- the pure parts ------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["python3", "-u", "-X", "dev", "run.py", "data.csv"], ["python3", "run.py"]),
    (["env", "A=1", "timeout", "-k", "5", "10", "nice", "-n", "3", "python", "run.py"], ["python", "run.py"]),
    (["uv", "run", "python", "run.py"], ["python", "run.py"]),
    (["python3", "problem/score.py", "run.py"], ["python3", "problem/score.py"]),
    (["bash", "-o", "pipefail", "run.sh"], ["bash", "run.sh"]),
    (["node", "-r", "./hook.js", "main.js"], ["node", "./hook.js", "main.js"]),
    (["cat", "run.py"], ["cat"]),
    (["python3", "-m", "pkg.main"], ["python3", "\1pkg/main.py", "\1pkg/main/__main__.py", "\1pkg/main/__init__.py"]),
])
def test_the_operands_that_run_as_code(argv, expected):
    from hills import scoringhook

    assert [what for what, _how in scoringhook.code_of(argv)] == expected


def test_a_shell_text_is_read_command_by_command():
    from hills import scoringhook

    commands = list(scoringhook.shell_commands("cd sub && A=1 python3 run.py > out.txt; cat x | sh < go.sh"))
    assert commands == [(["cd", "sub"], []), (["python3", "run.py"], []), (["cat", "x"], []), (["sh"], ["go.sh"])]


# -- command verifiers ---------------------------------------------------------------

VERIFIER = """\
#!/usr/bin/env bash
set -euo pipefail
{run} || true
score=0
if [ -f answer.txt ] && [ "$(cat answer.txt)" = "$(cat problem/private/labels.json)" ]; then score=1; fi
echo "{{\\"score\\": $score}}" > "$HILLS_RESULT"
"""

SHELL_THIEF = "cp problem/private/labels.json answer.txt 2>/dev/null || cp ../hill/private/labels.json answer.txt\n"


def verifier_hill(name, run, gate=False):
    created = hills("new", name, "-t", "circle-packing")
    assert created.code == 0, created.output
    from pathlib import Path

    from testing.eval_fixtures import TRIVIAL_TEST

    hill_dir = Path(created.out.strip())
    (hill_dir / "eval.py").unlink()
    (hill_dir / "verifier.sh").write_text(VERIFIER.format(run=run))
    (hill_dir / "tests" / "test_eval.py").write_text(TRIVIAL_TEST.replace("import eval", "import os"))
    (hill_dir / "private").mkdir()
    (hill_dir / "private" / "labels.json").write_text(ANSWER)
    (hill_dir / "hill.yaml").write_text(textwrap.dedent(f"""\
        spec: 1
        name: {name}
        version: 0.1.0
        evaluator:
          shape: command
          entry: [bash, verifier.sh]
        metrics: [{{name: score, direction: max}}]
        timeout: 30
        """))
    if gate:
        return hill_dir, hills("commit", name, "-m", "first")
    commit.commit(Hill(str(hill_dir)), "first", gate=False)
    return hill_dir, None


@pytest.mark.parametrize("run, script", [("bash run.sh", SHELL_THIEF), ("sh ./run.sh", SHELL_THIEF),
                                         ('"$HILLS_SCORING_PYTHON" run.py', THIEF),
                                         ("\"$HILLCLIMB_PYTHON\" -c 'import run'", THIEF)])
def test_a_verifier_cannot_run_the_climbers_script_in_the_scoring_phase(tmp_path, monkeypatch, run, script):
    name = "v-" + "".join(c for c in run if c.isalnum())[:16].lower()
    verifier_hill(name, run)
    sub = submission(tmp_path / "sub", {"run.sh" if run.endswith(".sh") else "run.py": script})
    monkeypatch.setattr(phases, "SCORING_GUARD", False)
    result, report = eval_report(sub, "-H", name)
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 1, report  # the control: the script stole the labels
    monkeypatch.setattr(phases, "SCORING_GUARD", True)
    result, report = eval_report(sub, "-H", name)
    assert report["status"] == "buggy", report
    assert "the scoring phase tried to run the submission's file 'run." in report["reason"], report["reason"]


def test_the_gate_fails_a_verifier_that_runs_a_script_of_the_example_directly(tmp_path):
    """`./run.sh` is a start no guard sees (the verifier's own bash execs
    it): the leak probe's payload, put into run.sh, reads private/ from it,
    and the hill is not committed."""
    from testing.eval_fixtures import hills_home  # noqa: F401

    hill_dir, committed = verifier_hill("direct", "chmod +x run.sh && ./run.sh", gate=True)
    assert committed.code == 1, committed.output
    assert "failed check 'leak probe': submitted code read private/labels.json" in committed.err, committed.err
    assert "started by the verifier itself" in committed.err


def test_the_gate_fails_the_naive_evaluator_whose_example_has_no_run_py(project):
    """The attack as it was found: the example holds no run.py (the
    probe once put its payload in solution.py alone, so nothing ran and
    the hill was committed). Now the probe writes a run.py too, the guard
    stops the evaluator running it, and the commit fails saying so."""
    source = textwrap.dedent(NAIVE).replace("STARTS", STARTS["subprocess of sys.executable"])
    created = hills("new", "gated", "-t", "circle-packing")
    assert created.code == 0, created.output
    from pathlib import Path

    from testing.eval_fixtures import TRIVIAL_TEST, hill_yaml

    hill_dir = Path(created.out.strip())
    assert not (hill_dir / "examples" / "grid" / "run.py").exists()
    (hill_dir / "eval.py").write_text(source)
    (hill_dir / "hill.yaml").write_text(hill_yaml("gated", timeout=20))
    (hill_dir / "tests" / "test_eval.py").write_text(TRIVIAL_TEST)
    (hill_dir / "private").mkdir(exist_ok=True)
    (hill_dir / "private" / "labels.json").write_text(ANSWER)
    committed = hills("commit", "gated", "-m", "first")
    assert committed.code == 1, committed.output
    assert committed.error_lines[0].startswith("error: hill 'gated' failed check 'leak probe': the evaluator ran the "
                                               "example's code itself: the scoring phase tried to run the "
                                               "submission's file 'run.py'"), committed.error_lines


@pytest.mark.slow
def test_the_guard_holds_served_warm_and_from_a_standby(tmp_path, warm):  # noqa: F811 (warm: a fixture)
    """The same attack through the real executable, served by a warm
    server: the first call cold-starts the server, the next ones are served
    (the last by the standby its spare made); every one is buggy."""
    from testing.eval_fixtures import real
    from testing.warm_fixtures import served, wait_for_server

    naive_hill("warm-naive", STARTS["subprocess of sys.executable"])
    sub = submission(tmp_path / "sub", {"run.py": THIEF})
    reports = []
    for call in range(3):
        done = real("hills", "eval", sub, "-H", "warm-naive")
        reports.append(json.loads(done.out))
        if call == 0:
            wait_for_server(warm)
        else:
            import time

            time.sleep(0.5)  # the spare makes its standby between calls, as an agent reading a report lets it
    assert served(warm) >= 2, "the later calls were not served warm"
    for report in reports:
        assert report["status"] == "buggy", report
        assert "the scoring phase tried to run the submission's file 'run.py'" in report["reason"]


# The climber shapes its submission to slip past the guard: run.py as a
# folder (python runs its __main__.py), carriage returns (text mode reads
# fewer bytes than the file holds) behind thousands of other files.
EVASIONS = {
    "run.py is a folder": ("subprocess of sys.executable", {"run.py/__main__.py": THIEF}),
    "carriage returns and padding": ("exec of its text", {"run.py": THIEF.replace("\n", "\r\n"),
                                                          **{f"pad/{i}.txt": "x" * (i % 50) for i in range(3000)}}),
}


@pytest.mark.parametrize("evasion", sorted(EVASIONS))
def test_a_submission_shaped_to_slip_past_the_guard_is_stopped(tmp_path, monkeypatch, evasion):
    how, files = EVASIONS[evasion]
    name = "evade-" + "".join(c for c in evasion if c.isalnum())[:14].lower()
    naive_hill(name, STARTS[how])
    sub = tmp_path / "sub"
    for rel, text in files.items():
        (sub / rel).parent.mkdir(parents=True, exist_ok=True)
        (sub / rel).write_bytes(text.encode())
    monkeypatch.setattr(phases, "SCORING_GUARD", False)
    result, report = eval_report(sub, "-H", name)
    assert report["metrics"][0]["value"] == 1.0, report  # the control
    monkeypatch.setattr(phases, "SCORING_GUARD", True)
    result, report = eval_report(sub, "-H", name)
    assert report["status"] == "buggy", report
    assert "the scoring phase tried to run the submission's file 'run.py'" in report["reason"], report["reason"]
