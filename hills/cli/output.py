"""Where command output goes, git style: plumbing (JSON, ids, tables) on
stdout, human summaries and progress on stderr. Free of click, so the fast
paths print through it too."""

from __future__ import annotations

import json
import os
import sys

from ..base import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..checks.shared import Result
    from ..base.progress import Progress


def _write(stream_name: str, message: str) -> None:
    # Looked up per call: a caller may have redirected the stream.
    stream = getattr(sys, stream_name)
    if stream is None:
        return
    stream.write(f"{message}\n")
    stream.flush()


def say(message: str = "") -> None:
    """Human output: stderr."""
    _write("stderr", message)


def emit(message: str = "") -> None:
    """Plumbing output: stdout."""
    _write("stdout", message)


def emit_json(value: object) -> None:
    emit(json.dumps(value, indent=2, ensure_ascii=False))


def compact_json(value: object, indent: int = 2, depth: int = 0, width: int = 100) -> str:
    """JSON indented as json.dumps(indent=2) indents it, but shorter: an
    array of plain values (numbers, strings, booleans, null) stays on one
    line, a mapping or array that fits in `width` columns too, and the
    items of one that holds only plain values or such arrays are packed a
    few to a line: a report's picture of 26 circles takes 6 lines, not 130."""
    one_line = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list, tuple)) or not value or _plain(value) or (
            depth > 0 and indent * depth + len(one_line) <= width):
        return one_line
    pad = " " * (indent * (depth + 1))
    if isinstance(value, dict):
        items = [f"{json.dumps(key, ensure_ascii=False)}: {compact_json(item, indent, depth + 1, width)}"
                 for key, item in value.items()]
        inner: list[object] = list(value.values())
    else:
        items = [compact_json(item, indent, depth + 1, width) for item in value]
        inner = list(value)
    if all(not isinstance(item, (dict, list, tuple)) or _plain(item) for item in inner):
        lines = _packed(items, width - len(pad))
    else:
        lines = items
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return opening + "\n" + ",\n".join(pad + line for line in lines) + "\n" + " " * (indent * depth) + closing


def _plain(values: object) -> bool:
    """An array of plain values (no mapping or array inside)."""
    return isinstance(values, (list, tuple)) and all(not isinstance(item, (dict, list, tuple)) for item in values)


def _packed(items: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += ", " + item
        else:
            lines.append(item)
    return lines


def check_teller(shown: Progress, put: Callable[[str], object]) -> Callable[[Result], None]:
    """What `check.run_checks` tells as each check finishes: its line,
    through `put`, and on the live line the check now running."""
    from ..checks.check import next_check

    def tell(result: Result) -> None:
        shown.write(put, check_line(result))
        following = next_check(result.name)
        if following is not None:
            shown.phase(f"check '{following}'")

    return tell


def check_line(result: Result) -> str:
    """One check's line, as `hills check` and the commit gate print it."""
    label = {"ok": "ok", "fail": "FAIL", "warn": "warn"}[result.status]
    return f"  {label:<5} {result.name:<19} {result.detail}"


def check_output_path(output: str) -> None:
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise errors.UsageError(f"cannot write the report to '{output}': folder '{folder}' does not exist")
