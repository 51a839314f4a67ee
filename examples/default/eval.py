"""The evaluator: score a submission folder and say why when it does not pass.

Replace the body with your task's scoring. The contract: take the submission
folder, return passed, metrics (ordered, each with a direction), config (the
conditions of the measurement; primary entries decide which reports are
compared) and details. Each param declared in hill.yaml arrives as a keyword
argument of the same name. Anything the climber must not see belongs in
private/, never inline here: this file is readable by the climber.
"""

import math
from pathlib import Path

ANSWER_FILE = "answer.txt"
MAX_ANSWER_BYTES = 64 * 1024


def eval(submission, *, final=False):
    submission = Path(submission)
    config = [{"name": "mode", "value": "holdout" if final else "validation", "primary": True}]
    value, reason = _read_answer(submission / ANSWER_FILE)
    if reason is not None:
        return {"passed": False, "metrics": [_metric(0.0)], "config": config, "details": {"reason": reason}}
    return {"passed": True, "metrics": [_metric(value)], "config": config, "details": {}}


def _metric(value):
    return {"name": "value", "value": value, "direction": "max"}


def _read_answer(path):
    """(number, None) when answer.txt holds one finite number, else (None, reason)."""
    if not path.is_file():
        return None, f"the submission holds no {ANSWER_FILE}"
    if path.stat().st_size > MAX_ANSWER_BYTES:
        return None, f"{ANSWER_FILE} is larger than {MAX_ANSWER_BYTES} bytes"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        return None, f"{ANSWER_FILE} is not UTF-8 text"
    try:
        value = float(text)
    except ValueError:
        shown = text if len(text) <= 40 else text[:37] + "..."
        return None, f"{ANSWER_FILE} must hold one number, got '{shown}'"
    if not math.isfinite(value):
        return None, f"{ANSWER_FILE} must hold a finite number, got '{text}'"
    return value, None
