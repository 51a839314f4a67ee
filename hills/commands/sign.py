"""`hills sign`: sign a self-reported result, or check reports."""

import json
import sys

import click

from ..base import errors
from ..cli.options import CONTEXT
from ..cli.output import emit

STDIN_HINT = "echo '{\"score\": 1}' | hills-sign"


@click.command("sign", context_settings=CONTEXT)
@click.option("--verify", "verify_paths", metavar="REPORT", multiple=True,
              help="Check REPORT's signature instead (same as 'hills verify').")
def command(verify_paths: tuple[str, ...]) -> int:
    """Sign a JSON object from stdin as an unofficial, self-reported report.

    The output always carries official: false and trust: "self-reported":
    signing is not a way around the evaluator. With --verify, checks reports
    exactly like 'hills verify'.
    """
    from ..evidence import signing

    if verify_paths:
        from . import verify

        return verify.run(verify_paths)
    if sys.stdin.isatty():
        raise errors.UsageError("hills-sign reads a JSON object on stdin", hint=STDIN_HINT)
    try:
        payload = signing.parse_report(sys.stdin.read(), "<stdin>")
    except errors.UsageError as exc:
        raise errors.UsageError(exc.message, hint=exc.hint or f"hills-sign reads one JSON object on stdin: "
                                                               f"{STDIN_HINT}") from None
    from ..evidence.trust import machine_keys

    render(signing.self_reported(payload, machine_keys(for_signing=True)))
    return errors.EXIT_OK


def render(signed: dict) -> None:
    """The signed report, as JSON on stdout."""
    emit(json.dumps(signed, indent=2, ensure_ascii=False))
