"""A/B verdicts: `hills eval SUB --against REF --repeat N` runs the reference
and the candidate in turns on one machine, each run a logged eval marked
as a run of the A/B, and signs one report holding both sets of values, the
difference paired over the same items and seeds with its interval, the
test and the verdict (docs/verdicts.md, docs/noise.md). `decide` is the
pure core the suite simulates."""

from __future__ import annotations

import bisect
import math
import operator
import os
import statistics

from ..base.errors import EXIT_NO, EXIT_OK, UsageError
from ..base.records import frozen
from ..evidence.report import VERDICT_TEST

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from ..run.records import EvalRequest, Outcome
    from ..evidence.report_types import Report

LEVEL = 0.05
VERDICTS = ("improved", "indistinguishable", "worse")
# Up to this many units the sign-flip test counts every pattern (2^16 of them).
EXACT_UP_TO = 16
AGGREGATES = ("mean", "sum", "rms", "median")


@frozen
class Method:
    """How a verdict is reached: the two-sided level, how many random sign
    patterns the test draws above EXACT_UP_TO units, and how many resamples
    the bootstrap interval takes. The suite's simulations draw fewer of
    both: the test holds its level at any count (the observed pattern is
    one of those counted)."""

    level: float = LEVEL
    patterns: int = 20_000
    resamples: int = 2_000


METHOD = Method()


@frozen
class Side:
    """One side's runs of an A/B, in pair order: the first metric's value in
    each run and, where every run reports them, the per-item scores of each
    run and how they aggregate into the metric (one of AGGREGATES)."""

    values: tuple[float, ...]
    items: tuple[Mapping[str, float], ...] | None = None
    aggregate: str = "mean"


@frozen
class Decision:
    """The statistics of an A/B run: the first metric's candidate-minus-
    reference difference per pair; the unit the test ran on (`item` or
    `pair`) and how many there were; the metric's difference with its
    paired bootstrap interval at 1 - `level`; the sign-flip p-value; and
    the verdict."""

    differences: tuple[float, ...]
    unit: str
    units: int
    mean: float
    low: float
    high: float
    p_value: float
    level: float
    verdict: str

    def record(self) -> dict[str, Any]:
        return {"differences": list(self.differences), "unit": self.unit, "units": self.units, "mean": self.mean,
                "ci": [self.low, self.high], "confidence": 1 - self.level, "p_value": self.p_value,
                "level": self.level, "test": VERDICT_TEST, "verdict": self.verdict}


def _signed_sums(units: Sequence[float]) -> list[float]:
    """The sum of `units` under every sign pattern: entry b takes unit k
    negative where bit k of b is set."""
    sums = [0.0]
    for unit in units:
        sums = [total + unit for total in sums] + [total - unit for total in sums]
    return sums


def _exact_p(units: Sequence[float], observed: float, tolerance: float) -> float:
    """The share of all 2^n sign patterns whose |sum| reaches `observed`:
    each pattern of the first half against the sorted sums of the second."""
    middle = len(units) // 2
    first, second = _signed_sums(units[:middle]), sorted(_signed_sums(units[middle:]))
    reach = 0
    for total in first:
        # |total + other| >= observed: other at or above observed - total, or at or below -observed - total.
        reach += len(second) - bisect.bisect_left(second, observed - total - tolerance)
        reach += bisect.bisect_right(second, -observed - total + tolerance)
    return min(1.0, reach / (len(first) * len(second)))


def _random_p(units: Sequence[float], observed: float, tolerance: float, patterns: int) -> float:
    """(1 + the random sign patterns whose |sum| reaches `observed`) over
    (1 + patterns), from a generator seeded by the units, so that the same
    differences give the same p-value. Units go eight to a table of their
    256 signed sums; one random byte picks each table's entry."""
    import random

    tables = [_signed_sums((list(units[start:start + 8]) + [0.0] * 8)[:8]) for start in range(0, len(units), 8)]
    generator = random.Random("sign-flip " + repr(tuple(units)))
    pick, width = operator.getitem, len(tables)
    reach = 0
    for _ in range(patterns):
        reach += abs(math.fsum(map(pick, tables, generator.randbytes(width)))) >= observed - tolerance
    return (1 + reach) / (1 + patterns)


