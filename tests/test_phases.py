"""The two phases and the confined interpreter (docs/confinement.md): the
submitted code runs only in the solution phase, confined; the scoring phase
gets the declared outputs alone; `$HILLS_PYTHON` and `python3` on a
verifier's PATH confine whatever they are given, `$HILLS_SCORING_PYTHON` is
trusted. Each attack runs with `sandbox: none` as the control where the
boundary is the sandbox's."""

import json
import textwrap
from pathlib import Path

import pytest

from testing.util import needs_bwrap
from testing.eval_fixtures import TRIVIAL_TEST, hills, make_hill, submission
from hills.base import state

SECRET = "the-answer-is-42\n"

# The scorer: 1.0 when the output holds the private answer, else 0.0; and
# whether the snapshot of the submission was in its sight.
SCORER = '''
import json
import os
from pathlib import Path

def eval(submission, *, final=False):
    submission = Path(submission)
    answer = (Path(__file__).parent / "private" / "answer.txt").read_text()
    out = submission / "out.txt"
    got = out.read_text() if out.is_file() else ""
    snapshot = submission.parent / "submission"
    return {"passed": True, "metrics": [{"name": "score", "value": 1.0 if answer in got else 0.0,
                                         "direction": "max"}],
            "config": [], "details": {"seen": sorted(p.name for p in submission.iterdir()),
                                      "snapshot_seen": snapshot.is_dir() and bool(os.listdir(snapshot)),
                                      "inputs": got.split("|")[-1] if "|" in got else None}}
'''

# Submitted code that tries every way it knows to the answer key.
THIEF = '''
import glob
import os
found = ""
for path in ["../hill/private/answer.txt", "problem/private/answer.txt", "PRIVATE_ABS"]:
    try:
        found += open(path).read()
    except OSError:
        pass
inputs = sorted(os.listdir("inputs")) if os.path.isdir("inputs") else []
open("out.txt", "w").write(found + "|" + ",".join(inputs))
'''


def two_phase(name, *, sandbox="auto", solution="", extra_files=None):
    solution = solution or """\
        solution:
          run: ["{python}", solution.py]
          outputs: [out.txt]
        """
    hill_dir = make_hill(name, SCORER, timeout=30, private={"answer.txt": SECRET, "holdout/h1.txt": "h"},
                         extra=solution + f"sandbox: {sandbox}\n")
    return hill_dir


def thief(root, hill_dir):
    return submission(root, {"solution.py": THIEF.replace("PRIVATE_ABS", str(hill_dir / "private" / "answer.txt"))})


def eval_report(*args):
    result = hills("eval", *map(str, args))
    return result, (json.loads(result.out) if result.out.strip() else None)


@needs_bwrap
def test_submitted_code_in_the_solution_phase_cannot_reach_private(tmp_path):
    hill_dir = two_phase("phases")
    result, report = eval_report(thief(tmp_path / "sub", hill_dir), "-H", "phases")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 0.0
    assert report["solution_phase"]["runs"] == 1
    # The scorer got the outputs alone, not the snapshot holding solution.py.
    assert report["details"]["seen"] == ["out.txt"]
    assert report["details"]["snapshot_seen"] is False


def test_without_the_sandbox_the_same_thief_wins(tmp_path):
    """The control: the boundary above is the sandbox's."""
    hill_dir = two_phase("open", sandbox="none")
    result, report = eval_report(thief(tmp_path / "sub", hill_dir), "-H", "open")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 1.0
    assert report["details"]["snapshot_seen"] is True


