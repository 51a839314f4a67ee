"""The report core: checking what an evaluator returned, and the envelope
every evaluation gets, signed, whatever its outcome."""

from __future__ import annotations

import math
import os
import time

from .. import __version__
from ..base.digests import sha256

REPORT_VERSION = 1
# How per-item scores aggregate into their metric (hills-report(5), `items`).
AGGREGATES = ("mean", "sum", "rms", "median")
STATUSES = ("passing", "failing", "buggy", "refused", "interrupted", "implausible")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from .report_types import Report, Tool


class Malformed(Exception):
    """The evaluator's result breaks the contract; the message says where."""


def _finite(value: object, where: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed(f"{where} must be a finite number, got {type(value).__name__} {value!r}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int beyond any float: no ranking could compare it
        raise Malformed(f"{where} must be a finite number, got an int too large for a float")
    if not finite:
        raise Malformed(f"{where} must be a finite number, got {value}")
    return value


def normalize_core(value: object, declared: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Check a function evaluator's return value, and its metrics against
    those hill.yaml `declared` (when it declares any); return the report core."""
    if not isinstance(value, dict):
        raise Malformed(f"eval() must return a dict, got {type(value).__name__}")
    allowed = {"passed", "metrics", "config", "details", "instances", "items", "report"}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise Malformed(f"unknown key '{unknown[0]}' in the result (allowed: {', '.join(sorted(allowed))})")
    if not isinstance(value.get("passed"), bool):
        raise Malformed(f"'passed' must be true or false, got {value.get('passed')!r}")
    metrics = value.get("metrics")
    if not isinstance(metrics, list):
        raise Malformed("'metrics' must be a list of {name, value, direction}")
    if not metrics:
        # Nothing to rank on: such a report would pass and never compare.
        raise Malformed("'metrics' is empty: a result reports at least one {name, value, direction}")
    core_metrics: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, metric in enumerate(metrics):
        where = f"metrics[{index}]"
        if not isinstance(metric, dict):
            raise Malformed(f"{where} must be a mapping with name, value and direction")
        name = metric.get("name")
        if not isinstance(name, str) or not name:
            raise Malformed(f"{where}.name must be a non-empty string")
        if name in seen:
            raise Malformed(f"{where}.name '{name}' appears twice")
        seen.add(name)
        if metric.get("direction") not in ("max", "min"):
            raise Malformed(f"{where}.direction must be 'max' or 'min', got {metric.get('direction')!r}")
        core_metrics.append({"name": name, "value": _finite(metric.get("value"), f"{where}.value"),
                             "direction": metric["direction"]})
    _check_declared(core_metrics, declared)
    config = value.get("config", [])
    if not isinstance(config, list):
        raise Malformed("'config' must be a list of {name, value, primary}")
    core_config = []
    for index, entry in enumerate(config):
        where = f"config[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise Malformed(f"{where} must be a mapping with a string name")
        if not isinstance(entry.get("primary", False), bool):
            raise Malformed(f"{where}.primary must be true or false")
        item = entry.get("value")
        # Nested too: a NaN anywhere would only fail later, at signing, unlogged.
        _check_json_finite(item, f"{where}.value")
        core_config.append({"name": entry["name"], "value": item, "primary": entry.get("primary", False)})
    details = value.get("details", {})
    if not isinstance(details, dict):
        raise Malformed("'details' must be a mapping")
    _check_json_finite(details, "details")
    core: dict[str, Any] = {"passed": value["passed"], "metrics": core_metrics, "config": core_config,
                            "details": details}
    if "instances" in value and value["instances"] is not None:
        instances = value["instances"]
        if not isinstance(instances, dict):
            raise Malformed("'instances' must be a mapping of name to number")
        core["instances"] = {str(k): _finite(v, f"instances[{k!r}]") for k, v in instances.items()}
    if value.get("items") is not None:
        core["items"] = check_items(value["items"], [metric["name"] for metric in core_metrics], "'items'")
    if "report" in value and value["report"] is not None:
        if not isinstance(value["report"], dict):
            raise Malformed("'report' must be a mapping")
        _check_json_finite(value["report"], "report")
        core["report"] = value["report"]
    return core


def check_items(value: object, metric_names: Sequence[str], where: str) -> dict[str, Any]:
    """A result's `items`, both shapes: {"metric": NAME, "aggregate": HOW,
    "values": {KEY: number}}, NAME one of the result's metrics (left out:
    the first) and HOW one of AGGREGATES (left out: hill.yaml's `items` of
    the metric says it)."""
    expected = '{"metric": NAME, "aggregate": "mean"|"sum"|"rms"|"median", "values": {KEY: number}}'
    if not isinstance(value, dict):
        raise Malformed(f"{where} must be an object {expected}, got {type(value).__name__}")
    unknown = sorted(set(value) - {"metric", "aggregate", "values"})
    if unknown:
        raise Malformed(f"unknown key '{unknown[0]}' in {where} (allowed: aggregate, metric, values)")
    metric = value.get("metric", metric_names[0] if metric_names else None)
    if not isinstance(metric, str) or metric not in metric_names:
        raise Malformed(f"{where}.metric must name one of the result's metrics ({', '.join(metric_names)}), "
                        f"got {metric!r}")
    aggregate = value.get("aggregate")
    if aggregate is not None and aggregate not in AGGREGATES:
        raise Malformed(f"{where}.aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
    values = value.get("values")
    if not isinstance(values, dict) or not values:
        got = "an empty object" if isinstance(values, dict) else "nothing" if values is None \
            else type(values).__name__
        raise Malformed(f"{where}.values must be a non-empty object of item key to number, got {got}")
    checked = {str(key): _finite(item, f"{where}.values[{str(key)!r}]") for key, item in values.items()}
    found: dict[str, Any] = {"metric": metric, "values": checked}
    if aggregate is not None:
        found["aggregate"] = aggregate
    return found


def _check_declared(metrics: Sequence[Mapping[str, Any]], declared: Sequence[Mapping[str, Any]]) -> None:
    """The same names and directions as hill.yaml declares, in its order:
    reports rank lexicographically by metrics, so any other list would be
    compared against reports on different terms."""
    if not declared:
        return
    names = ", ".join(metric["name"] for metric in declared)
    for index, (got, wanted) in enumerate(zip(metrics, declared)):
        if got["name"] != wanted["name"]:
            raise Malformed(f"metrics[{index}] is '{got['name']}', but hill.yaml declares '{wanted['name']}' there "
                            f"(declared: {names})")
        if got["direction"] != wanted["direction"]:
            raise Malformed(f"metrics[{index}] '{got['name']}' has direction '{got['direction']}', but hill.yaml "
                            f"declares '{wanted['direction']}'")
    if len(metrics) != len(declared):
        raise Malformed(f"the result has {len(metrics)} metric(s), but hill.yaml declares {len(declared)} ({names})")


def judge(envelope: Report, spec: Mapping[str, Any]) -> None:
    """What hill.yaml adds to a scored report: each param's default and the
    neutral ones, so that a report with other values ranks apart
    (hills-rank(1)); and status `implausible` for a passing result outside
    its metrics' bounds."""
    declared = spec.get("params") or {}
    envelope["param_defaults"] = {name: param["default"] for name, param in declared.items()}
    envelope["neutral_params"] = sorted(name for name, param in declared.items() if param.get("neutral"))
    if envelope.get("status") != "passing":
        return
    reason = implausibility(envelope.get("metrics") or [], spec.get("metrics") or [], envelope.get("params") or {})
    if reason is not None:
        envelope.update({"status": "implausible", "passed": False, "reason": reason})


def implausibility(metrics: Sequence[Mapping[str, Any]], declared: Sequence[Mapping[str, Any]],
                   params: Mapping[str, Any]) -> str | None:
    """Why a result is implausible: the first metric past a bound hill.yaml
    declares for it (for these params), or None."""
    values = {metric["name"]: metric["value"] for metric in metrics}
    for index, bounds in enumerate(declared):
        scope = bounds.get("for_params") or {}
        value = values.get(bounds["name"])
        if value is None or any(params.get(name) != wanted for name, wanted in scope.items()):
            continue
        where = f"hill.yaml metrics[{index}]" + (" for " + ", ".join(f"{k}={v}" for k, v in scope.items())
                                                 if scope else "")
        shown = f"{bounds['name']} {value:.10g}"
        if "floor" in bounds and value < bounds["floor"]:
            return f"{shown} is below its floor {bounds['floor']!r} ({where})"
        if "ceiling" in bounds and value > bounds["ceiling"]:
            return f"{shown} is above its ceiling {bounds['ceiling']!r} ({where})"
        if "best_known" in bounds:
            best, allowed = bounds["best_known"], bounds.get("max_gain", 0)
            gain = value - best if bounds["direction"] == "max" else best - value
            if gain > allowed:
                return (f"{shown} beats best_known {best!r} by {gain:.3g}, more than max_gain {allowed!r} "
                        f"({where})")
    return None


def _check_json_finite(value: object, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise Malformed(f"{where} must be finite, got {value}")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_json_finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json_finite(item, f"{where}[{index}]")


_TOOL_HASH: str | None = None


def tool_identity() -> Tool:
    """{version, sha256} of the hills package that produced a report."""
    global _TOOL_HASH
    if _TOOL_HASH is None:
        _TOOL_HASH = _package_hash()
    return {"version": __version__, "sha256": _TOOL_HASH}


def _sources(package: str) -> list[list[Any]]:
    """[path, size, mtime, ctime, inode] of every .py file of the package,
    in every sub-package (the layers; not the templates, hooks or skills a
    wheel puts beside the code, nor caches), sorted by path: one scandir a
    folder, one stat a file, as the warm client's key reads them."""
    found: list[list[Any]] = []
    folders = [""]
    while folders:
        folder = folders.pop()
        files, below, names = [], [], set()
        with os.scandir(os.path.join(package, folder)) as entries:
            for entry in entries:
                if entry.name.endswith(".py") and entry.is_file():
                    names.add(entry.name)
                    st = entry.stat()
                    files.append([folder + entry.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
                elif entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__" \
                        and not entry.name.startswith("."):
                    below.append(folder + entry.name + "/")
        if folder and "__init__.py" not in names:
            continue  # not a package: no code of hills' is below it
        found.extend(files)
        folders.extend(below)
    return sorted(found)


def _package_hash() -> str:
    """The SHA-256 of the package's sources, remembered in machine state
    (sealed) by their stat data: hashing half a megabyte costs a command
    about 2 ms, and an edited file shows in its ctime, which no user can
    set back. Nothing is written on a machine without a key."""
    from ..base import state
    from ..base.errors import HillsError

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = _sources(package)
    names = [name for name, *_ in files]
    try:
        known = state.existing_key() is not None
    except HillsError:
        known = False
    cache = os.path.join(state.home(), "cache", "tool-identity.json")
    remembered = state.sealed_read(cache) if known else None
    if isinstance(remembered, dict) and remembered.get("package") == package and remembered.get("files") == files \
            and isinstance(remembered.get("sha256"), str):
        return remembered["sha256"]
    digest = sha256()
    for name in names:
        with open(os.path.join(package, name), "rb") as handle:
            digest.update(name.encode() + b"\0" + handle.read())
    if known:
        state.sealed_write(cache, {"package": package, "files": files, "sha256": digest.hexdigest()})
    return digest.hexdigest()


def timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def subject_line(report: Mapping[str, Any]) -> str:
    """What a report is about, for its first line: `HILL @ TREE` (12 hex
    digits, or `working tree`); an object signed by hills-sign is labelled
    as such rather than passed off as a hill's report."""
    hill = report.get("hill") if isinstance(report.get("hill"), str) else None
    tree = report.get("tree_hash") if isinstance(report.get("tree_hash"), str) else None
    if report.get("trust") == "self-reported":
        claim = f", naming hill '{hill}'" + (f" @ {tree[:12]}" if tree else "") if hill else ""
        return "self-reported object (hills-sign)" + claim
    return f"{hill or '?'} @ {(tree or 'working tree')[:12]}"


def summary_line(report: Mapping[str, Any], digits: int = 6) -> str:
    """One line: verdict and metrics, at `digits` significant digits. Any
    report shape is shown, never a crash (hills-sign signs whatever JSON
    object it is given)."""
    shown = []
    metrics_list = report.get("metrics") if isinstance(report, dict) else None
    for metric in metrics_list if isinstance(metrics_list, list) else []:
        if not isinstance(metric, dict) or "name" not in metric:
            continue
        value = metric.get("value")
        value = f"{value:.{digits}g}" if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else str(value)
        shown.append(f"{metric['name']}={value} ({metric.get('direction', '?')})")
    metrics = "  ".join(shown)
    status = report.get("status")
    # A signed object's status may be any JSON value, a list or an object too.
    verdict = {"passing": "PASSED", "failing": "FAILED", "buggy": "BUGGY", "refused": "REFUSED",
               "interrupted": "INTERRUPTED", "implausible": "IMPLAUSIBLE"}.get(status, "?") \
        if isinstance(status, str) else "?"
    return f"{verdict:<8} {metrics}".rstrip()


# The test the A/B verdict names (hills/many/verdict.py); a report keeps
# the name of the test it was decided by, so an older one reads as it was.
VERDICT_TEST = ("sign-flip permutation test, two-sided, on candidate minus reference per item over the seed "
                "pairs (per pair without items); paired bootstrap percentile interval")


def verdict_line(report: Mapping[str, Any]) -> str:
    """One line for stderr: the A/B verdict of a report (hills/many/verdict.py
    signs it), the difference and its interval, and what it was tested on."""
    verdict = report.get("verdict") or {}
    low, high = (verdict.get("ci") or [math.nan, math.nan])[:2]
    pairs, units = verdict.get("pairs"), verdict.get("units")
    if verdict.get("unit") == "item":
        basis = f"{units} items over {pairs} seed pairs"
    else:
        basis = f"{pairs} pairs"
    test = str(verdict.get("test") or VERDICT_TEST).split(",")[0]
    line = (f"{str(verdict.get('verdict', '?')).upper()}: {verdict.get('metric')} candidate minus reference "
            f"{verdict.get('mean'):+.6g} ({int(round(100 * verdict.get('confidence', 0)))}% CI {low:+.6g} to "
            f"{high:+.6g}, p {verdict.get('p_value'):.3g}, {basis}, {test})")
    count = units if isinstance(units, int) else pairs
    if "unit" in verdict and isinstance(count, int) and 2.0 / 2 ** count > verdict.get("level", 0.05):
        # A sign-flip test on n units gives no p below 2 / 2^n: five or fewer can never tell.
        line += (f"; {count} items can never tell at this level" if verdict.get("unit") == "item" else
                 f"; {count} pairs can never tell at this level: --repeat 6 or more, or per-item scores")
    return line