def sign_flip_p(units: Sequence[float], method: Method = METHOD) -> float:
    """The two-sided p-value of the sign-flip permutation test of the mean
    of `units`, paired differences: exact over every pattern up to
    EXACT_UP_TO units, else over `method.patterns` random ones. A pattern
    whose sum ties the observed one counts against it (two equal
    differences: p = 1/2); all-zero differences: p = 1."""
    observed = abs(math.fsum(units))
    # Sums apart by rounding alone are a tie.
    tolerance = 1e-9 * math.fsum(abs(unit) for unit in units)
    if observed <= tolerance:
        return 1.0
    if len(units) <= EXACT_UP_TO:
        return _exact_p(units, observed, tolerance)
    return _random_p(units, observed, tolerance, method.patterns)


def _contribution(value: float, aggregate: str) -> float:
    """An item's share of the metric, in which the metric is a mean (an rms
    is the root of a mean of squares)."""
    return value * value if aggregate == "rms" else value


def _aggregate(contributions: Sequence[float], aggregate: str) -> float:
    if aggregate == "sum":
        return math.fsum(contributions)
    if aggregate == "rms":
        return math.sqrt(math.fsum(contributions) / len(contributions))
    if aggregate == "median":
        return statistics.median(contributions)
    return math.fsum(contributions) / len(contributions)


def _item_keys(reference: Side, candidate: Side) -> list[str] | None:
    """The items every run of both sides scored, when they are the same
    keys in every run and the sides aggregate them alike; else None (the
    unit is then the seed pair)."""
    if reference.items is None or candidate.items is None or reference.aggregate != candidate.aggregate \
            or len(reference.items) != len(reference.values) or len(candidate.items) != len(candidate.values):
        return None
    runs = list(reference.items) + list(candidate.items)
    keys = set(runs[0])
    if len(keys) < 2 or any(set(run) != keys for run in runs):
        return None
    return sorted(keys)


def _per_item(side: Side, keys: Sequence[str]) -> list[float]:
    """Each item's contribution averaged over the side's runs (its seeds)."""
    assert side.items is not None
    runs, count, aggregate = side.items, len(side.items), side.aggregate
    return [math.fsum([_contribution(float(run[key]), aggregate) for run in runs]) / count for key in keys]


def _interval(statistic: Callable[[Sequence[int]], float], count: int, seed: str,
              method: Method) -> tuple[float, float]:
    """The paired bootstrap percentile interval of `statistic` over `count`
    units resampled with replacement (the same draw for both sides)."""
    import random

    generator = random.Random("bootstrap " + seed)
    indices = range(count)
    draws = sorted(statistic(generator.choices(indices, k=count)) for _ in range(method.resamples))
    low = draws[math.floor(method.resamples * method.level / 2)]
    high = draws[max(0, math.ceil(method.resamples * (1 - method.level / 2)) - 1)]
    return low, high


