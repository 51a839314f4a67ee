"""`hills eval SUB --against REF --repeat N`: the A/B run's report and verdict
(the core is hills/many/verdict.py)."""

from __future__ import annotations

from ..base.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..run.records import EvalRequest


def command(request: EvalRequest, against: str, repeat: int | None, *, output: str | None, as_json: bool,
            quiet: bool, summary_only: bool = False) -> int:
    """`hills eval SUB --against REF`: the A/B report on stdout (none with
    --summary-only) and in FILE, its verdict on stderr; exit 0 when
    improved, 1 otherwise."""
    import json

    from ..base import state
    from ..evidence.report import verdict_line
    from ..many.verdict import run
    from ..cli.output import emit, say

    if repeat is None:
        raise UsageError("--against needs --repeat N (N >= 2): how many runs of each side",
                         hint="for example --repeat 12")
    report, code, stopped = run(request, against, repeat, say if not quiet else (lambda message: None))
    text = json.dumps(report, indent=None if as_json else 2, ensure_ascii=False)
    if output:
        state.atomic_write(output, text + "\n")
    if not summary_only:
        emit(text)
    if stopped is not None:
        if stopped.error is not None:
            raise stopped.error
        if not quiet:
            say(f"hills: the A/B run stopped: a run was {report.get('status')}: {report.get('reason')}")
        return code
    if not quiet:
        say(verdict_line(report))
    return code
