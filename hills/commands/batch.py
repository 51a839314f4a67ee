"""`hills eval DIR... -H NAME`: several submissions, scored in turn here or
as tasks on a Ray cluster (`--on`); one JSON line per submission on stdout,
in the order given, and the worst exit code."""

from __future__ import annotations

import json
import os

from ..base import errors
from ..cli.output import emit, say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from ..disk.hill import Hill
    from .eval import EvalOptions


def run_many(options: EvalOptions) -> int:
    """Each submission's eval, here or with --on on a cluster; --json or
    --quiet say no summaries, --summary-only prints no lines (FILE gets them)."""
    from ..disk import hill
    from ..cli.output import check_output_path

    submissions, output, on = options.submissions, options.output, options.on
    for submission in submissions:
        if not os.path.isdir(submission):
            raise errors.UsageError(f"submission '{submission}' is not a folder",
                                    hint="a submission is a folder; pass its path")
    if output:
        check_output_path(output)
    target = hill.resolve(options.hill_name)
    if on is not None:
        for flag, given in (("--current", options.current), ("--force", options.force), ("-v", options.verbose)):
            if given:
                raise errors.UsageError(f"{flag} cannot be combined with --on",
                                        hint="a cluster scores the committed version, and the evaluator's output "
                                             "stays on the node that ran it")
        lines = _on_cluster(target, on, options)
    else:
        lines = _here(target, options)
    codes, texts, crash = [], [], None
    for line, code, error in lines:
        text = json.dumps(line, ensure_ascii=False)
        if not options.summary_only:
            emit(text)
        texts.append(text)
        codes.append(code)
        if isinstance(error, KeyboardInterrupt):
            _write_output(output, texts)
            raise error
        if error is not None and crash is None and code == errors.EXIT_BUG:
            crash = error
    _write_output(output, texts)
    if crash is not None:
        raise crash  # the first bug, said by the funnel with its crash log
    return errors.worst(codes)


def _write_output(output: str | None, texts: list[str]) -> None:
    if output:
        from ..base import state

        state.atomic_write(output, "".join(text + "\n" for text in texts))


def _tell(message: str | None, hint: str | None) -> None:
    if message:
        say(f"error: {message}")
        if hint:
            say(f"hint: {hint}")


def _here(target: Hill, options: EvalOptions) -> Iterator[tuple[Mapping[str, Any], int, BaseException | None]]:
    """Each submission's eval in turn, as (line, exit code, what stopped it)."""
    from ..run import evaluate
    from ..cli.summary import render

    summaries = not (options.as_json or options.quiet)
    for submission in options.submissions:
        request = options.request(target, submission)
        try:
            outcome = evaluate.evaluate(request, say=say)
        except errors.NotScored:
            raise  # the hill allows no score: none of the others would get one
        except errors.HillsError as exc:
            _tell(exc.message, exc.hint)
            yield ({"submission": submission, "status": "refused", "passed": False, "reason": exc.message},
                   exc.exit_code, None)
            continue
        if outcome.error is not None and not outcome.crashed and not isinstance(outcome.error, KeyboardInterrupt):
            _tell(outcome.message, outcome.hint)
        elif summaries and outcome.error is None:
            render(outcome.report, submission)
        yield outcome.report, outcome.exit_code, outcome.error


def _on_cluster(target: Hill, on: str,
                options: EvalOptions) -> Iterator[tuple[Mapping[str, Any], int, BaseException | None]]:
    """Each submission as an eval on the cluster `on`, --workers at a time, yielded in input order."""
    import concurrent.futures

    from .. import cluster
    from ..cli.summary import render

    summaries = not (options.as_json or options.quiet)
    session = cluster.Session(target, on, say)
    jobs = [cluster.Job(submission, tuple(options.params), tuple(options.knobs) or None, options.final, options.repeat,
                        options.note)
            for submission in options.submissions]
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=options.workers or len(jobs)) as pool:
            try:
                for result in pool.map(session.run, jobs):
                    _tell(result.message, result.hint)
                    if result.report is not None and summaries:
                        render(result.report, result.job.submission)
                    yield result.line, result.exit_code, None
            except KeyboardInterrupt:
                session.cancel()  # the jobs in flight end at once, so the pool's threads do
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        session.close()