def decide(reference: Side | Sequence[float], candidate: Side | Sequence[float], direction: str,
           method: Method = METHOD) -> Decision:
    """The verdict on paired runs (pair i: run i of each side). Where both
    sides carry items with the same keys, the unit is the item (its
    difference averaged over the seed pairs), else the seed pair. Improved
    when the sign-flip test rejects equality at `method.level`, two-sided,
    with the difference on the better side; worse on the other; else
    indistinguishable. The false "improved" rate is at most level / 2
    wherever the differences are symmetric about 0 under no effect."""
    reference = reference if isinstance(reference, Side) else Side(tuple(float(v) for v in reference))
    candidate = candidate if isinstance(candidate, Side) else Side(tuple(float(v) for v in candidate))
    if len(reference.values) != len(candidate.values) or len(candidate.values) < 2:
        raise ValueError("an A/B verdict needs at least two pairs of values")
    differences = tuple(float(c) - float(r) for r, c in zip(reference.values, candidate.values))
    keys = _item_keys(reference, candidate)
    if keys is None:
        unit, units = "pair", differences

        def statistic(drawn: Sequence[int]) -> float:
            return statistics.fmean(units[index] for index in drawn)

        mean = statistics.fmean(units)
    else:
        aggregate = candidate.aggregate
        ours, theirs = _per_item(candidate, keys), _per_item(reference, keys)
        unit, units = "item", tuple(c - r for c, r in zip(ours, theirs))

        def statistic(drawn: Sequence[int]) -> float:
            return (_aggregate([ours[index] for index in drawn], aggregate)
                    - _aggregate([theirs[index] for index in drawn], aggregate))

        mean = _aggregate(ours, aggregate) - _aggregate(theirs, aggregate)
    p_value = sign_flip_p(units, method)
    low, high = _interval(statistic, len(units), repr(units), method)
    better = math.fsum(units) * (1 if direction == "max" else -1)
    verdict = "indistinguishable" if p_value > method.level or better == 0 else \
        "improved" if better > 0 else "worse"
    return Decision(differences, unit, len(units), mean, low, high, p_value, method.level, verdict)


def order(pairs: int) -> list[tuple[int, str]]:
    """The runs in turns, (pair, side): reference first in even pairs,
    candidate first in odd ones, so that a machine growing slower or faster
    over the run weighs on both sides alike."""
    runs: list[tuple[int, str]] = []
    for pair in range(pairs):
        sides = ("reference", "candidate") if pair % 2 == 0 else ("candidate", "reference")
        runs.extend((pair, side) for side in sides)
    return runs


def _primary(report: Mapping[str, Any]) -> tuple[str, str, float] | None:
    metrics = report.get("metrics") or []
    if not metrics or report.get("status") != "passing":
        return None
    first = metrics[0]
    return first["name"], first["direction"], float(first["value"])


def items_of(report: Mapping[str, Any]) -> tuple[dict[str, float], str] | None:
    """The per-item scores of a report's first metric and their aggregate:
    `items.values` where the report has them, else `instances` (a mean);
    None where it has neither, where a value is not a finite number, where
    the report's `noise` found they do not make the metric, or where the
    metric is a timing one: a busy machine slows every item of a run at
    once, which only the pairs of runs count."""
    noise, metrics, timing = report.get("noise"), report.get("metrics"), report.get("timing_metrics")
    if isinstance(noise, dict) and noise.get("items") is None:
        return None
    first = metrics[0] if isinstance(metrics, list) and metrics and isinstance(metrics[0], dict) else {}
    if isinstance(timing, list) and first.get("name") in timing:
        return None
    found, aggregate = report.get("items"), "mean"
    if isinstance(found, dict) and isinstance(found.get("values"), dict):
        aggregate, found = found.get("aggregate") or "mean", found["values"]
    else:
        found = report.get("instances")
    if isinstance(noise, dict) and isinstance(noise.get("items"), dict):
        aggregate = noise["items"].get("aggregate") or aggregate
    if not isinstance(found, dict) or not found or aggregate not in AGGREGATES:
        return None
    values: dict[str, float] = {}
    for key, value in found.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        values[str(key)] = float(value)
    return values, aggregate


def _side(entry: Mapping[str, Any]) -> Side:
    """The Side of one side's collected runs: items only where every run has them, alike aggregated."""
    found = entry["items"]
    if any(item is None for item in found) or len({aggregate for _, aggregate in found}) != 1:
        return Side(tuple(entry["values"]))
    return Side(tuple(entry["values"]), tuple(values for values, _ in found), found[0][1])


