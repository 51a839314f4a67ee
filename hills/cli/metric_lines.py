"""The text `hills eval --metric-lines` and `--colon-lines` print on stdout
in place of the report, for the loops that read a score as text
(docs/metric-lines.md): one line per metric of a scored report, the
primary first, then whether it passed and whether it is official."""

from __future__ import annotations

import contextlib
import math
import re

from ..base.errors import HillsError
from ..base.records import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

# The two shapes: pi-autoresearch's `METRIC name=value`, and the `name: value`
# that karpathy/autoresearch's program greps for (`grep "^val_bpb:" run.log`).
METRIC, COLON = "metric", "colon"
PASSED, OFFICIAL = "hills.passed", "hills.official"
# Only these statuses carry a score a loop may climb. An implausible score is
# one no honest submission reaches (a loophole, not a record); buggy, refused
# and interrupted evals have none. For the rest no line is printed at all, so
# a loop that finds no line takes the eval for a crash, as it should.
SCORED = frozenset({"passing", "failing"})
# pi-autoresearch reads a name as `[\w.µ]+` (JavaScript's \w: ASCII only), and
# a value as a JavaScript Number; anything else in a name would lose the line.
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.]")
MAX_REASON = 500


@frozen
class Lines:
    """The lines for one report, and the metrics left out of them (a value
    that is not a finite number, a name that reads as an earlier line's)."""

    lines: tuple[str, ...]
    left_out: tuple[str, ...] = ()


def line_name(name: str) -> str:
    """A metric's name as the loops' parsers read it: each character other
    than an ASCII letter, digit, `_` or `.` becomes `_`."""
    return _NOT_IN_NAME.sub("_", name) or "_"


def number_text(value: object) -> str | None:
    """A metric's value as text every loop parses as the same number
    (Python's shortest round-trip form), or None when it is not a finite
    number. The value is the report's own: a `min` metric is not negated."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    return str(value)


def render(report: Mapping[str, Any], style: str) -> Lines:
    """The lines for `report` in `style` (METRIC or COLON); none unless its
    status is one that SCORED names."""
    if report.get("status") not in SCORED:
        return Lines(())
    taken = {PASSED, OFFICIAL}
    pairs: list[tuple[str, str]] = []
    left_out: list[str] = []
    for metric in report.get("metrics") or []:
        name, text = line_name(str(metric.get("name"))), number_text(metric.get("value"))
        if text is None or name in taken:
            left_out.append(str(metric.get("name")))
            continue
        taken.add(name)
        pairs.append((name, text))
    pairs.append((PASSED, "1" if report.get("passed") is True else "0"))
    pairs.append((OFFICIAL, "1" if report.get("official") is True else "0"))
    shaped = [f"METRIC {name}={text}" if style == METRIC else f"{name}: {text}" for name, text in pairs]
    return Lines(tuple(shaped), tuple(left_out))


def one_line(text: str, limit: int | None = MAX_REASON) -> str:
    """`text` on one line: every character that would start or end a line
    for some reader (newlines, U+2028, other controls) becomes a space, so
    that nothing in it can read as a line of its own; cut to `limit`."""
    flat = "".join(char if char.isprintable() else " " for char in text)
    return flat if limit is None or len(flat) <= limit else flat[:limit - 1] + "…"


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Put the message and hint of a HillsError raised inside on one line
    each, before the error funnel prints them beside the lines."""
    try:
        yield
    except HillsError as exc:
        exc.message = one_line(exc.message, None)
        exc.hint = one_line(exc.hint, None) if exc.hint else exc.hint
        raise
