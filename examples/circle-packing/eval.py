"""Score a circle packing: n circles inside the unit square, no two overlapping,
ranked by the sum of their radii. The contract is in README.md."""

import json
import math
from pathlib import Path

CIRCLES_FILE = "circles.json"
SOLVER_FILE = "solution.py"
MAX_CIRCLES_BYTES = 1024 * 1024


class Rejected(Exception):
    """The submission breaks the contract; the message says exactly where."""


def eval(submission, *, final=False, n=26, tolerance=1e-9):
    submission = Path(submission)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) \
            or not math.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    tolerance = float(tolerance)
    config = [
        {"name": "n", "value": n, "primary": True},
        {"name": "mode", "value": "holdout" if final else "validation", "primary": True},
        {"name": "tolerance", "value": tolerance, "primary": False},
    ]
    details = {}
    try:
        circles = _read_circles(submission, details)
        checked = _check_circles(circles, n, tolerance)
    except Rejected as exc:
        details["reason"] = str(exc)
        return {"passed": False, "metrics": [_metric(0.0)], "config": config, "details": details}

    radii = [r for _, _, r in checked]
    details["min_radius"] = min(radii)
    details["max_radius"] = max(radii)
    width = max(2, len(str(n - 1)))
    return {
        "passed": True,
        "metrics": [_metric(math.fsum(radii))],
        "config": config,
        "details": details,
        "instances": {f"circle-{index:0{width}d}": r for index, r in enumerate(radii)},
        # The packing itself, for hills show --picture and hills journal.
        "report": {"picture": {"box": [0, 0, 1, 1], "circles": [[x, y, r] for x, y, r in checked]}},
    }


def _metric(value):
    return {"name": "sum_radii", "value": value, "direction": "max"}


def _read_circles(submission, details):
    """The parsed content of circles.json: the submission's own, or what its
    solution.py wrote there in the solution phase (hill.yaml `solution:`)."""
    if not submission.is_dir():
        raise Rejected(f"the submission must be a folder, got '{submission}'")
    circles_path = submission / CIRCLES_FILE
    if not circles_path.exists():
        raise Rejected(f"the submission holds neither {CIRCLES_FILE} nor {SOLVER_FILE}")
    if not circles_path.is_file():
        raise Rejected(f"{CIRCLES_FILE} is not a regular file")
    size = circles_path.stat().st_size
    if size > MAX_CIRCLES_BYTES:
        raise Rejected(f"{CIRCLES_FILE} is {size} bytes, more than the {MAX_CIRCLES_BYTES} allowed")
    try:
        text = circles_path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise Rejected(f"{CIRCLES_FILE} is not UTF-8 text")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Rejected(f"{CIRCLES_FILE} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        raise Rejected(f"{CIRCLES_FILE} is nested too deeply")


def _describe(value):
    if isinstance(value, float):
        return repr(value)
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _amount(excess, tolerance):
    """Six digits, unless that would round a rejected excess down to the tolerance."""
    short = f"{excess:.6g}"
    return short if float(short) > tolerance else repr(excess)


def _check_circles(circles, n, tolerance):
    """[(x, y, r)] as floats, or Rejected naming the first problem."""
    if isinstance(circles, dict):
        if "circles" not in circles:
            raise Rejected(f"{CIRCLES_FILE}: expected a list of [x, y, r] or an object with a 'circles' list, "
                           f"got an object without 'circles'")
        circles = circles["circles"]
    if not isinstance(circles, list):
        raise Rejected(f"{CIRCLES_FILE}: expected a list of [x, y, r], got {_describe(circles)}")
    if len(circles) != n:
        raise Rejected(f"expected {n} circles, got {len(circles)}")

    checked = []
    for index, circle in enumerate(circles):
        if not isinstance(circle, list) or len(circle) != 3:
            raise Rejected(f"circle {index}: expected [x, y, r], got {_describe(circle)}")
        numbers = []
        for label, value in zip(("x", "y", "r"), circle):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise Rejected(f"circle {index}: {label} must be a number, got {_describe(value)}")
            try:
                value = float(value)
            except OverflowError:
                raise Rejected(f"circle {index}: {label} is too large to be a float")
            if not math.isfinite(value):
                raise Rejected(f"circle {index}: {label} must be finite, got {_describe(value)}")
            numbers.append(value)
        x, y, r = numbers
        if r <= 0:
            raise Rejected(f"circle {index}: radius must be positive, got {r!r}")
        edges = {"left": r - x, "right": x + r - 1.0, "bottom": r - y, "top": y + r - 1.0}
        edge, excess = max(edges.items(), key=lambda item: item[1])
        if excess > tolerance:
            raise Rejected(f"circle {index} crosses the {edge} edge of the square "
                           f"by {_amount(excess, tolerance)} (tolerance {tolerance!r})")
        checked.append((x, y, r))

    for i in range(n):
        xi, yi, ri = checked[i]
        for j in range(i + 1, n):
            xj, yj, rj = checked[j]
            overlap = ri + rj - math.hypot(xi - xj, yi - yj)
            if overlap > tolerance:
                raise Rejected(f"circles {i} and {j} overlap by {_amount(overlap, tolerance)} "
                               f"(tolerance {tolerance!r})")
    return checked