def test_an_output_that_is_a_link_is_refused(tmp_path):
    """A link is never followed into the outputs: one to private/ is removed
    as the solution ends (it leads outside what submitted code may read),
    and one inside the snapshot, which could be turned to lead anywhere, is
    refused."""
    hill_dir = two_phase("links")
    target = hill_dir / "private" / "answer.txt"
    sub = submission(tmp_path / "sub", {"solution.py": f"import os\nos.symlink({str(target)!r}, 'out.txt')\n"})
    result, report = eval_report(sub, "-H", "links")
    assert result.code == 1, result.output
    assert report["status"] == "buggy"
    assert report["reason"] == "the solution phase wrote no 'out.txt' (hill.yaml solution.outputs)"
    sub = submission(tmp_path / "sub2", {"solution.py": "import os\nopen('real.txt', 'w').write('x')\n"
                                                        "os.symlink('real.txt', 'out.txt')\n"})
    result, report = eval_report(sub, "-H", "links")
    assert result.code == 1, result.output
    assert report["reason"] == "the output 'out.txt' is a symbolic link; outputs must be files or folders"


def test_a_missing_output_or_a_failing_solution_is_buggy(tmp_path):
    two_phase("fails")
    result, report = eval_report(submission(tmp_path / "a", {"solution.py": "pass\n"}), "-H", "fails")
    assert result.code == 1 and report["status"] == "buggy"
    assert report["reason"] == "the solution phase wrote no 'out.txt' (hill.yaml solution.outputs)"
    result, report = eval_report(submission(tmp_path / "b", {"solution.py": "raise SystemExit('no luck')\n"}),
                                 "-H", "fails")
    assert result.code == 1 and report["status"] == "buggy"
    assert report["reason"].startswith("the solution phase failed (exit code 1): no luck; see solution-stderr.log")


def test_when_the_when_file_is_absent_the_outputs_are_the_submission_s_own(tmp_path):
    two_phase("maybe", solution="""\
        solution:
          run: ["{python}", solution.py]
          when: solution.py
          outputs: [out.txt]
        """)
    result, report = eval_report(submission(tmp_path / "a", {"out.txt": SECRET}), "-H", "maybe")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 1.0 and report["solution_phase"]["runs"] == 0
    result, report = eval_report(submission(tmp_path / "b", {"notes.md": "x"}), "-H", "maybe")
    assert result.code == 1
    assert report["reason"] == "the submission holds neither 'solution.py' nor 'out.txt' (hill.yaml solution.outputs)"


@needs_bwrap
def test_the_holdout_inputs_reach_the_solution_only_on_final_and_only_as_copies(tmp_path):
    hill_dir = two_phase("inputs", solution="""\
        solution:
          run: ["{python}", solution.py]
          inputs:
            validation: tests
            holdout: private/holdout
          outputs: [out.txt]
        """)
    sub = thief(tmp_path / "sub", hill_dir)
    result, report = eval_report(sub, "-H", "inputs")
    assert result.code == 0, result.output
    assert "test_eval.py" in report["details"]["inputs"].split(",")
    result, report = eval_report(sub, "-H", "inputs", "--final")
    assert result.code == 0, result.output
    assert report["details"]["inputs"] == "h1.txt"
    assert report["metrics"][0]["value"] == 0.0  # the rest of private/ stays out of reach
    (sub / "inputs").mkdir()
    result, report = eval_report(sub, "-H", "inputs")
    assert result.code == 1, result.output
    assert report["status"] == "refused"
    assert "error: the submission holds 'inputs', a name reserved for the split's inputs in this hill" in result.err
    assert "hint: rename it: hills copies the split's inputs there before the solution phase" in result.err


def test_an_inputs_folder_the_hill_lacks_is_the_hill_s_fault(tmp_path):
    two_phase("noinputs", solution="""\
        solution:
          run: ["{python}", solution.py]
          inputs: {validation: data/nothere}
          outputs: [out.txt]
        """)
    result, report = eval_report(submission(tmp_path / "a", {"solution.py": "pass\n"}), "-H", "noinputs")
    assert result.code == 5, result.output
    assert report["status"] == "refused"
    assert "error: hill.yaml solution.inputs.validation names 'data/nothere', which is not a folder of the hill" \
        in result.err


