"""The hill of the text-loop tests (test_metric_lines, test_setup_loop)
and pi-autoresearch's parse of METRIC lines, written out in Python."""

from __future__ import annotations

import math
import re

HILL = "lines"

# Scores loss.txt: `val loss` (min) passes below 1, and `acc` beside it. The
# reason of a failing loss is reason.txt when the submission has one; a file
# `crash` makes the evaluator raise; with say.txt the evaluator prints it (an
# evaluator that echoes what it read, as many do).
EVALUATOR = """\
    from pathlib import Path

    def eval(submission, *, final=False, **params):
        folder = Path(submission)
        if (folder / "say.txt").exists():
            print((folder / "say.txt").read_text())
        if (folder / "crash").exists():
            raise RuntimeError("the evaluator broke")
        loss = float((folder / "loss.txt").read_text())
        reason = (folder / "reason.txt").read_text() if (folder / "reason.txt").exists() else "loss too high"
        return {
            "passed": loss < 1,
            "metrics": [{"name": "val loss", "value": loss, "direction": "min"},
                        {"name": "acc", "value": 1 - loss / 10, "direction": "max"}],
            "config": [{"name": "mode", "value": "holdout" if final else "validation", "primary": True}],
            "details": {} if loss < 1 else {"reason": reason},
        }
    """
METRICS = """\
    metrics:
      - name: val loss
        direction: min
        floor: 0
      - name: acc
        direction: max
    """

# pi-autoresearch's parseMetricLines (extensions/pi-autoresearch): the line
# regex (JavaScript's \w is ASCII), a value kept only when Number() of it is
# finite, the last line of a name winning.
PI_METRIC = re.compile(r"^METRIC\s+([\w.µ]+)=(\S+)\s*$", re.MULTILINE | re.ASCII)


def pi_parse(output: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for name, text in PI_METRIC.findall(output):
        try:
            value = float(text)
        except ValueError:
            continue
        if math.isfinite(value):
            found[name] = value
    return found
