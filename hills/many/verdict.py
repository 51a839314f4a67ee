"""A/B verdicts: `hills eval SUB --against REF --repeat N` runs the reference
and the candidate in turns on one machine, each run an ordinary logged
eval, and signs one report holding both sets of values, the paired
difference with its confidence interval, the test and the verdict
(docs/verdicts.md)."""

from __future__ import annotations

import math
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


@frozen
class Decision:
    """The statistics of an A/B run: the paired differences' mean, its
    confidence interval at 1 - `level`, the p-value, and the verdict."""

    differences: tuple[float, ...]
    mean: float
    low: float
    high: float
    p_value: float
    level: float
    verdict: str

    def record(self) -> dict[str, Any]:
        return {"differences": list(self.differences), "mean": self.mean,
                "ci": [self.low, self.high], "confidence": 1 - self.level, "p_value": self.p_value,
                "level": self.level, "test": VERDICT_TEST, "verdict": self.verdict}


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    return _betainc(df / 2, 0.5, df / (df + t * t))


_QUANTILES: dict[tuple[float, int], float] = {}


def t_quantile(probability: float, df: int) -> float:
    """The `probability` quantile of Student's t (above 0.5), by bisection."""
    if (probability, df) not in _QUANTILES:
        _QUANTILES[(probability, df)] = _t_quantile(probability, df)
    return _QUANTILES[(probability, df)]


def _t_quantile(probability: float, df: int) -> float:
    target = 2 * (1 - probability)  # the two-sided tail at that quantile
    low, high = 0.0, 1e3
    for _ in range(200):
        middle = (low + high) / 2
        if t_two_sided_p(middle, df) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def decide(reference: Sequence[float], candidate: Sequence[float], direction: str,
           level: float = LEVEL) -> Decision:
    """The verdict on paired values (pair i: reference[i], candidate[i]):
    improved when the confidence interval of the mean difference lies wholly
    on the better side of 0, worse when wholly on the other, else
    indistinguishable. The false "improved" rate is at most level / 2."""
    if len(reference) != len(candidate) or len(candidate) < 2:
        raise ValueError("an A/B verdict needs at least two pairs of values")
    differences = tuple(float(c) - float(r) for r, c in zip(reference, candidate))
    n = len(differences)
    mean = statistics.fmean(differences)
    spread = statistics.stdev(differences)
    if spread == 0:
        low = high = mean
        p_value = 1.0 if mean == 0 else 0.0
    else:
        error = spread / math.sqrt(n)
        half = t_quantile(1 - level / 2, n - 1) * error
        low, high = mean - half, mean + half
        p_value = t_two_sided_p(mean / error, n - 1)
    sign = 1 if direction == "max" else -1
    if (low > 0 if sign > 0 else high < 0):
        verdict = "improved"
    elif (high < 0 if sign > 0 else low > 0):
        verdict = "worse"
    else:
        verdict = "indistinguishable"
    return Decision(differences, mean, low, high, p_value, level, verdict)


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


def _with(request: EvalRequest, **changes: Any) -> EvalRequest:
    """`request` with some fields changed (records are frozen)."""
    fields = {name: getattr(request, name) for name in request._fields_}  # type: ignore[attr-defined]
    fields.update(changes)
    return type(request)(**fields)


def run(candidate: EvalRequest, reference_dir: str, pairs: int,
        say: Callable[[str], None]) -> tuple[Mapping[str, Any], int, Outcome | None]:
    """Run the A/B comparison; returns (the signed A/B report, exit code,
    the outcome that stopped it early, if any). Each run is one replicate,
    logged and signed like any eval."""
    from ..evidence import report as report_module, signing
    from ..run import evaluate
    from ..evidence.trust import machine_keys

    if pairs < 2:
        raise UsageError(f"--against needs --repeat N with N >= 2 (pairs of runs), got {pairs}",
                         hint="for example --repeat 12: twelve runs of each, in turns")
    if not os.path.isdir(reference_dir):
        raise UsageError(f"--against '{reference_dir}' is not a folder", hint="the reference is a submission folder")
    requests = {"candidate": _with(candidate, repeat=1),
                "reference": _with(candidate, submission=reference_dir, repeat=1)}
    sides: dict[str, dict[str, Any]] = {side: {"values": [], "run_ids": [], "submission_hash": None}
                                        for side in requests}
    metric: tuple[str, str] | None = None
    last: Report = {}
    for pair, side in order(pairs):
        say(f"hills: A/B pair {pair + 1} of {pairs}: {side}")
        outcome = evaluate.evaluate(requests[side], say=say)
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
        if side == "candidate":
            last = found
    assert metric is not None
    decision = decide(sides["reference"]["values"], sides["candidate"]["values"], metric[1])
    report = {key: last.get(key) for key in ("hill", "tree_hash", "commit", "params", "param_defaults",
                                             "neutral_params", "final", "fingerprint", "tool", "trust")}
    report.update(kind="ab", official=False, official_reason="an A/B verdict, not a score: it ranks nothing",
                  status="passing", passed=True, submission_hash=sides["candidate"]["submission_hash"],
                  metrics=[{"name": metric[0], "direction": metric[1],
                            "value": statistics.median(sides["candidate"]["values"])}],
                  timestamp=report_module.timestamp(),
                  report_version=last.get("report_version"),
                  verdict={"metric": metric[0], "direction": metric[1], "pairs": pairs,
                           "order": "interleaved, reference first in even pairs",
                           "candidate": sides["candidate"], "reference": sides["reference"], **decision.record()})
    key = machine_keys(for_signing=True)
    report = signing.clean_text(report)
    report["signer"] = key.fingerprint
    report["signature"] = signing.sign(report, key)
    return report, EXIT_OK if decision.verdict == "improved" else EXIT_NO, None
