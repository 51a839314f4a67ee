"""Checks on the hill itself, run by `hills check` (plain asserts; tmp_path is the only fixture)."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

HILL = Path(__file__).resolve().parent.parent
EXAMPLE = HILL / "examples" / "first-fit-decreasing"

sys.path.insert(0, str(HILL))
import binpacking  # noqa: E402


def run_verifier(tmp_path, solution_text, split="validation"):
    """The two phases as `hills eval` runs them (without the confinement):
    run.py in a copy of the submission holding the split's instances in
    ./inputs, then verifier.sh in a folder holding only packings.json, with
    ./problem linked to the hill. Returns (exit code, result or None,
    stderr). A `solution_text` of None leaves solution.py out."""
    work = tmp_path / "submission"
    work.mkdir()
    if solution_text is not None:
        (work / "solution.py").write_text(solution_text)
    (work / "problem").symlink_to(HILL)
    shutil.copytree(HILL / ("data/validation" if split == "validation" else "private/holdout"), work / "inputs")
    result = tmp_path / "result.json"
    env = dict(os.environ, HILLS_RESULT=str(result), HILLS_SPLIT=split, HILLS_SCORING_PYTHON=sys.executable)
    solved = subprocess.run([sys.executable, "problem/run.py"], cwd=str(work), env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)
    if solved.returncode != 0:
        return solved.returncode, None, solved.stderr
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    shutil.copy(work / "packings.json", outputs / "packings.json")
    (outputs / "problem").symlink_to(HILL)
    done = subprocess.run(["bash", "problem/verifier.sh"], cwd=str(outputs), env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    value = json.loads(result.read_text()) if result.exists() else None
    return done.returncode, value, done.stderr


def first_fit_decreasing():
    spec = {}
    exec(compile((EXAMPLE / "solution.py").read_text(), "solution.py", "exec"), spec)
    return spec["pack"]


def test_example_scores_on_validation(tmp_path):
    code, result, stderr = run_verifier(tmp_path, (EXAMPLE / "solution.py").read_text())
    assert code == 0, stderr
    instances = binpacking.load_instances("validation")
    pack = first_fit_decreasing()
    expected = {name: len(pack(case["items"], case["capacity"])) for name, case in instances.items()}
    assert result["instances"] == expected
    assert math.isclose(result["score"], sum(expected.values()) / len(expected))
    # The per-instance bins average to the score: hills resamples them for its noise.
    assert result["items"] == {"metric": "bins", "aggregate": "mean", "values": expected}
    bounds = [binpacking.lower_bound(case) for case in instances.values()]
    assert result["excess_bins"] == sum(expected.values()) - sum(bounds)
    zones = result["report"]["zones"]
    assert result["report"]["segment_label"] == "instance" and len(zones) == len(instances)
    excess = [zone["excess"] for zone in zones]
    assert excess == sorted(excess, reverse=True), "zones must be worst first"


def test_holdout_uses_the_private_instances(tmp_path):
    held_out = binpacking.load_instances("holdout")
    assert held_out and not set(held_out) & set(binpacking.load_instances("validation"))
    code, result, stderr = run_verifier(tmp_path, (EXAMPLE / "solution.py").read_text(), split="holdout")
    assert code == 0, stderr
    pack = first_fit_decreasing()
    expected = [len(pack(case["items"], case["capacity"])) for case in held_out.values()]
    assert math.isclose(result["score"], sum(expected) / len(expected))
    assert "instances" not in result and "report" not in result
    assert math.isclose(sum(result["items"]["values"].values()) / len(expected), result["score"])


def test_a_dropped_item_fails_the_eval(tmp_path):
    solution = "def pack(items, capacity):\n    return [[i] for i in range(1, len(items))]\n"
    code, result, stderr = run_verifier(tmp_path, solution)
    assert code == 1 and result is None
    assert "not packed" in stderr


def test_an_overfull_bin_fails_the_eval(tmp_path):
    solution = "def pack(items, capacity):\n    return [list(range(len(items)))]\n"
    code, result, stderr = run_verifier(tmp_path, solution)
    assert code == 1 and result is None
    assert "over the capacity" in stderr


def test_a_submission_without_solution_py_is_told_so(tmp_path):
    code, result, stderr = run_verifier(tmp_path, None)
    assert code == 1 and result is None
    assert stderr.strip().splitlines()[-1] == ("error: the submission has no solution.py; it must hold one "
                                               "that defines pack(items, capacity)")


def test_a_result_left_by_the_solution_is_not_trusted(tmp_path):
    forged = "import os\nopen(os.environ['HILLS_RESULT'], 'w').write('{\"score\": 0}')\n"
    code, result, stderr = run_verifier(tmp_path, forged + (EXAMPLE / "solution.py").read_text())
    assert code == 0, stderr
    assert result["score"] > 0 and "report" in result


def test_lower_bound_and_checks():
    case = {"capacity": 10, "items": [6, 5, 4]}
    assert binpacking.lower_bound(case) == 2
    assert binpacking.check_packing(case, [[0, 2], [1]]) is None
    assert "packed twice" in binpacking.check_packing(case, [[0], [0], [1, 2]])
    assert "not an item index" in binpacking.check_packing(case, [[0, 3], [1, 2]])
    assert "empty" in binpacking.check_packing(case, [[0, 2], [1], []])