def test_bad_solution_keys_are_named(tmp_path):
    created = hills("new", "badkeys", "-t", "circle-packing")
    hill_dir = Path(created.out.strip())
    text = (hill_dir / "hill.yaml").read_text()
    for bad, message in (
            ('solution:\n  run: ["{python}", solution.py]\n',
             "missing key 'solution.outputs': expected the files the scorer reads, such as [circles.json]"),
            ('solution:\n  run: []\n  outputs: [a]\n',
             "key 'solution.run': expected a command as a list of strings, got list"),
            ('solution:\n  run: [x]\n  outputs: [../a]\n',
             "key 'solution.outputs': expected a non-empty list of paths or glob patterns inside the submission"),
            ('solution:\n  run: [x]\n  outputs: [a]\n  inputs: {test: data}\n',
             "unknown key 'solution.inputs.test'")):
        start = text.index("solution:")
        end = text.index("evaluator:")
        (hill_dir / "hill.yaml").write_text(text[:start] + bad + "\n" + text[end:])
        result = hills("check", "badkeys")
        assert result.code == 1, result.output
        assert message in result.output, result.output


# -- the confined interpreter of command verifiers ---------------------------

VERIFIER = """\
#!/usr/bin/env bash
set -euo pipefail
{run} > out.txt 2>&1 || true
exec "$HILLS_SCORING_PYTHON" problem/score.py
"""

SCORE_PY = """\
import json, os
answer = open(os.path.join(os.environ["HILLS_HILL"], "private", "answer.txt")).read()
got = open("out.txt").read()
json.dump({"score": 1.0 if answer in got else 0.0}, open(os.environ["HILLS_RESULT"], "w"))
"""

READER = "import sys\nfor p in sys.argv[1:] or ['problem/private/answer.txt']:\n" \
         "    try: print(open(p).read())\n    except OSError as e: print('no', e)\n"


def command_hill(name, run, *, sandbox="auto"):
    created = hills("new", name, "-t", "circle-packing")
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    (hill_dir / "eval.py").unlink()
    (hill_dir / "verifier.sh").write_text(VERIFIER.format(run=run))
    (hill_dir / "score.py").write_text(SCORE_PY)
    (hill_dir / "tests" / "test_eval.py").write_text(TRIVIAL_TEST.replace("import eval", "import os"))
    (hill_dir / "private").mkdir()
    (hill_dir / "private" / "answer.txt").write_text(SECRET)
    (hill_dir / "hill.yaml").write_text(textwrap.dedent(f"""\
        spec: 1
        name: {name}
        version: 0.1.0
        evaluator:
          shape: command
          entry: [bash, verifier.sh]
        metrics: [{{name: score, direction: max}}]
        timeout: 30
        sandbox: {sandbox}
        """))
    committed = hills("commit", name, "-m", "first")
    assert committed.code == 0, committed.output
    return hill_dir


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("run", ['"$HILLS_PYTHON" solution.py', "python3 solution.py", "python solution.py",
                                 '"$HILLS_PYTHON" -c "$(cat solution.py)"', '"$HILLCLIMB_PYTHON" solution.py',
                                 '"$HILLS_PYTHON" -m hills.sdk python3 solution.py'])
def test_the_confined_interpreter_confines_whatever_it_is_given(tmp_path, run):
    command_hill("cmd", run)
    result, report = eval_report(submission(tmp_path / "sub", {"solution.py": READER}), "-H", "cmd")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 0.0, (tmp_path, run)


@pytest.mark.slow
def test_with_the_sandbox_off_the_relative_solution_reads_the_key(tmp_path):
    """The control for the test above."""
    command_hill("opencmd", '"$HILLS_PYTHON" solution.py', sandbox="none")
    result, report = eval_report(submission(tmp_path / "sub", {"solution.py": READER}), "-H", "opencmd")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 1.0


