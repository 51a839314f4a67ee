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
