"""`hills rescore`: re-run the kept snapshots of an older version's official
evals against the hill's HEAD and list the scores that moved."""

import math

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import emit, emit_json, say


@click.command("rescore", context_settings=CONTEXT)
@hill_argument
@click.option("--from", "from_tree", metavar="TREE", required=True,
              help="The older version (a commit or tree hash) whose official reports are re-run.")
@json_option
def command(name: str, from_tree: str, as_json: bool) -> int:
    """Re-run an older version's official evals against HEAD; list the scores that moved.

    Each official report logged for version TREE whose submission snapshot
    hills kept is evaluated again against the hill's HEAD, with the same
    params, as an ordinary logged eval. The scores that moved are listed
    worst collapse first (a report that no longer passes first); the
    reports whose snapshot is no longer kept are named. Exits 1 when a
    score moved.
    """
    from ..disk import hill
    from ..many import rescore

    target = hill.resolve(name)
    result = rescore.rescore(target, rescore.resolve_tree(target, from_tree), say)
    for row in result["rows"]:
        if row["collapse"] == math.inf:
            row["collapse"] = None  # JSON has no infinity: no longer passing
    if as_json:
        emit_json(result)
    else:
        render(result)
    return errors.EXIT_NO if result["moved"] else errors.EXIT_OK


def _value(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def render(result: dict) -> None:
    emit(f"{result['hill']}: {len(result['rows'])} submission(s) of {result['from_tree'][:12]} re-scored at "
         f"{result['to_tree'][:12]}, {len(result['moved'])} moved")
    if result["moved"]:
        emit(f"  {'SUBMISSION':<19}  {'OLD':>12}  {'NEW':>12}  CHANGE")
    for row in result["moved"]:
        change = "no longer passing" if row["collapse"] is None else f"{-row['collapse']:+.6g} ({row['direction']})"
        status = "" if row["new_status"] == row["old_status"] else f"  {row['old_status']} -> {row['new_status']}"
        emit(f"  {str(row['submission_hash'])[:19]:<19}  {_value(row['old']):>12}  {_value(row['new']):>12}  "
             f"{change}{status}")
    for missing in result["missing"]:
        emit(f"  not kept: {missing} (its snapshot was pruned, or the eval predates the store)")
