"""Replicates: per-key medians of metrics, instances and side metrics, and
the spread (min, max, median absolute deviation) that tells noise from gain."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any


def _median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def mad(values: Sequence[float]) -> float:
    centre = _median(values)
    return _median(abs(v - centre) for v in values)


def spread_of(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "max": max(values), "mad": mad(values), "n": len(values)}


def _median_map(maps: Sequence[dict[str, float]]) -> dict[str, float]:
    keys: list[str] = []
    for mapping in maps:
        for key in mapping:
            if key not in keys:
                keys.append(key)
    return {key: _median([m[key] for m in maps if key in m]) for key in keys}


def aggregate(cores: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Combine the report cores of replicates that ran to completion.

    Metrics keep the first replicate's order and directions; each value is
    the median over replicates. `spread` maps each metric name to its
    min, max, MAD and count. The report block is the one of the replicate
    whose first metric is nearest the median (named by `report_replicate`).
    """
    first = cores[0]
    combined = dict(first)
    if len(cores) == 1:
        return combined
    metrics = []
    spread: dict[str, dict[str, float]] = {}
    for metric in first["metrics"]:
        values = [m["value"] for core in cores for m in core["metrics"] if m["name"] == metric["name"]]
        metrics.append({**metric, "value": _median(values)})
        spread[metric["name"]] = spread_of(values)
    combined["metrics"] = metrics
    combined["spread"] = spread
    for key in ("instances", "side_metrics"):
        maps = [core[key] for core in cores if core.get(key)]
        if maps:
            combined[key] = _median_map(maps)
    items = [core["items"] for core in cores if core.get("items")]
    if items:
        combined["items"] = {**items[0], "values": _median_map([entry["values"] for entry in items])}
    reports = [(index, core["report"]) for index, core in enumerate(cores) if core.get("report") is not None]
    if reports and first["metrics"]:
        name = first["metrics"][0]["name"]
        centre = combined["metrics"][0]["value"]

        def distance(item: tuple[int, Any]) -> float:
            core = cores[item[0]]
            value = next((m["value"] for m in core["metrics"] if m["name"] == name), None)
            return abs(value - centre) if value is not None else float("inf")

        index, block = min(reports, key=distance)
        combined["report"] = block
        combined["report_replicate"] = index
    combined["passed"] = all(core["passed"] for core in cores)
    return combined


# The two-sided 95% point of the normal: a gap within 1.96 standard errors
# of the difference is what noise alone gives one time in twenty.
Z95 = 1.96


def noise_se(report: Mapping[str, Any], metric_name: str) -> float | None:
    """The report's signed noise on a metric (hills-report(5), `noise.se`):
    the larger of the replicates' and the items' standard errors, or None."""
    noise = report.get("noise")
    if not isinstance(noise, dict) or noise.get("metric") != metric_name:
        return None
    se = noise.get("se")
    return float(se) if isinstance(se, (int, float)) and not isinstance(se, bool) and se >= 0 else None


def within_noise(better: dict[str, Any], worse: dict[str, Any], metric_name: str) -> bool:
    """True when the gap between two reports on a metric is no larger than
    the replicate range (max - min) of either, or than 1.96 times the
    standard error of their difference (docs/noise.md): a report whose
    noise is unknown adds nothing to that error."""
    def value(report: dict[str, Any]) -> float | None:
        return next((m["value"] for m in report.get("metrics", []) if m["name"] == metric_name), None)

    a, b = value(better), value(worse)
    if a is None or b is None:
        return False
    ranges = [r["spread"][metric_name]["max"] - r["spread"][metric_name]["min"]
              for r in (better, worse) if r.get("spread", {}).get(metric_name)]
    errors = [se for se in (noise_se(better, metric_name), noise_se(worse, metric_name)) if se is not None]
    if errors:
        ranges.append(Z95 * sum(se * se for se in errors) ** 0.5)
    return bool(ranges) and abs(a - b) <= max(ranges)
