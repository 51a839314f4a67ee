"""The command shape of evaluators (hillclimb verifiers): the environment it
runs in, and the result file it must write, checked key by key."""

from __future__ import annotations

import json
import math
import os

from ..evidence.report import Malformed, check_items
from ..evidence.signing import json_kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NamedTuple

    class VerifierResult(NamedTuple):
        """A verifier's result file, checked: the score, the side metrics kept
        and the names of those dropped (not finite numbers), and the optional
        instances and report block."""

        score: float
        side: dict[str, float]
        dropped: list[str]
        instances: dict[str, float] | None
        report: dict[str, Any] | None
        items: dict[str, Any] | None
else:
    # The same tuple as the declaration above, without importing typing.
    from collections import namedtuple

    VerifierResult = namedtuple("VerifierResult", "score side dropped instances report items")

RESERVED = ("score", "instances", "items", "report")


def _finite_number(value: object) -> bool:
    """Whether `value` is a number a report can hold: not a boolean, not NaN
    or infinite, and (an int) not too large for a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _score(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed(f"{where} must be a finite number, got {json_kind(value)} ({json.dumps(value)[:60]})")
    if isinstance(value, int) and not _finite_number(value):
        raise Malformed(f"{where} must be a finite number, got an int too large for a float")
    if math.isnan(value):
        raise Malformed(f"{where} is NaN; it must be a finite number")
    if math.isinf(value):
        raise Malformed(f"{where} is {'+' if value > 0 else '-'}infinity; it must be a finite number")
    return value


def parse_result(path: str, metric: str = "score") -> VerifierResult:
    """Read a verifier's result file: {"score": x, ...} or a bare number.
    Every broken result raises Malformed with a precise message. `metric`:
    the name hill.yaml gives the score, which `items.metric` must name."""
    try:
        # Never through a link: the result is a plain file the verifier wrote.
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
            data = handle.read(64 * 1024 * 1024 + 1)
    except FileNotFoundError:
        raise Malformed("no result: the verifier exited 0 without writing HILLS_RESULT (contract violation)")
    except OSError as exc:
        if os.path.islink(path):
            raise Malformed("the result is a symbolic link, not a file the verifier wrote")
        raise Malformed(f"the result file cannot be read: {exc.strerror}")
    if len(data) > 64 * 1024 * 1024:
        raise Malformed("the result file is larger than 64 MiB")
    text = data.decode("utf-8", "replace").strip()
    if not text:
        raise Malformed("the result file is empty")
    try:
        value = json.loads(text, parse_constant=lambda name: {"NaN": math.nan, "Infinity": math.inf,
                                                              "-Infinity": -math.inf}[name])
    except ValueError as exc:
        raise Malformed(f"the result file is not valid JSON ({exc}); expected {{\"score\": x}} or a number")
    if not isinstance(value, dict):
        return VerifierResult(_score(value, "the result"), {}, [], None, None, None)
    if "score" not in value:
        raise Malformed("the result has no 'score' key; expected {\"score\": <finite number>, ...}")
    score = _score(value["score"], "'score'")
    instances = value.get("instances")
    if instances is not None:
        if not isinstance(instances, dict):
            raise Malformed(f"'instances' must be an object of name to number, got {json_kind(instances)}")
        instances = {str(k): _score(v, f"instances['{k}']") for k, v in instances.items()}
    items = value.get("items")
    if items is not None:
        items = check_items(items, [metric], "the result's 'items'")
    report = value.get("report")
    if report is not None and not isinstance(report, dict):
        raise Malformed(f"'report' must be an object, got {json_kind(report)}")
    side: dict[str, float] = {}
    dropped: list[str] = []
    for key, item in value.items():
        if key in RESERVED:
            continue
        if _finite_number(item):
            side[key] = item
        else:
            dropped.append(key)
    return VerifierResult(score, side, dropped, instances, _finite_report(report), items)


def _finite_report(report: Any) -> Any:
    """Replace non-finite numbers in a report block by null: the block is
    context, and one NaN in it must not cost the whole eval."""
    if isinstance(report, float) and not math.isfinite(report):
        return None
    if isinstance(report, dict):
        return {str(k): _finite_report(v) for k, v in report.items()}
    if isinstance(report, list):
        return [_finite_report(v) for v in report]
    return report


def core_from_result(spec: Mapping[str, Any], params: Mapping[str, Any], final: bool,
                     parsed: VerifierResult) -> dict[str, Any]:
    """The report core for a command verifier's accepted result."""
    score, side, dropped, instances, report, items = parsed
    metric = spec["metrics"][0]
    core: dict[str, Any] = {
        "passed": True,
        "metrics": [{"name": metric["name"], "value": score, "direction": metric["direction"]}],
        "config": [{"name": name, "value": params[name], "primary": spec["params"][name]["primary"]}
                   for name in spec["params"]] + [{"name": "mode", "value": "holdout" if final else "validation",
                                                    "primary": True}],
        "details": {},
    }
    if side:
        core["side_metrics"] = side
    if dropped:
        core["details"]["side_metrics_dropped"] = sorted(dropped)
    if instances:
        core["instances"] = instances
    if items is not None:
        core["items"] = items
    if report is not None:
        core["report"] = report
    return core


def environment(*, python: str, result_path: str, submission_dir: str, solution: str, split: str, seed: int | str,
                hill_dir: str, trial: Mapping[str, Any] | None, scoring_python: str,
                hillclimb_python: str) -> dict[str, str]:
    """HILLS_* values and the same under the HILLCLIMB_* names. `python`
    is the confined interpreter; `$HILLS_SCORING_PYTHON`, the trusted one,
    has no HILLCLIMB_ twin, and `$HILLCLIMB_PYTHON` trusts only a script of
    the hill itself (hillclimb's `exec "$HILLCLIMB_PYTHON" problem/verify.py`)."""
    values = {
        "PYTHON": python,
        "RESULT": result_path,
        "SUBMISSION": submission_dir,
        "SOLUTION": solution,
        "SPLIT": split,
        "REPLICATE_SEED": str(seed),
        "HILL": hill_dir,
    }
    if trial:
        values["PARAMS"] = json.dumps(trial, sort_keys=True)
    env = {}
    for key, value in values.items():
        env["HILLS_" + key] = value
        env["HILLCLIMB_" + key] = value
    env["HILLCLIMB_TRIAL_SEED"] = str(seed)
    env["HILLCLIMB_PYTHON"] = hillclimb_python
    env["HILLS_SCORING_PYTHON"] = scoring_python
    return env


def prepare_workdir(submission_dir: str, hill_dir: str) -> None:
    """Give the submission snapshot the layout a hillclimb verifier expects:
    ./problem is the hill, ./data its data folder (when it has one)."""
    links = {"problem": hill_dir}
    if os.path.isdir(os.path.join(hill_dir, "data")):
        links["data"] = os.path.join(hill_dir, "data")
    for name, target in links.items():
        path = os.path.join(submission_dir, name)
        if os.path.lexists(path):
            raise Malformed(f"the submission holds '{name}', a name reserved for the hill in a command eval")
        os.symlink(target, path)
