"""The dataset template end to end: `hills new -t dataset` splits the
handwritten digits at creation, `hills commit` freezes the inputs as blobs
and the labels in private/, the nearest-centroid example scores its
accuracy on validation, `--final` scores the holdout split, and the
holdout budget of 3 looks per version is kept."""

import math

from conftest import new_and_commit, run_cli


def test_the_digits_hill_scores_validation_and_a_budgeted_holdout(project):
    hill_dir = new_and_commit("digits", "dataset")
    assert {"data/train.csv", "data/validation/inputs.csv"} <= set(
        line.split('"')[1] for line in (hill_dir / "blobs.lock").read_text().splitlines() if line.startswith("[files"))
    private_lock = (hill_dir / "private.lock").read_text()
    for rel in ("holdout/inputs.csv", "labels/validation.csv", "labels/holdout.csv"):
        assert rel in private_lock, rel
    example = hill_dir / "examples" / "nearest-centroid"
    scored = run_cli("eval", "-H", "digits", example)
    assert scored.code == 0, scored.output
    report = scored.report
    assert report["metrics"][0]["name"] == "accuracy" and report["metrics"][0]["direction"] == "max"
    assert 0.85 < report["metrics"][0]["value"] < 1.0
    assert math.isclose(sum(report["instances"].values()) / 10, report["metrics"][0]["value"], abs_tol=0.05)
    assert {"name": "mode", "value": "validation", "primary": True} in report["config"]
    for look in range(3):
        final = run_cli("eval", "-H", "digits", example, "--final")
        assert final.code == 0, final.output
        assert {"name": "mode", "value": "holdout", "primary": True} in final.report["config"]
        assert "instances" not in final.report
    spent = run_cli("eval", "-H", "digits", example, "--final")
    assert spent.code == 5
    assert "budget" in spent.err and spent.error_lines, spent.err


def test_a_submission_that_breaks_the_contract_is_buggy_with_the_reason(project, tmp_path):
    new_and_commit("digits", "dataset")
    submission = tmp_path / "too-few"
    submission.mkdir()
    (submission / "solution.py").write_text("def predict(train_x, train_y, test_x):\n    return [0]\n")
    result = run_cli("eval", "-H", "digits", submission)
    assert result.code == 1
    assert result.report["status"] == "buggy"
    assert "predict() returned 1 labels for 359 test rows" in result.report["reason"]
