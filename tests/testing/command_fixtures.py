"""Helpers for the command-shape tests: a hill whose verifier (`verify.py`,
started by `verifier.sh`) does what the submission's `case.txt` asks, so one
committed hill covers every way a verifier can answer."""

import json
import textwrap
from pathlib import Path

from testing.util import write_files
from testing.eval_fixtures import REPO_ROOT, hills, hills_home, submission

# The verifier. It runs with cwd = the submission snapshot, records what it
# saw (the seed, its environment, the layout) in files there, and writes the
# result that `case.txt` names. Default case `ok`: the number the solution
# prints is the score, with side metrics of every kind beside it.
VERIFY_PY = r'''
import json
import os
import subprocess
import sys
from pathlib import Path

env = os.environ
result = env["HILLS_RESULT"]
seed = int(env["HILLS_REPLICATE_SEED"])
case = Path("case.txt").read_text().strip() if Path("case.txt").exists() else "ok"
Path(f"seen-seed-{seed}.txt").write_text(str(seed))
probe = subprocess.run([env["HILLS_PYTHON"], "-c", "import sys; print(sys.prefix)"],
                       capture_output=True, text=True)
Path("env.json").write_text(json.dumps({
    "env": {k: v for k, v in env.items() if k.startswith(("HILLS_", "HILLCLIMB_"))},
    "cwd": os.getcwd(),
    "python_prefix": probe.stdout.strip(),
    "problem": os.path.realpath("problem"),
    "hill_manifest": os.path.isfile(os.path.join(env["HILLS_HILL"], "hill.yaml")),
    "data": Path("data/info.txt").read_text() if Path("data/info.txt").exists() else None,
    "leaked": sorted(k for k in env if k.startswith("SECRET_")),
}))
if case == "noresult":
    sys.exit(0)
if case == "exit3":
    print("the verifier gives up", file=sys.stderr)
    sys.exit(3)
if case == "plant":
    # Replicate 0 scores, then plants a result where replicate 1 will write
    # its own; replicate 1 writes nothing. Only a deleted path makes it buggy.
    if seed == 0:
        planted = result.replace("result-0", "result-1")
        if planted == result:
            sys.exit(9)  # the result paths are named differently now: this case needs updating
        Path(planted).write_text('{"score": 999}')
        Path(result).write_text('{"score": 1}')
    sys.exit(0)
RAW = {
    "nan": '{"score": NaN}', "inf": '{"score": Infinity}', "-inf": '{"score": -Infinity}',
    "bool": '{"score": true}', "string": '{"score": "12"}', "null-score": '{"score": null}',
    "missing": '{"points": 3}', "unparsable": '{"score": 1,', "empty": '', "blank": ' \n ',
    "huge-int": '{"score": 1' + '0' * 400 + '}', "huge-side": '{"score": 1, "big": 1' + '0' * 400 + '}',
    "instances-list": '{"score": 1, "instances": [1, 2]}',
    "instance-nan": '{"score": 1, "instances": {"a": NaN}}',
    "instance-string": '{"score": 1, "instances": {"a": "x"}}',
    "report-list": '{"score": 1, "report": [1]}',
    "bare": '  7.5\n', "bare-string": '"7.5"', "bare-nan": 'NaN', "list": '[1, 2]', "null": 'null',
}
if case in RAW:
    Path(result).write_text(RAW[case])
    sys.exit(0)
out = subprocess.run([env["HILLS_PYTHON"], env["HILLS_SOLUTION"]], capture_output=True, text=True)
if out.returncode != 0:
    print(out.stderr, file=sys.stderr)
    sys.exit(out.returncode)
value = float(out.stdout.strip().splitlines()[-1])
if case == "seed":
    # Scores 1, 3, 5, 2, 4 (+ the solution's number) for seeds 0..4.
    score = value + (seed * 7) % 5 + 1
    data = {"score": score, "runtime_s": seed * 0.5, "instances": {"a": float(seed), "b": 10.0 - seed},
            "report": {"version": 1, "segment_label": "case", "overall": {"score": score, "seed": seed},
                       "zones": [{"zone": "good", "score": 9.0 + seed}, {"zone": "bad", "score": 1.0 + seed},
                                 {"zone": "mid", "score": 5.0}]}}
else:
    data = {"score": value, "runtime_s": 0.25, "n_items": 3, "label": "fast", "flag": True,
            "worse": float("nan"), "huge": float("inf"), "nested": {"x": 1}}
Path(result).write_text(json.dumps(data))
'''

VERIFIER_SH = """#!/usr/bin/env bash
set -euo pipefail
exec "$HILLS_SCORING_PYTHON" problem/verify.py
"""

TRIVIAL_TESTS = "def test_the_hill_is_there():\n    assert True\n"

# Frozen unit tests: run the solution; its number must be positive. A
# solution printing `hang` hangs the suite.
UNIT_TEST = """\
import subprocess
import sys
from pathlib import Path

Path("unit-tests-ran.txt").write_text(__file__)
out = subprocess.run([sys.executable, sys.argv[1]], capture_output=True, text=True).stdout.strip()
if out == "hang":
    import time
    while True:
        time.sleep(1)
sys.exit(0 if float(out) > 0 else 1)
"""


def command_yaml(name, *, timeout=10, extra=""):
    return textwrap.dedent(f"""\
        spec: 1
        name: {name}
        version: 0.1.0
        description: a command hill made by the tests
        evaluator:
          shape: command
          entry: [bash, verifier.sh]
        timeout: {timeout}
        seeds: fixed  # the verifier scores by seed: 0..N-1
        metrics:
          - {{name: score, direction: max}}
        """) + textwrap.dedent(extra)


def make_command_hill(name, *, timeout=10, extra="", files=None, message="first"):
    """Create and commit a command-shape hill `name` in the cwd: verifier.sh
    and verify.py above, `data/info.txt`, an example, and `files` on top."""
    assert REPO_ROOT not in (Path.cwd().resolve(), *Path.cwd().resolve().parents), Path.cwd()
    created = hills("new", name)
    assert created.code == 0, created.output
    hill_dir = Path(created.out.strip())
    (hill_dir / "eval.py").unlink()
    for child in (hill_dir / "examples" / "basic").iterdir():
        child.unlink()
    content = {
        "hill.yaml": command_yaml(name, timeout=timeout, extra=extra),
        "README.md": f"# {name}\n\nPrint the number the verifier asks for.\n",
        "verifier.sh": VERIFIER_SH,
        "verify.py": VERIFY_PY,
        "data/info.txt": "the hill's data\n",
        "examples/basic/solution.py": "print(42)\n",
        "tests/test_eval.py": TRIVIAL_TESTS,
        **(files or {}),
    }
    write_files(hill_dir, content)
    committed = hills("commit", name, "-m", message)
    assert committed.code == 0, committed.output
    return hill_dir


def candidate(root: str | Path, *, case: str | None = None, solution: str = "print(42)\n",
              files: dict[str, str] | None = None) -> Path:
    """A submission folder: solution.py, `case.txt` when given, more files."""
    cased = {} if case is None else {"case.txt": case + "\n"}
    return submission(root, {"solution.py": solution, **cased, **(files or {})})


def run_dir(hill_name, report):
    return hills_home() / "runs" / hill_name / report["run_id"]


def seen_env(hill_name, report, replicate=""):
    """What the verifier recorded about its environment in that run."""
    return json.loads((run_dir(hill_name, report) / f"submission{replicate}" / "env.json").read_text())
