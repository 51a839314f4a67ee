"""OpenEvolve's evaluator file, hills behind it (docs/adapters.md).

OpenEvolve loads its evaluator by path and calls `evaluate(program_path)`
on one file per candidate. Point `evaluator_file` at this module's path with
HILLS_LOOP_HILL set, or at a binding file (`binding_file(NAME)`, printed by
`python -m hills.adapters openevolve NAME`). Each call builds a submission
folder from the program, evaluates it with hills.api (signed and logged)
and returns an EvaluationResult: `combined_score` is the report's fitness
(a `min` metric negated) when it passed, the floor when it did not, and a
report where nothing was judged (buggy) carries OpenEvolve's `error` key;
the status, the reason and the details go back as artifacts.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from hills.adapters import loopcore

LOOP = "openevolve"


def evaluate(program_path: str) -> Any:
    """OpenEvolve's entry point: evaluate the program at `program_path` on
    the hill the environment names (HILLS_LOOP_HILL and the other
    HILLS_LOOP_* variables, read at each call)."""
    return evaluate_with(loopcore.binding(LOOP), program_path)


def bind(hill: str, **options: Any) -> Callable[[str], Any]:
    """An `evaluate(program_path)` bound to `hill`; `options` are
    loopcore.binding's (file, base, floor, params), the environment
    filling the rest."""
    bound = loopcore.binding(LOOP, hill, **options)

    def evaluate(program_path: str) -> Any:
        return evaluate_with(bound, program_path)

    return evaluate


def evaluate_with(bound: loopcore.Binding, program_path: str) -> Any:
    return result_of(loopcore.evaluate_file(program_path, bound))


def result_of(reading: loopcore.Reading) -> Any:
    """The reading as OpenEvolve's EvaluationResult (its metrics dict where
    OpenEvolve cannot be imported)."""
    report = reading.report
    metrics: dict[str, Any] = {"combined_score": reading.score, **reading.metrics,
                               "passed": 1.0 if reading.passed else 0.0}
    if reading.error:
        # OpenEvolve's own failure shape: the key's presence marks it
        # (its early stopping and its logs skip such results).
        metrics["error"] = 0.0
    artifacts = {
        "hills_status": report.status,
        "hills_feedback": reading.feedback,
        "hills_reason": report.reason or "",
        "hills_details": loopcore.details_text(report),
        "hills_report": json.dumps({key: report.data.get(key) for key in
                                    ("run_id", "hill", "tree_hash", "submission_hash", "official")},
                                   sort_keys=True),
    }
    try:
        from openevolve.evaluation_result import EvaluationResult
    except ImportError:
        return metrics
    return EvaluationResult(metrics=metrics, artifacts=dict(artifacts))


def binding_file(hill: str) -> str:
    """The text of an evaluator file that binds `hill`, for OpenEvolve's
    `evaluator_file` (no environment needed)."""
    return (f'"""OpenEvolve\'s evaluator for hill {hill!r}: hills.adapters.openevolve_eval, bound."""\n'
            "from hills.adapters.openevolve_eval import bind\n"
            f"evaluate = bind({hill!r})\n")
