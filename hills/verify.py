"""Checking report signatures, the core of `hills verify` and `hills show`:
free of click and YAML, so `hills verify` starts about as fast as the
interpreter."""

from . import signing, state
from .errors import HillsError

INVALID_TEXT = "this report was edited, or it was signed on another machine"
NO_KEY_HINT = ("a report verifies only with the key of the machine that signed it: run 'hills verify' there, "
               "or set HILLS_HOME to that machine's state")


def no_key_reason() -> str:
    """Why nothing verifies on a machine that has no key yet (and gets none)."""
    return f"no machine key to check it with ('{state.key_path()}' does not exist)"


def verdict(report: dict, key: bytes | None) -> tuple[bool, str]:
    """(ok, reason) for one parsed report; `key` None means this machine has none."""
    if key is None:
        return False, no_key_reason()
    return signing.verify(report, key)


def check(paths: list[str] | tuple[str, ...],
          key: bytes | None = None) -> list[tuple[str, bool, str, dict | None]]:
    """[(path, ok, reason, report_or_None)] for each path."""
    key = key or state.existing_key()
    results: list[tuple[str, bool, str, dict | None]] = []
    for path in paths:
        try:
            report = signing.load_report(path)
        except HillsError as exc:
            results.append((path, False, exc.message, None))
            continue
        ok, reason = verdict(report, key)
        results.append((path, ok, reason, report))
    return results
