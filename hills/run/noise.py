"""The report's `noise` (docs/noise.md): a metric's standard error from its
replicates and from resampling its per-item scores, the larger of the two,
and its label; and the selection bound on the best of N evals."""

from __future__ import annotations

import math

from ..evidence.report import AGGREGATES
from .replicates import Z95, noise_se

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from ..evidence.report_types import Report

RESAMPLES = 2000
# Items aggregate to their metric to this relative tolerance (a sum in
# another order differs in its last bits).
TOLERANCE = 1e-9
UNKNOWN = "noise unknown (no per-item scores)"
# The one-sided level of the selection bound: the lead the best of N equal
# submissions stays within 95% of the time.
SELECTION_LEVEL = 0.95


def aggregate(values: Sequence[float], how: str) -> float:
    """The metric `values` aggregate to, by `how` (one of AGGREGATES)."""
    if how == "mean":
        return math.fsum(values) / len(values)
    if how == "sum":
        return math.fsum(values)
    if how == "rms":
        return math.sqrt(math.fsum(v * v for v in values) / len(values))
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _sd(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1); 0 for one value."""
    if len(values) < 2:
        return 0.0
    centre = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1))


def bootstrap_se(values: Sequence[float], how: str, resamples: int = RESAMPLES) -> float:
    """The standard deviation of the aggregate over `resamples` resamples of
    the items with replacement. The generator is seeded from the values,
    sorted, so the same items give the same figure whatever their order."""
    import random  # not at module level: the eval path loads this module

    ordered = sorted(values)
    generator = random.Random(repr(ordered))
    count = len(ordered)
    draws = [aggregate(generator.choices(ordered, k=count), how) for _ in range(resamples)]
    return _sd(draws)


def item_se(values: Sequence[float], how: str) -> tuple[float, str, int | None]:
    """(se, method, resamples) of the aggregate under resampling the items:
    exact for a mean (sd / sqrt(n)) and a sum (sd * sqrt(n)), a seeded
    bootstrap for rms and median."""
    count = len(values)
    if how == "mean":
        return _sd(values) / math.sqrt(count), "exact", None
    if how == "sum":
        return _sd(values) * math.sqrt(count), "exact", None
    return bootstrap_se(values, how), "bootstrap", RESAMPLES


def _items_of(core: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, dict[str, float] | None, str | None,
                                                                          str | None]:
    """(metric, values, aggregate, why not) of a replicate's per-item scores:
    its `items`, else its `instances` by the first metric's hill.yaml
    `items`; hill.yaml's aggregate wins over the result's."""
    metrics = core.get("metrics") or []
    first = metrics[0]["name"] if metrics else ""
    declared = {m.get("name"): m.get("items") for m in spec.get("metrics") or [] if isinstance(m, dict)}
    items = core.get("items")
    if isinstance(items, dict):
        how = declared.get(items["metric"]) or items.get("aggregate")
        if how is None:
            return items["metric"], None, None, (f"the result's items give no aggregate and hill.yaml declares "
                                                 f"no items for metric '{items['metric']}'")
        return items["metric"], items["values"], how, None
    instances = core.get("instances")
    if instances:
        how = declared.get(first)
        if how is None:
            return first, None, None, (f"hill.yaml declares no items for metric '{first}': the instances' "
                                       "aggregate is unknown")
        return first, dict(instances), how, None
    return first, None, None, "no per-item scores"


def _value(core: Mapping[str, Any], name: str) -> float | None:
    return next((m["value"] for m in core.get("metrics") or [] if m.get("name") == name), None)


def items_noise(cores: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None,
                                                                                        str | None]:
    """(metric, `noise.items` or None, why not): each replicate's items are
    held to its metric's value, and the items' se is the median of the
    replicates' (each is an estimate of the same sampling noise)."""
    errors: list[float] = []
    record: dict[str, Any] | None = None
    metric = ""
    for core in cores:
        metric, values, how, why = _items_of(core, spec)
        if values is None or how is None:
            return metric, None, why
        value = _value(core, metric)
        if how not in AGGREGATES or value is None:
            return metric, None, f"metric '{metric}' is not in the result"
        total = aggregate(list(values.values()), how)
        if not math.isclose(total, value, rel_tol=TOLERANCE, abs_tol=1e-12):
            return metric, None, (f"the {len(values)} items' {how} is {total:.10g}, not the value of metric "
                                  f"'{metric}', {value:.10g}")
        se, method, resamples = item_se(list(values.values()), how)
        errors.append(se)
        record = {"n": len(values), "aggregate": how, "se": se, "method": method, "resamples": resamples}
    if record is None:
        return metric, None, "no per-item scores"
    ordered = sorted(errors)
    middle = len(ordered) // 2
    record["se"] = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return metric, record, None


def replicates_noise(cores: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any] | None:
    """`noise.replicates`: {n, sd, se} of the metric over replicates, or
    None with fewer than two."""
    values = [v for v in (_value(core, metric) for core in cores) if v is not None]
    if len(values) < 2:
        return None
    sd = _sd(values)
    return {"n": len(values), "sd": sd, "se": sd / math.sqrt(len(values))}


def label(noise: Mapping[str, Any]) -> str:
    """`noise ±X (items)`, `... (replicates)`, or noise unknown."""
    se = noise.get("se")
    if not isinstance(se, (int, float)):
        return UNKNOWN
    items, reps = noise.get("items") or {}, noise.get("replicates") or {}
    source = "items" if items and (not reps or items["se"] >= reps["se"]) else "replicates"
    return f"noise ±{se:.3g} ({source})"


