"""`hills verify`: check report signatures. Declared as plain data
(hills.cli.fast), so it starts without click or YAML, about as fast
as the interpreter."""

from __future__ import annotations

import sys

from ..base import errors
from ..cli import fast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    from ..evidence.signing import Verdict

HELP = """Check the signature of each REPORT file ('-' reads stdin).

    Prints 'signature valid' with the verdict, the signer (this machine, or
    the name 'hills trust add' gave a key, and its fingerprint) and the
    trust mode the report claims, or 'signature INVALID' with the reason:
    edited, signed by a key this machine does not trust (named by its
    fingerprint), or claiming trust 'service' with a key not trusted as a
    service's ('hills trust add --service'). Needs only public keys and
    never creates a key. Exits 1 if any report is INVALID.

    With --export DIR (one REPORT), also writes DIR/message,
    DIR/report.sig and DIR/allowed_signers, and prints the ssh-keygen
    command that checks the report with OpenSSH alone.
    """

DECLARED = fast.Declared("verify", HELP, [
    fast.Option("export", "--export", metavar="DIR",
                help="Write message, report.sig and allowed_signers to DIR for ssh-keygen -Y verify."),
    fast.Argument("reports", metavar="REPORT...", many=True),
])


def run(reports: tuple[str, ...], export: str | None = None) -> int:
    """The command: one verdict per report on stdout."""
    from ..evidence import verify

    if export is not None:
        if len(reports) != 1:
            raise errors.UsageError(f"--export writes one report's files, got {len(reports)} reports",
                                    hint="pass one REPORT with --export DIR")
        found, command = verify.export(export, reports[0])
        if not found.ok:
            return render([(reports[0], found, {})])
        sys.stdout.write(f"signature valid: exported to '{export}'; with OpenSSH alone, in that folder:\n"
                         f"  {command}\n")
        return errors.EXIT_OK
    return render(verify.check(reports))


def render(results: list[tuple[str, Verdict, dict | None]], out: TextIO | None = None,
           err: TextIO | None = None) -> int:
    """Print one verdict per (path, verdict, report) of verify.check;
    return the exit code: 1 if any is INVALID, 2 if any file could not be
    read as a report at all."""
    from ..evidence.report import subject_line, summary_line
    from ..evidence.signing import NOT_A_SERVICE_KEY
    from ..evidence.verify import LEGACY_HINT, SERVICE_KEY_HINT, UNTRUSTED_HINT, signer_text, trust_text

    # Looked up per call: a default bound at import would miss a redirected stdout.
    out = out or sys.stdout
    err = err or sys.stderr
    worst = errors.EXIT_OK
    hints: list[str] = []
    for path, found, report in results:
        label = f"  ({path})" if len(results) > 1 else ""
        if found.ok and report is not None:
            out.write(f"signature valid: {subject_line(report)}{label}\n")
            if "metrics" in report:
                out.write(f"  {summary_line(report)}\n")
            tool = report.get("tool") or {}
            who = f"hills {tool.get('version')}" if tool.get("version") else "hills"
            why = report.get("official_reason") or report.get("trust")
            trust = "" if report.get("official") else f"  [unofficial: {why}]"
            out.write(f"  signed {report.get('timestamp', '?')} by {who}{trust}\n")
            out.write(f"  key: {signer_text(found, report)}\n")
            out.write(f"  trust: {trust_text(report)}\n")
        elif report is None:
            # Not a report (missing, not JSON): a usage error, not a verdict.
            worst = errors.EXIT_USAGE
            out.flush()
            err.write(f"error: {found.reason}\nhint: pass a report as 'hills eval -o FILE' writes it, "
                      "or '-' to read one on standard input\n")
        else:
            worst = max(worst, errors.EXIT_NO)
            if found.reason == "no signature":
                out.write(f"signature INVALID: the report carries no signature{label}\n")
            else:
                reason = found.reason if found.reason.startswith("signature INVALID") \
                    else f"signature INVALID: {found.reason}"
                out.write(f"{reason}{label}\n")
            if "does not trust" in found.reason and UNTRUSTED_HINT not in hints:
                hints.append(UNTRUSTED_HINT)
            if "old HMAC secret this machine does not have" in found.reason and LEGACY_HINT not in hints:
                hints.append(LEGACY_HINT)
            if NOT_A_SERVICE_KEY in found.reason and SERVICE_KEY_HINT not in hints:
                hints.append(SERVICE_KEY_HINT)
    out.flush()
    for hint in hints:
        err.write(f"hint: {hint}\n")
    err.flush()
    return worst


def __getattr__(name: str) -> object:
    # The click command is built on first use: the fast path never needs it.
    if name == "command":
        return DECLARED.click_command(run)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
