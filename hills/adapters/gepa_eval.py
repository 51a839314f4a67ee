"""GEPA's evaluator, hills behind it (docs/adapters.md).

`gepa.optimize_anything(seed_candidate=..., evaluator=evaluator("NAME"))`:
GEPA calls the evaluator with each candidate, a str (the one file of the
submission, named as loopcore.candidate_file says) or a dict of
{name inside the submission: text}, and takes back `(score, side_info)`.
The score is the report's fitness (a `min` metric negated) when it passed,
the floor when not; side_info carries the feedback line, the status, the
reason (as `Error` when nothing was judged, GEPA's own key for it) and
the details.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from hills.adapters import loopcore
from hills.base.errors import UsageError

LOOP = "gepa"

Evaluator = Callable[[Any], "tuple[float, dict[str, Any]]"]


def evaluator(hill: str | None = None, **options: Any) -> Evaluator:
    """An evaluator for optimize_anything bound to `hill` (HILLS_LOOP_HILL
    when None); `options` are loopcore.binding's (file, base, floor,
    params), the environment filling the rest."""
    bound = loopcore.binding(LOOP, hill, **options)

    def evaluate(candidate: str | Mapping[str, str]) -> tuple[float, dict[str, Any]]:
        return evaluate_with(bound, candidate)

    return evaluate


def evaluate_with(bound: loopcore.Binding, candidate: str | Mapping[str, str]) -> tuple[float, dict[str, Any]]:
    if isinstance(candidate, str):
        files: Mapping[str, str] = {loopcore.candidate_file(bound): candidate}
    elif isinstance(candidate, Mapping) and candidate and all(isinstance(text, str) for text in candidate.values()):
        files = candidate
    else:
        raise UsageError(f"a GEPA candidate must be a str or a dict of file names to text, "
                         f"got {type(candidate).__name__}",
                         hint="pass seed_candidate as the file's text, or as {name: text}")
    return side_info_of(loopcore.evaluate_files(files, bound))


def side_info_of(reading: loopcore.Reading) -> tuple[float, dict[str, Any]]:
    report = reading.report
    side_info: dict[str, Any] = {"Feedback": reading.feedback, "status": report.status,
                                 "metrics": reading.metrics, "details": report.details,
                                 "run_id": report.data.get("run_id")}
    if report.reason:
        side_info["Error" if reading.error else "Reason"] = report.reason
    return reading.score, side_info


def binding_file(hill: str) -> str:
    """The text of a module that binds `hill`: `from FILE import evaluate`
    gives optimize_anything its evaluator."""
    return (f'"""GEPA\'s evaluator for hill {hill!r}: hills.adapters.gepa_eval, bound."""\n'
            "from hills.adapters.gepa_eval import evaluator\n"
            f"evaluate = evaluator({hill!r})\n")