def noise_of(cores: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The report's `noise` from the replicates' cores."""
    metric, items, why = items_noise(cores, spec)
    reps = replicates_noise(cores, metric)
    errors = [entry["se"] for entry in (items, reps) if entry is not None]
    noise: dict[str, Any] = {"metric": metric, "replicates": reps, "items": items,
                             "se": max(errors) if errors else None}
    if items is None:
        noise["items_reason"] = why
    noise["label"] = label(noise)
    return noise


def attach(envelope: Report, cores: Sequence[Mapping[str, Any]], spec: Mapping[str, Any], final: bool) -> None:
    """Add `noise` to a scored report, before it is signed. A holdout
    report keeps its items' noise but not their values: which holdout items
    a submission got right would tell the climber about the holdout."""
    if not cores:
        return
    envelope["noise"] = noise_of(cores, spec)
    if final and "items" in envelope:
        del envelope["items"]


def report_label(report: Mapping[str, Any]) -> str:
    """The noise label of any report: its signed `noise`, else (a report
    from before `noise`) its replicate spread, else unknown."""
    noise = report.get("noise")
    if isinstance(noise, dict) and isinstance(noise.get("label"), str):
        return noise["label"]
    spread = report.get("spread")
    metrics = report.get("metrics")
    first = metrics[0].get("name") if isinstance(metrics, list) and metrics and isinstance(metrics[0], dict) \
        else None
    entry = spread.get(first) if isinstance(spread, dict) else None
    if isinstance(entry, dict) and isinstance(entry.get("max"), (int, float)) \
            and isinstance(entry.get("min"), (int, float)):
        return f"noise: replicate range {entry['max'] - entry['min']:.3g} (no noise estimate)"
    return UNKNOWN


# ---------------------------------------------------------------- the selection bound

def best_of_z(count: int) -> float:
    """z_N: the 95% point of the largest of N standard normals,
    Phi^-1(0.95^(1/N))."""
    level = SELECTION_LEVEL ** (1.0 / max(count, 1))  # in (0, 1): what inv_cdf accepts
    try:
        # The C function NormalDist.inv_cdf calls, without importing statistics,
        # which loads random, fractions and decimal: a tenth of `hills attempts`.
        from _statistics import _normal_dist_inv_cdf  # type: ignore[import-not-found]
    except ImportError:
        from statistics import NormalDist

        return NormalDist().inv_cdf(level)
    value: float = _normal_dist_inv_cdf(level, 0.0, 1.0)
    return value


def selection_bound(count: int, se: float | None) -> float | None:
    """The lead over the first that chance alone gives the best of `count`
    equal submissions, each measured with standard error `se`:
    z_N * sqrt(2) * se; None when the noise is unknown."""
    if se is None or count < 1:
        return None
    return best_of_z(count) * math.sqrt(2) * se


def _first_value(report: Mapping[str, Any]) -> tuple[str, str, float] | None:
    metrics = report.get("metrics")
    first = metrics[0] if isinstance(metrics, list) and metrics and isinstance(metrics[0], dict) else None
    if first is None or not isinstance(first.get("value"), (int, float)):
        return None
    return str(first.get("name")), str(first.get("direction", "max")), float(first["value"])


def selection(reports: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The selection record of one split's comparable, official, passing
    reports in log order: {n, metric, direction, first, best, lead, se, z,
    bound, within, label}. `baseline` (default the first) is what the lead
    is measured from; `se` is the median of the reports' signed noise;
    `within` is whether the best's lead is within the bound (None when the
    noise is unknown). None for no reports."""
    shown = [(report, _first_value(report)) for report in reports]
    rows = [(report, found) for report, found in shown if found is not None]
    if not rows:
        return None
    name, direction, _ = rows[0][1]
    sign = 1.0 if direction == "max" else -1.0
    start = _first_value(baseline) if baseline is not None else rows[0][1]
    first = start[2] if start is not None else rows[0][1][2]
    best = max((found[2] for _, found in rows), key=lambda value: sign * value)
    lead = sign * (best - first)
    errors = sorted(se for se in (noise_se(report, name) for report, _ in rows) if se is not None)
    se = None
    if errors:
        middle = len(errors) // 2
        se = errors[middle] if len(errors) % 2 else (errors[middle - 1] + errors[middle]) / 2
    count = len(rows)
    bound = selection_bound(count, se)
    within = None if bound is None else lead <= bound
    if bound is None:
        text = f"best of {count}: selection bound unknown, {UNKNOWN}"
    elif within:
        text = (f"best of {count} within what {count} tries of equal submissions give (lead {lead:.3g} "
                f"<= {bound:.3g})")
    else:
        text = (f"best of {count} beyond what {count} tries of equal submissions give (lead {lead:.3g} "
                f"> {bound:.3g})")
    return {"n": count, "metric": name, "direction": direction, "first": first, "best": best, "lead": lead,
            "se": se, "z": best_of_z(count), "bound": bound, "within": within, "label": text}


def interval(report: Mapping[str, Any]) -> str:
    """`X ±Y (95%)` of a report's first metric, or `X, noise unknown`
    (without the reason, which the report's label gives)."""
    found = _first_value(report)
    if found is None:
        return "?"
    se = noise_se(report, found[0])
    return f"{found[2]:.6g} ±{Z95 * se:.3g} (95%)" if se is not None else f"{found[2]:.6g}, noise unknown"
