"""`hills eval`: score a submission folder against a hill's committed
evaluator. Declared as plain data (hills.cli.fast), so an ordinary
call parses and runs without importing click."""

from __future__ import annotations

import json
import sys

from ..base import errors
from ..base.records import frozen
from ..cli import fast
from ..cli.output import check_output_path, compact_json, emit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


    from ..run.records import EvalRequest, Outcome
    from ..disk.hill import Hill
    from ..evidence.report_types import Report
    from ..run.standby import Standby

HELP = """Score the submission folder DIR against a hill's committed evaluator.

    Pins the hill's HEAD (a dirty hill is an error), verifies private data
    against the locks, snapshots and hashes DIR, runs the evaluator in its
    own process group under the watchdog, and prints the signed report as
    JSON on stdout with a short summary on stderr. Every outcome, crash or
    refusal included, is appended to the hill version's attempts log.
    Exits 0 when the submission passed, 1 when it did not, 5 when the hill
    allowed no score (uncommitted changes, no commit, lock drift, a spent
    holdout budget).

    With several DIRs, each is scored in turn, or with --on as tasks on a
    Ray cluster, each report verified here; the reports are JSON lines on
    stdout, one per DIR in the order given, and the exit code is the worst
    of theirs (130, 3, 4, 2, 5, 1, 0, worst first).
    """

DECLARED = fast.Declared("eval", HELP, [
    fast.Argument("submissions", metavar="DIR...", many=True, kind=fast.PathKind(file_okay=False)),
    fast.Option("hill_name", "-H", "--hill", metavar="NAME", required=True, help="The hill to score against."),
    fast.Option("params", "-p", "--param", metavar="NAME=VALUE", multiple=True,
                help="Set a param declared in hill.yaml (repeatable); typed and bounded."),
    fast.Option("final", "--final", flag=True,
                help="Holdout mode: counted per hill version, against the final budget; under "
                     "final.mode reusable, the validation score unless the holdout differs (a release)."),
    fast.Option("force", "--force", flag=True, help="Score HEAD even though the hill has uncommitted changes."),
    fast.Option("current", "--current", flag=True, help="Score the working tree, unofficially (tree_hash null)."),
    fast.Option("queue", "--queue", flag=True, help="Wait for the hill's exclusive resource instead of failing."),
    fast.Option("verbose", "-v", "--verbose", flag=True, help="Stream the evaluator's output to stderr."),
    fast.Option("output", "-o", "--output", metavar="FILE", kind=fast.PathKind(dir_okay=False),
                help="Also write the report to FILE; on a terminal, FILE alone gets it."),
    fast.Option("repeat", "--repeat", metavar="N", kind=fast.AtLeast(1),
                help="Run N replicates (fresh seeds, unless hill.yaml says seeds: fixed); metrics are medians, "
                     "with their spread."),
    fast.Option("against", "--against", metavar="REF", kind=fast.PathKind(file_okay=False),
                help="A/B: run REF and the submission in turns, N of each (--repeat N, N >= 2), and sign a "
                     "verdict: improved, indistinguishable or worse."),
    fast.Option("knobs", "-k", "--knob", metavar="NAME=VALUE", multiple=True,
                help="Set a knob the submission declares in params.json (repeatable); refused outside its range."),
    fast.Option("as_json", "--json", flag=True, help="Print the report as one line of JSON and no summary."),
    fast.Option("metric_lines", "--metric-lines", flag=True,
                help="For text loops: print 'METRIC name=value' lines (the metrics, primary first, then "
                     "hills.passed and hills.official as 1 or 0) instead of the report, and no summary; "
                     "none when the eval gives no score."),
    fast.Option("colon_lines", "--colon-lines", flag=True,
                help="As --metric-lines, with each line 'name: value', for loops that grep '^name:'."),
    fast.Option("on", "--on", metavar="ray[://ADDRESS]",
                help="Run each eval on a Ray cluster, in a worker on one of its nodes (the hills[ray] extra); "
                          "see docs/cluster.md."),
    fast.Option("workers", "--workers", metavar="N", kind=fast.AtLeast(1),
                help="With --on: keep at most N evals in flight (default: one per submission)."),
    fast.Option("summary_only", "--summary-only", flag=True,
                help="Print no report on stdout (write it with -o FILE); the summary on stderr still."),
    fast.Option("quiet", "-q", "--quiet", flag=True, help="Print neither progress nor the summary on stderr."),
    fast.Option("progress", "--progress", flag=True,
                help="On a terminal too, print a line per phase on stderr instead of the live line."),
    fast.Option("note", "-m", "--note", metavar="TEXT",
                help="Say in words what this attempt changes: one line of at most 200 characters, kept in "
                     "the attempts log and the report (note) and shown by the journal."),
])