@pytest.mark.slow
@needs_bwrap
def test_hillclimb_python_trusts_a_script_of_the_hill_only(tmp_path):
    hill_dir = command_hill("hc", '"$HILLCLIMB_PYTHON" problem/reader.py')
    (hill_dir / "reader.py").write_text(READER)
    assert hills("commit", "hc", "-m", "reader").code == 0
    result, report = eval_report(submission(tmp_path / "sub", {"solution.py": "pass\n"}), "-H", "hc")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 1.0  # the hill's own script read private/
    # A submission's file linked into place does not become the hill's.
    sub = submission(tmp_path / "sub2", {"solution.py": READER})
    result, report = eval_report(sub, "-H", "hc")
    assert report["metrics"][0]["value"] == 1.0


@pytest.mark.slow
@needs_bwrap
def test_a_submission_s_own_hills_package_cannot_stand_in_for_the_sdk(tmp_path, monkeypatch):
    """The confined interpreter runs the sdk as a file: a hills/sdk.py in the
    submission, the folder the verifier runs in, is never imported."""
    command_hill("shadow", '"$HILLS_PYTHON" solution.py')
    planted = READER.replace("sys.argv[1:] or ['problem/private/answer.txt']", "['problem/private/answer.txt']")
    sub = submission(tmp_path / "sub", {"solution.py": "print('confined')\n", "hills/__init__.py": "",
                                        "hills/sdk.py": planted})
    result, report = eval_report(sub, "-H", "shadow")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 0.0
    # Started as a module from that folder by the trusted interpreter, the
    # planted sdk is stopped by the scoring phase's guard...
    command_hill("shadowed", '"$HILLS_SCORING_PYTHON" -m hills.sdk python3 solution.py')
    result, report = eval_report(sub, "-H", "shadowed")
    assert result.code == 1 and report["status"] == "buggy", result.output
    assert "the submission's file 'hills/__init__.py' imported as module 'hills'" in report["reason"]
    # ...and the control: without the guard it runs unconfined.
    from hills.run import phases

    monkeypatch.setattr(phases, "SCORING_GUARD", False)
    result, report = eval_report(sub, "-H", "shadowed")
    assert result.code == 0, result.output
    assert report["metrics"][0]["value"] == 1.0


def test_the_confined_python_outside_an_eval_says_so(tmp_path):
    from hills.run import env

    wrapper = tmp_path / "python"
    wrapper.write_text(env.PYTHON_WRAPPER)
    wrapper.chmod(0o755)
    import subprocess

    done = subprocess.run([str(wrapper), "-c", "pass"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 127
    assert "the confined python runs only inside a hills eval (HILLS_REAL_PYTHON is not set)" in done.stderr


# Submitted code that reads its knob the documented way, and the hill's
# params where the solution phase puts them.
KNOB_SOLUTION = '''
import json
import os
from hills import spaces

knobs = spaces.params()
params = json.loads(os.environ["HILLS_PARAMS"])
open("out.txt", "w").write(json.dumps({"knobs": knobs, "params": params}))
'''


def test_knobs_reach_the_solution_phase_beside_the_hill_s_params(tmp_path):
    # spaces.params() reads HILLS_KNOBS, which every phase gets; the
    # solution phase's HILLS_PARAMS holds the hill's params (none here).
    two_phase("knobbed")
    sub = submission(tmp_path / "sub", {"solution.py": KNOB_SOLUTION, "params.json": json.dumps(
        {"rows": {"type": "int", "low": 1, "high": 9, "default": 2}})})
    for args, rows in (((), 2), (("-k", "rows=7"), 7)):
        result, report = eval_report(sub, "-H", "knobbed", *args)
        assert result.code == 0, result.output
        assert report["trial"] == {"rows": rows}
        out = Path(state.runs_dir("knobbed")) / report["run_id"] / "outputs" / "out.txt"
        assert json.loads(out.read_text()) == {"knobs": {"rows": rows}, "params": {}}
