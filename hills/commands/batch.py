"""`hills eval DIR... -H NAME`: several submissions, scored in turn here or
as tasks on a Ray cluster (`--on`); one JSON line per submission on stdout,
in the order given, and the worst exit code."""

from __future__ import annotations

import json
import os

from .. import errors
from .output import emit, say

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


def run_many(submissions: tuple[str, ...], hill_name: str, params: tuple[str, ...], *, final: bool, force: bool,
             current: bool, queue: bool, verbose: bool, output: str | None, as_json: bool, repeat: int | None,
             knobs: tuple[str, ...], on: str | None, workers: int | None, summary_only: bool = False) -> int:
    """Each submission's eval, here or with `on` on a cluster; `as_json`
    says no summaries, `summary_only` prints no lines (FILE gets them)."""
    from .. import hill
    from .eval import _check_output_path

    for submission in submissions:
        if not os.path.isdir(submission):
            raise errors.UsageError(f"submission '{submission}' is not a folder",
                                    hint="a submission is a folder; pass its path")
    if output:
        _check_output_path(output)
    target = hill.resolve(hill_name)
    if on is not None:
        for flag, given in (("--current", current), ("--force", force), ("-v", verbose)):
            if given:
                raise errors.UsageError(f"{flag} cannot be combined with --on",
                                        hint="a cluster scores the committed version, and the evaluator's output "
                                             "stays on the node that ran it")
        lines = _on_cluster(target, submissions, params, final, repeat, knobs, on, workers, as_json)
    else:
        lines = _here(target, submissions, params, final, force, current, queue, verbose, repeat, knobs, as_json)
    codes, texts, crash = [], [], None
    for line, code, error in lines:
        text = json.dumps(line, ensure_ascii=False)
        if not summary_only:
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
        from .. import state

        state.atomic_write(output, "".join(text + "\n" for text in texts))


def _tell(message: str | None, hint: str | None) -> None:
    if message:
        say(f"error: {message}")
        if hint:
            say(f"hint: {hint}")


def _here(target: Any, submissions: tuple[str, ...], params: tuple[str, ...], final: bool, force: bool,
          current: bool, queue: bool, verbose: bool, repeat: int | None, knobs: tuple[str, ...],
          as_json: bool) -> Iterator[tuple[dict[str, Any], int, BaseException | None]]:
    """Each submission's eval in turn, as (line, exit code, what stopped it)."""
    from .. import evaluate
    from .eval import render

    for submission in submissions:
        request = evaluate.EvalRequest(target, submission, tuple(params), final=final, force=force, current=current,
                                       queue=queue, verbose=verbose, repeat=repeat, knobs=tuple(knobs) or None)
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
        elif not as_json and outcome.error is None:
            render(outcome.report, submission)
        yield outcome.report, outcome.exit_code, outcome.error


def _on_cluster(target: Any, submissions: tuple[str, ...], params: tuple[str, ...], final: bool,
                repeat: int | None, knobs: tuple[str, ...], on: str, workers: int | None,
                as_json: bool) -> Iterator[tuple[dict[str, Any], int, BaseException | None]]:
    """Each submission as an eval on the cluster, `workers` at a time, yielded in input order."""
    import concurrent.futures

    from .. import cluster
    from .eval import render

    session = cluster.Session(target, on, say)
    jobs = [cluster.Job(submission, tuple(params), tuple(knobs) or None, final, repeat) for submission in submissions]
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers or len(jobs)) as pool:
            try:
                for result in pool.map(session.run, jobs):
                    _tell(result.message, result.hint)
                    if result.report is not None and not as_json:
                        render(result.report, result.job.submission)
                    yield result.line, result.exit_code, None
            except KeyboardInterrupt:
                session.cancel()  # the jobs in flight end at once, so the pool's threads do
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        session.close()