@frozen
class EvalOptions:
    """What `hills eval` was asked, as its parser gives it: one field per
    parameter of DECLARED, by its dest. Click's callback and the fast parse
    make it, the batch path and the standby read it, and the service's eval
    fields (hills.service.requests) give the same names; `request` is the
    one place an EvalRequest is built from it."""

    submissions: tuple[str, ...]
    hill_name: str
    params: tuple[str, ...] = ()
    final: bool = False
    force: bool = False
    current: bool = False
    queue: bool = False
    verbose: bool = False
    output: str | None = None
    repeat: int | None = None
    against: str | None = None
    knobs: tuple[str, ...] = ()
    as_json: bool = False
    metric_lines: bool = False
    colon_lines: bool = False
    on: str | None = None
    workers: int | None = None
    summary_only: bool = False
    quiet: bool = False
    progress: bool = False
    note: str | None = None

    def request(self, target: Hill, submission: str) -> EvalRequest:
        """The eval of `submission` against the resolved hill `target`."""
        from ..run.records import EvalRequest

        return EvalRequest(target, submission, tuple(self.params), final=self.final, force=self.force,
                           current=self.current, queue=self.queue, verbose=self.verbose, repeat=self.repeat,
                           knobs=tuple(self.knobs) or None, note=self.note)

    def batched(self) -> bool:
        """Whether the evals go to the batch path: several DIRs, or --on."""
        return self.on is not None or len(self.submissions) > 1

    def line_style(self) -> str | None:
        """The shape of the text lines asked for instead of the report
        (hills.cli.metric_lines), or None for the report; a combination
        that would mix them with other output is a usage error."""
        if not (self.metric_lines or self.colon_lines):
            return None
        asked = "--metric-lines" if self.metric_lines else "--colon-lines"
        if self.metric_lines and self.colon_lines:
            raise errors.UsageError("--metric-lines and --colon-lines are exclusive",
                                    hint="--metric-lines for 'METRIC name=value', --colon-lines for 'name: value'")
        clash = next((name for name, given in (("--json", self.as_json), ("--summary-only", self.summary_only),
                                               ("--verbose", self.verbose)) if given), None)
        if clash is not None:
            # -v streams the evaluator's output, which submitted code can
            # write into, beside lines a loop reads as the score.
            raise errors.UsageError(f"{asked} and {clash} are exclusive: the lines are the only output on stdout "
                                    "and the only lines a loop reads as a score",
                                    hint="write the report with -o FILE beside the lines; the run folder keeps "
                                         "the evaluator's output")
        if self.batched() or self.against is not None:
            raise errors.UsageError(f"{asked} prints the score of one submission: it takes one DIR, without --on "
                                    "or --against", hint="run one eval per submission")
        return "metric" if self.metric_lines else "colon"


def run(standby: Standby | None = None, **given: Any) -> int:
    """The command as click and the fast parse call it, the options by their
    dests; `standby`: a warm spare's for this call (docs/standby.md), not an
    option."""
    return run_options(EvalOptions(**given), standby)


def run_options(options: EvalOptions, standby: Standby | None = None) -> int:
    """The command: the report on stdout (and in FILE), the summary on stderr;
    with several DIRs or --on, one JSON line per submission, in order.
    `standby`: a warm spare's for this call (docs/standby.md), not an option."""
    problem = errors.first_missing_dependency()
    if problem is not None:
        raise problem
    if options.workers is not None and options.on is None:
        raise errors.UsageError("--workers needs --on", hint="for example --on ray --workers 4")
    style = options.line_style()
    if style is None:
        return _run(options, standby, None)
    from ..cli import metric_lines

    # An error's message can name what the submission named (a file, a
    # link): on one line, it cannot forge a line of the score either.
    with metric_lines.one_line_errors():
        return _run(options, standby, style)


