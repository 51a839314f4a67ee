"""Checks on the hill itself, run by `hills check` (plain asserts; tmp_path is the only fixture)."""

import json
import math
from pathlib import Path

from eval import eval as evaluate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "grid"


def example_circles():
    return json.loads((EXAMPLE / "circles.json").read_text())


def write_circles(folder, circles):
    (folder / "circles.json").write_text(json.dumps(circles))
    return folder


def test_example_passes_with_expected_sum():
    result = evaluate(EXAMPLE)
    assert result["passed"], result["details"]
    metric = result["metrics"][0]
    assert metric["name"] == "sum_radii" and metric["direction"] == "max"
    assert abs(metric["value"] - (2.5 + (math.sqrt(2) - 1) * 0.1)) < 1e-9
    assert len(result["instances"]) == 26
    assert {entry["name"]: entry["value"] for entry in result["config"]} == {
        "n": 26, "mode": "validation", "tolerance": 1e-9}
    assert evaluate(EXAMPLE, final=True)["config"][1]["value"] == "holdout"


def test_object_form_is_accepted(tmp_path):
    write_circles(tmp_path, {"circles": example_circles()})
    assert evaluate(tmp_path)["passed"]


def test_overlap_is_rejected(tmp_path):
    circles = example_circles()
    circles[25][2] = 0.05  # the gap circle now overlaps its four neighbours
    result = evaluate(write_circles(tmp_path, circles))
    assert not result["passed"]
    assert result["metrics"][0]["value"] == 0.0
    assert result["details"]["reason"].startswith("circles 0 and 25 overlap by ")
    assert "instances" not in result


def test_circle_outside_the_square_is_rejected(tmp_path):
    circles = example_circles()
    circles[4][0] = 0.95  # [0.95, 0.1, 0.1] crosses the right edge by 0.05
    result = evaluate(write_circles(tmp_path, circles))
    assert not result["passed"]
    assert result["details"]["reason"] == "circle 4 crosses the right edge of the square by 0.05 (tolerance 1e-09)"


def test_wrong_count_is_rejected(tmp_path):
    result = evaluate(write_circles(tmp_path, example_circles()[:25]))
    assert not result["passed"]
    assert result["details"]["reason"] == "expected 26 circles, got 25"


def test_non_finite_and_non_numbers_are_rejected(tmp_path):
    text = (EXAMPLE / "circles.json").read_text().replace("[0.1, 0.1, 0.1]", "[NaN, 0.1, 0.1]", 1)
    (tmp_path / "circles.json").write_text(text)
    result = evaluate(tmp_path)
    assert not result["passed"]
    assert result["details"]["reason"] == "circle 0: x must be finite, got nan"
    circles = example_circles()
    circles[3][2] = True
    result = evaluate(write_circles(tmp_path, circles))
    assert result["details"]["reason"] == "circle 3: r must be a number, got true"


def test_solution_py_runs_in_the_solution_phase():
    """hill.yaml runs solution.py, when there is one, before eval() sees
    the circles.json it wrote."""
    text = (Path(__file__).resolve().parent.parent / "hill.yaml").read_text()
    assert 'run: ["{python}", solution.py]' in text and "when: solution.py" in text
    assert "outputs: [circles.json]" in text


def test_missing_circles_json_gives_a_reason(tmp_path):
    result = evaluate(tmp_path)
    assert not result["passed"]
    assert result["details"]["reason"] == "the submission holds neither circles.json nor solution.py"
