"""Checks on the hill itself, run by `hills check` (plain asserts; tmp_path is the only fixture).

Keep one test per rule your evaluator enforces: a check that never fails
proves nothing about the hill.
"""

from pathlib import Path

from eval import eval as evaluate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "basic"


def test_example_passes():
    result = evaluate(EXAMPLE)
    assert result["passed"], result["details"]
    assert result["metrics"] == [{"name": "value", "value": 42.0, "direction": "max"}]


def test_not_a_number_is_rejected_with_a_reason(tmp_path):
    for text in ("forty-two", "nan", "inf", ""):
        (tmp_path / "answer.txt").write_text(text)
        result = evaluate(tmp_path)
        assert not result["passed"], text
        assert result["details"]["reason"].startswith("answer.txt must hold"), result["details"]


def test_missing_answer_is_rejected_with_a_reason(tmp_path):
    result = evaluate(tmp_path)
    assert not result["passed"]
    assert result["details"]["reason"] == "the submission holds no answer.txt"
