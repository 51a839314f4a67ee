"""Numbers for people: as many significant digits as it takes to tell
neighbouring values apart, and a change against the best so far."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

LEAST_DIGITS = 6
MOST_DIGITS = 17  # enough for any float to print as itself


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def digits_for(values: Iterable[object], least: int = LEAST_DIGITS) -> int:
    """The fewest significant digits, `least` or more, at which every two
    different numbers among `values` print differently."""
    distinct = {float(v) for v in values if is_number(v)}  # type: ignore[arg-type]
    digits = least
    while digits < MOST_DIGITS and len({f"{v:.{digits}g}" for v in distinct}) < len(distinct):
        digits += 1
    return digits


def shown(value: object, digits: int = LEAST_DIGITS) -> str:
    """`value` at `digits` significant digits; anything not a number as text."""
    return f"{value:.{digits}g}" if is_number(value) else str(value)


def apart(values: Sequence[object], least: int = LEAST_DIGITS) -> list[str]:
    """Each of `values` printed with the digits that tell them all apart."""
    digits = digits_for(values, least)
    return [shown(value, digits) for value in values]


def change(value: object, best: object) -> str:
    """`value - best` for a person, signed, to three significant digits
    (`+5.7e-06`, `-0.0312`), `=` for a tie; empty when either is not a
    number. Whether up is better is the metric's direction."""
    if not (is_number(value) and is_number(best)):
        return ""
    delta = float(value) - float(best)  # type: ignore[arg-type]
    return "=" if delta == 0 else f"{delta:+.3g}"


def better(value: float, best: float, direction: str) -> bool:
    return value < best if direction == "min" else value > best
