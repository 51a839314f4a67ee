"""`hills verify`: check report signatures. Declared as plain data
(hills.commands.fast), so it starts without click or YAML, about as fast
as the interpreter."""

from __future__ import annotations

import sys

from .. import errors
from . import fast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

HELP = """Check the signature of each REPORT file ('-' reads stdin).

    Prints 'signature valid' with the verdict for each, or 'signature
    INVALID' when a report was edited or signed with another machine's key.
    Exits 1 if any report is INVALID.
    """

DECLARED = fast.Declared("verify", HELP, [fast.Argument("reports", metavar="REPORT...", many=True)])


def run(reports: tuple[str, ...]) -> int:
    """The command: one verdict per report on stdout."""
    from .. import verify

    return render(verify.check(reports))


def render(results: list[tuple], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Print one verdict per (path, ok, reason, report) of verify.check;
    return the exit code: 1 if any is INVALID, 2 if any file could not be
    read as a report at all."""
    from ..report import subject_line, summary_line
    from ..verify import INVALID_TEXT, NO_KEY_HINT, no_key_reason

    # Looked up per call: a default bound at import would miss a redirected stdout.
    out = out or sys.stdout
    err = err or sys.stderr
    worst = errors.EXIT_OK
    no_key = False
    for path, ok, reason, report in results:
        label = f"  ({path})" if len(results) > 1 else ""
        if ok:
            out.write(f"signature valid: {subject_line(report)}{label}\n")
            if "metrics" in report:
                out.write(f"  {summary_line(report)}\n")
            tool = report.get("tool") or {}
            who = f"hills {tool.get('version')}" if tool.get("version") else "hills"
            trust = "" if report.get("official") else f"  [unofficial: {report.get('official_reason') or report.get('trust')}]"
            out.write(f"  signed {report.get('timestamp', '?')} by {who}{trust}\n")
        elif report is None:
            # Not a report (missing, not JSON): a usage error, not a verdict.
            worst = errors.EXIT_USAGE
            out.flush()
            err.write(f"error: {reason}\nhint: pass a report as 'hills eval -o FILE' writes it, "
                      "or '-' to read one on standard input\n")
        else:
            worst = max(worst, errors.EXIT_NO)
            if reason == "no signature":
                out.write(f"signature INVALID: the report carries no signature{label}\n")
            elif reason == no_key_reason():
                no_key = True
                out.write(f"signature INVALID: {reason}{label}\n")
            else:
                out.write(f"signature INVALID: {INVALID_TEXT}{label}\n")
    out.flush()
    if no_key:
        err.write(f"hint: {NO_KEY_HINT}\n")
    err.flush()
    return worst


def __getattr__(name: str) -> object:
    # The click command is built on first use: the fast path never needs it.
    if name == "command":
        return DECLARED.click_command(run)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
