"""`hills attempts`: a hill version's attempts log. Declared as plain data
(hills.cli.fast), so it starts without click: over a long log most of its
time is the log's, not the command line's."""

from __future__ import annotations

from ..base import errors
from ..cli import fast
from ..cli.output import emit, emit_json

HELP = """Show a hill version's attempts, its best reports and its log's state.

    Lists every attempt in the version's log, the best passing report per
    comparable group, and whether the log's chain is intact (exactly where it
    breaks if not). Exits 1 when the chain is broken.
    """

DECLARED = fast.Declared("attempts", HELP, [
    fast.Argument("name", metavar="NAME"),
    fast.Option("current", "--current", flag=True, help="Show the unofficial working-tree attempts instead."),
    fast.Option("tree_hash", "--tree", metavar="TREE", help="Show the attempts of another version of the hill."),
    fast.Option("as_json", "--json", flag=True, help="Print JSON instead of the human table."),
])


def run(name: str, current: bool = False, tree_hash: str | None = None, as_json: bool = False) -> int:
    """The command: the table (or JSON) on stdout; exit 1 when the chain is broken."""
    import gc

    from ..disk import hill
    from ..views import attempts

    # A short process that makes next to no cyclic garbage: collections
    # would walk every entry of a long log again and again.
    gc.disable()

    target = hill.resolve(name)
    result = attempts.collect(target, current=current, tree_hash=tree_hash)
    if as_json:
        emit_json(result)
    else:
        render(result)
    # Left to the process's exit (hills.entry leaves at once after this
    # command): freeing a long log's entries one by one costs tens of ms.
    # The latest only, so a process that runs it again holds no more.
    _KEPT[:] = [result]
    return errors.EXIT_OK if result["chain"]["ok"] else errors.EXIT_NO


_KEPT: list[object] = []


def render(result: dict) -> None:
    """The attempts table, the best reports and the chain's state, on stdout."""
    from ..views import attempts

    attempts.render(result, emit)


def __getattr__(name: str) -> object:
    # The click command is built on first use: the fast path never needs it.
    if name == "command":
        return DECLARED.click_command(run)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
