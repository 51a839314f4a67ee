"""Score predicted digit labels against the held-out labels in private/:
accuracy on the validation split, or on holdout with --final. The
contract is in README.md."""

import csv
import json
from pathlib import Path

PREDICTIONS = "predictions.json"
HILL = Path(__file__).resolve().parent
MAX_BYTES = 8 * 1024 * 1024


class Rejected(Exception):
    """The predictions break the contract; the message says where."""


def eval(submission, *, final=False):
    split = "holdout" if final else "validation"
    config = [{"name": "mode", "value": split, "primary": True}]
    labels = _labels(split)
    try:
        predicted = _predictions(Path(submission), labels)
    except Rejected as exc:
        return {"passed": False, "metrics": [_metric(0.0)], "config": config, "details": {"reason": str(exc)}}
    right = sum(predicted[row_id] == label for row_id, label in labels.items())
    per_digit = {}
    for row_id, label in labels.items():
        seen, hit = per_digit.get(label, (0, 0))
        per_digit[label] = (seen + 1, hit + (predicted[row_id] == label))
    result = {"passed": True, "metrics": [_metric(right / len(labels))], "config": config,
              "details": {"rows": len(labels), "correct": right},
              # Accuracy is the mean over rows: hills resamples them for the
              # score's noise (and keeps a holdout report's values to itself).
              "items": {"metric": "accuracy", "aggregate": "mean",
                        "values": {row_id: float(predicted[row_id] == label) for row_id, label in labels.items()}}}
    if not final:
        # The breakdown is for the climber: the holdout split gets none.
        result["instances"] = {f"digit-{digit}": hit / seen for digit, (seen, hit) in sorted(per_digit.items())}
    return result


def _metric(value):
    return {"name": "accuracy", "value": value, "direction": "max"}


def _labels(split):
    with open(HILL / "private" / "labels" / f"{split}.csv", encoding="ascii", newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        return {row[0]: int(row[1]) for row in reader}


def _predictions(submission, labels):
    path = submission / PREDICTIONS
    if not path.is_file():
        raise Rejected(f"the solution phase wrote no {PREDICTIONS}")
    if path.stat().st_size > MAX_BYTES:
        raise Rejected(f"{PREDICTIONS} is larger than {MAX_BYTES} bytes")
    try:
        predicted = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise Rejected(f"{PREDICTIONS} is not valid JSON")
    if not isinstance(predicted, dict):
        raise Rejected(f"{PREDICTIONS} must map row ids to labels")
    missing = sorted(set(labels) - set(predicted))
    if missing:
        raise Rejected(f"no prediction for row '{missing[0]}' ({len(missing)} rows missing)")
    for row_id in labels:
        value = predicted[row_id]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9:
            raise Rejected(f"row '{row_id}': a label must be an integer from 0 to 9, got {value!r}")
    return predicted
