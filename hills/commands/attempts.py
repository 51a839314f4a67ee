"""`hills attempts`: a hill version's attempts log."""

import click

from ..base import errors
from ..cli.options import CONTEXT, hill_argument, json_option
from ..cli.output import emit, emit_json


@click.command("attempts", context_settings=CONTEXT)
@hill_argument
@click.option("--current", is_flag=True, help="Show the unofficial working-tree attempts instead.")
@click.option("--tree", "tree_hash", metavar="TREE", help="Show the attempts of another version of the hill.")
@json_option
def command(name: str, current: bool, tree_hash: str | None, as_json: bool) -> int:
    """Show a hill version's attempts, its best reports and its log's state.

    Lists every attempt in the version's log, the best passing report per
    comparable group, and whether the log's chain is intact (exactly where it
    breaks if not). Exits 1 when the chain is broken.
    """
    from ..disk import hill
    from ..views import attempts

    target = hill.resolve(name)
    result = attempts.collect(target, current=current, tree_hash=tree_hash)
    if as_json:
        emit_json(result)
    else:
        render(result)
    return errors.EXIT_OK if result["chain"]["ok"] else errors.EXIT_NO


def render(result: dict) -> None:
    """The attempts table, the best reports and the chain's state, on stdout."""
    from ..views import attempts

    attempts.render(result, emit)
