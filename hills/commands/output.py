"""Where command output goes, git style: plumbing (JSON, ids, tables) on
stdout, human summaries and progress on stderr. Free of click, so the fast
paths print through it too."""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..check import Result


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


def check_line(result: Result) -> str:
    """One check's line, as `hills check` and the commit gate print it."""
    label = {"ok": "ok", "fail": "FAIL", "warn": "warn"}[result.status]
    return f"  {label:<5} {result.name:<19} {result.detail}"
