"""ShinkaEvolve's evaluate.py, hills behind it (docs/adapters.md).

ShinkaEvolve runs `python evaluate.py --program_path P --results_dir D` for
each candidate and reads D/metrics.json and D/correct.json. Point
`eval_program_path` at this file with HILLS_LOOP_HILL set (or pass
`--hill NAME` through the job's `extra_cmd_args`), or at a binding file
(`binding_file(NAME)`, printed by `python -m hills.adapters shinka NAME`).
`correct` is whether the report passed; `combined_score` its fitness (a
`min` metric negated) when it did, the floor when not; `text_feedback` says
the status and the reason; `public` holds the metrics, `private` the
report's identity. A refusal before scoring writes the same two files,
`correct` false with the refusal as its error, and exits with hills' code.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Sequence

# Run as a script, this folder is the first entry of sys.path; the imports
# below are absolute, and no module here is named as a top-level package.
from hills.adapters import loopcore
from hills.base.errors import HillsError

LOOP = "shinka"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="evaluate.py", description="Evaluate one ShinkaEvolve candidate with hills.")
    parser.add_argument("--program_path", required=True, help="the candidate program")
    parser.add_argument("--results_dir", required=True, help="where metrics.json and correct.json go")
    parser.add_argument("--hill", default=None, help=f"the hill (default: ${loopcore.HILL_VARIABLE})")
    parser.add_argument("--file", default=None,
                        help=f"the candidate's name inside the submission (default: ${loopcore.FILE_VARIABLE}, "
                             "else the hill's)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, hill: str | None = None) -> int:
    """Evaluate --program_path, write the two files, return the exit code."""
    args = parse(argv)
    bound = None
    try:
        bound = loopcore.binding(LOOP, args.hill or hill, file=args.file)
        reading = loopcore.evaluate_file(args.program_path, bound)
    except HillsError as exc:
        floor = bound.floor if bound is not None else -math.inf
        write_results(args.results_dir, refused_metrics(exc, floor), correct=False, error=exc.message)
        sys.stderr.write(f"error: {exc.message}\n" + (f"hint: {exc.hint}\n" if exc.hint else ""))
        return exc.exit_code
    metrics, correct, error = results_of(reading)
    write_results(args.results_dir, metrics, correct=correct, error=error)
    return 0


def results_of(reading: loopcore.Reading) -> tuple[dict[str, Any], bool, str | None]:
    """metrics.json's object, correct.json's `correct` and `error`."""
    report = reading.report
    public: dict[str, Any] = {**reading.metrics, "status": report.status}
    if report.reason:
        public["reason"] = report.reason
    private = {key: report.data.get(key) for key in ("run_id", "hill", "tree_hash", "submission_hash", "official")}
    metrics = {"combined_score": reading.score, "public": public, "private": private,
               "text_feedback": reading.feedback}
    return metrics, reading.passed, None if reading.passed else (report.reason or report.status)


def refused_metrics(exc: HillsError, floor: float) -> dict[str, Any]:
    return {"combined_score": floor, "public": {"status": "refused"}, "private": {},
            "text_feedback": f"refused: {exc.message}"}


def write_results(results_dir: str, metrics: dict[str, Any], *, correct: bool, error: str | None) -> None:
    # A floor of -inf is written as -Infinity, which ShinkaEvolve's json.load reads back.
    os.makedirs(results_dir, exist_ok=True)
    for name, content in (("metrics.json", metrics), ("correct.json", {"correct": correct, "error": error})):
        path = os.path.join(results_dir, name)
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(content, handle, indent=2, allow_nan=True)
        os.replace(path + ".tmp", path)


def binding_file(hill: str) -> str:
    """The text of an evaluate.py that binds `hill`, for ShinkaEvolve's
    `eval_program_path` (no environment needed)."""
    return (f'"""ShinkaEvolve\'s evaluate.py for hill {hill!r}: hills.adapters.shinka_eval, bound."""\n'
            "from hills.adapters.shinka_eval import main\n"
            f"raise SystemExit(main(hill={hill!r}))\n")


if __name__ == "__main__":
    raise SystemExit(main())