def _run(options: EvalOptions, standby: Standby | None, style: str | None) -> int:
    from ..disk import hill
    from ..run import evaluate

    if options.batched():
        from . import batch

        if options.against is not None:
            raise errors.UsageError("--against compares one submission with REF: it takes one DIR, without --on")
        return batch.run_many(options)
    submission = options.submissions[0]
    request = options.request(hill.resolve(options.hill_name), submission)
    output, as_json, quiet = options.output, options.as_json, options.quiet
    if output:
        check_output_path(output)
    if options.against is not None:
        from . import ab

        return ab.command(request, options.against, options.repeat, output=output, as_json=as_json, quiet=quiet,
                          summary_only=options.summary_only)
    from ..base.progress import LINES, Progress, mode_for

    # On a terminal the header comes first and a live line runs below it;
    # elsewhere, a plain line per phase (hills-eval(1), PROGRESS).
    with Progress(mode_for(quiet or as_json or style is not None, options.progress, options.verbose,
                           elsewhere=LINES), quiet_messages=quiet, at_once=options.verbose) as shown:
        outcome = evaluate.evaluate(request, say=shown, standby=standby)
    if style is not None:
        return _emit_lines(outcome, style, output, quiet)
    if not outcome.crashed:  # a bug in hills prints no report; the funnel says where its traceback is
        _emit_report(outcome.report, output, as_json, options.summary_only)
    if outcome.error is not None:
        raise outcome.error  # the refusal, interrupt or bug: said by the funnel like any other
    if not as_json and not quiet:
        # Loaded here, not with the command: the service's client parses an
        # eval's options with this module and renders nothing itself.
        from ..cli.summary import render

        render(outcome.report, submission, headed=shown.headed)
    return outcome.exit_code


def parsed_options(args: list[str]) -> EvalOptions | None:
    """The options the fast parse gives `hills eval ARGS`; None for an argv
    it leaves to click (help, a mistake)."""
    parsed = DECLARED.parse(args)
    if parsed is None:
        return None
    given: Any = parsed  # the parsed values are the options' own types
    return EvalOptions(**given)


def standby_request(args: list[str]) -> EvalRequest | None:
    """The EvalRequest `hills eval ARGS` makes where a standby can be made
    for it (docs/standby.md): one DIR scored here, without --against, its
    output path fine; None for anything else (help, a mistake included)."""
    options = parsed_options(args)
    if options is None or options.batched() or options.against is not None or options.workers is not None:
        return None
    if options.output:
        check_output_path(options.output)
    from ..disk import hill

    return options.request(hill.resolve(options.hill_name), options.submissions[0])


def _emit_report(report: Report, output: str | None, as_json: bool, summary_only: bool = False) -> None:
    text = json.dumps(report, ensure_ascii=False) if as_json else compact_json(report)
    if output:
        from ..base import state

        state.atomic_write(output, text + "\n")
    if not summary_only and not (output and not as_json and _on_terminal()):
        emit(text)


def _emit_lines(outcome: Outcome, style: str, output: str | None, quiet: bool) -> int:
    """--metric-lines and --colon-lines: the report in FILE only, the lines
    on stdout, and on stderr only a line saying why an eval that ended
    did not pass, its reason on one line, so that no text the submission
    put in it reads as a line of the score. A refusal, an interrupt or a
    bug in hills prints no line and goes to the funnel, as ever."""
    from ..cli import metric_lines
    from ..cli.output import say

    if not outcome.crashed:  # a bug in hills prints no report; the funnel says where its traceback is
        report = outcome.report
        if output:
            from ..base import state

            state.atomic_write(output, compact_json(report) + "\n")
        shaped = metric_lines.render(report, style)
        for line in shaped.lines:
            emit(line)
        for name in shaped.left_out if not quiet else ():
            say(f"warning: metric '{metric_lines.one_line(name)}' has no line: its value is not a finite number, "
                "or its name reads as an earlier line's")
        if outcome.error is None and report.get("status") != "passing" and not quiet:
            reason = metric_lines.one_line(str(report.get("reason") or "no reason given"))
            say(f"hills eval: {report.get('status')}: {reason}")
    if outcome.error is not None:
        raise outcome.error  # the refusal, interrupt or bug: said by the funnel like any other
    return outcome.exit_code


def _on_terminal() -> bool:
    # With -o the report is in FILE: a terminal gets the summary alone,
    # a pipe or a file still gets the JSON (hills-eval(1), OUTPUT).
    try:
        return sys.stdout is not None and sys.stdout.isatty()
    except ValueError:
        return False


def __getattr__(name: str) -> object:
    # The click command is built on first use: the fast path never needs it.
    if name == "command":
        return DECLARED.click_command(run)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