def _with(request: EvalRequest, **changes: Any) -> EvalRequest:
    """`request` with some fields changed (records are frozen)."""
    fields = {name: getattr(request, name) for name in request._fields_}  # type: ignore[attr-defined]
    fields.update(changes)
    return type(request)(**fields)


def run(candidate: EvalRequest, reference_dir: str, pairs: int,
        say: Callable[[str], None]) -> tuple[Mapping[str, Any], int, Outcome | None]:
    """Run the A/B comparison; returns (the signed A/B report, exit code,
    the outcome that stopped it early, if any). Each run is one replicate,
    logged and signed like any eval, its report marked `ab` (its role, its
    pair, the A/B's id) so that it never counts as a version's best."""
    from ..evidence import report as report_module, signing
    from ..run import evaluate
    from ..run.folders import run_id
    from ..evidence.trust import machine_keys

    if pairs < 2:
        raise UsageError(f"--against needs --repeat N with N >= 2 (pairs of runs), got {pairs}",
                         hint="for example --repeat 12: twelve runs of each, in turns")
    if not os.path.isdir(reference_dir):
        raise UsageError(f"--against '{reference_dir}' is not a folder", hint="the reference is a submission folder")
    ab_id = run_id()
    submissions = {"candidate": candidate.submission, "reference": reference_dir}
    sides: dict[str, dict[str, Any]] = {side: {"values": [], "run_ids": [], "submission_hash": None, "items": []}
                                        for side in submissions}
    metric: tuple[str, str] | None = None
    last: Report = {}
    for pair, side in order(pairs):
        say(f"hills: A/B pair {pair + 1} of {pairs}: {side}")
        request = _with(candidate, submission=submissions[side], repeat=1,
                        ab={"role": side, "pair": pair + 1, "of": pairs, "id": ab_id})
        outcome = evaluate.evaluate(request, say=say)
        found = outcome.report
        primary = _primary(found)
        if outcome.error is not None or primary is None:
            return found, outcome.exit_code if outcome.error is not None else EXIT_NO, outcome
        name, direction, value = primary
        if metric is not None and metric != (name, direction):
            raise UsageError(f"the {side} reports metric '{name}' ({direction}), the other side '{metric[0]}' "
                             f"({metric[1]}): an A/B verdict compares one metric")
        metric = (name, direction)
        entry = sides[side]
        entry["values"].append(value)
        entry["run_ids"].append(found.get("run_id"))
        entry["submission_hash"] = found.get("submission_hash")
        entry["items"].append(items_of(found))
        if side == "candidate":
            last = found
    assert metric is not None
    decision = decide(_side(sides["reference"]), _side(sides["candidate"]), metric[1])
    shown = {side: {key: entry[key] for key in ("values", "run_ids", "submission_hash")}
             for side, entry in sides.items()}
    report = {key: last.get(key) for key in ("hill", "tree_hash", "commit", "params", "param_defaults",
                                             "neutral_params", "final", "fingerprint", "tool", "trust")}
    report.update(kind="ab", official=False, official_reason="an A/B verdict, not a score: it ranks nothing",
                  status="passing", passed=True, submission_hash=sides["candidate"]["submission_hash"],
                  metrics=[{"name": metric[0], "direction": metric[1],
                            "value": statistics.median(sides["candidate"]["values"])}],
                  timestamp=report_module.timestamp(), run_id=ab_id,
                  report_version=last.get("report_version"),
                  verdict={"metric": metric[0], "direction": metric[1], "pairs": pairs,
                           "order": "interleaved, reference first in even pairs", **shown, **decision.record()})
    key = machine_keys(for_signing=True)
    report = signing.clean_text(report)
    report["signer"] = key.fingerprint
    report["signature"] = signing.sign(report, key)
    return report, EXIT_OK if decision.verdict == "improved" else EXIT_NO, None
