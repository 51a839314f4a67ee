"""Checks on the hill itself, run by `hills check` (plain asserts; tmp_path is the only fixture)."""

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

HILL = Path(__file__).resolve().parent.parent
EXAMPLE = HILL / "examples" / "nearest-centroid"
sys.path.insert(0, str(HILL))

from eval import eval as evaluate  # noqa: E402


def solve(tmp_path, solution_text, split="validation"):
    """The solution phase as `hills eval` runs it (without the confinement):
    run.py in a copy of the submission holding the split's inputs. Returns
    (exit code, stderr, folder)."""
    work = tmp_path / "submission"
    work.mkdir()
    if solution_text is not None:
        (work / "solution.py").write_text(solution_text)
    shutil.copytree(HILL / ("data/validation" if split == "validation" else "private/holdout"), work / "inputs")
    done = subprocess.run([sys.executable, str(HILL / "run.py"), "solution.py"], cwd=str(work),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr, work


def labels(split):
    with open(HILL / "private" / "labels" / f"{split}.csv", newline="") as handle:
        return {row["id"]: int(row["label"]) for row in csv.DictReader(handle)}


def test_the_splits_are_disjoint_and_whole():
    with open(HILL / "data" / "train.csv", newline="") as handle:
        train = list(csv.reader(handle))[1:]
    validation, holdout = labels("validation"), labels("holdout")
    assert (len(train), len(validation), len(holdout)) == (1078, 359, 360)
    assert not set(validation) & set(holdout)
    pixels = {int(value) for row in train for value in row[:-1]}
    assert pixels <= set(range(17)) and len(pixels) > 10, "block counts of inked pixels, 0 to 16"
    counts = [sum(row[-1] == str(digit) for row in train) for digit in range(10)]
    assert min(counts) > 80, f"every digit is drawn about as often: {counts}"


def test_the_example_scores_on_both_splits(tmp_path):
    code, stderr, work = solve(tmp_path, (EXAMPLE / "solution.py").read_text())
    assert code == 0, stderr
    result = evaluate(work)
    assert result["passed"] is True
    # Nearest centroid is far above chance (0.1) and leaves room: the images vary.
    assert 0.6 < result["metrics"][0]["value"] < 0.97
    assert set(result["instances"]) == {f"digit-{digit}" for digit in range(10)}
    # One item a row, 1 when predicted right: their mean is the accuracy.
    values = result["items"]["values"]
    assert result["items"]["aggregate"] == "mean" and set(values.values()) <= {0.0, 1.0}
    assert math.isclose(sum(values.values()) / len(values), result["metrics"][0]["value"])
    shutil.rmtree(tmp_path / "submission")
    code, stderr, work = solve(tmp_path, (EXAMPLE / "solution.py").read_text(), split="holdout")
    assert code == 0, stderr
    final = evaluate(work, final=True)
    assert final["passed"] is True and "instances" not in final
    assert final["config"] == [{"name": "mode", "value": "holdout", "primary": True}]


def test_the_true_labels_score_one(tmp_path):
    (tmp_path / "predictions.json").write_text(json.dumps(labels("validation")))
    assert evaluate(tmp_path)["metrics"][0]["value"] == 1.0


def test_bad_predictions_are_rejected_with_a_reason(tmp_path):
    truth = labels("validation")
    cases = [({}, "no prediction for row"), ({key: 10 for key in truth}, "an integer from 0 to 9, got 10"),
             ({key: True for key in truth}, "got True"), ([1, 2], "must map row ids to labels")]
    for predicted, reason in cases:
        (tmp_path / "predictions.json").write_text(json.dumps(predicted))
        result = evaluate(tmp_path)
        assert result["passed"] is False and reason in result["details"]["reason"], (predicted, result)
    (tmp_path / "predictions.json").unlink()
    assert "wrote no predictions.json" in evaluate(tmp_path)["details"]["reason"]


def test_a_solution_returning_too_few_labels_fails(tmp_path):
    code, stderr, _ = solve(tmp_path, "def predict(train_x, train_y, test_x):\n    return [0]\n")
    assert code == 1 and "error: predict() returned 1 labels for 359 test rows" in stderr


def test_a_submission_without_solution_py_is_told_so(tmp_path):
    code, stderr, _ = solve(tmp_path, None)
    assert code == 1 and "error: the submission has no solution.py" in stderr
